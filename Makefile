# holofleet developer workflow. `make` (or `make help`) lists the targets.

GO        ?= go
PKGS      ?= ./...
BIN       ?= bin
FUZZTIME  ?= 5s
BENCHTIME ?= 1s
REPORT    ?= $(BIN)/bench-report.md
VERSION   ?= 0.0.0-dev
LDFLAGS   := -s -w -X github.com/holofleet/holofleet/firmware/buildinfo.Version=$(VERSION)
COMMANDS  := $(notdir $(wildcard cmd/*))

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets with a line on each
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-10s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## The main job: the gateway with an embedded broker and a simulated installation
	@if [ -d cmd/holo-gateway ]; then $(GO) run ./cmd/holo-gateway demo; \
	else echo "holo-gateway does not exist yet (issue 7); run one board instead: go run ./cmd/holo-board --data /tmp/holo-board --http 127.0.0.1:8080"; fi

.PHONY: test
test: ## The full suite: go vet, then every test with the race detector
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

.PHONY: bench
bench: ## Benchmarks and ratio checks; writes $(REPORT)
	@mkdir -p $(BIN)
	$(GO) run ./cmd/holoctl bench --out $(REPORT) --benchtime $(BENCHTIME)
	@echo "report: $(REPORT)"

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME (default 5s) each
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; done

.PHONY: lint
lint: ## go vet, gofmt and staticcheck
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) run honnef.co/go/tools/cmd/staticcheck@2025.1.1 $(PKGS)

.PHONY: generate
generate: ## Regenerate generated code (protobuf stubs and the like)
	$(GO) generate $(PKGS)

.PHONY: build
build: ## Build every binary into bin/, plus linux/arm64 and linux/arm cross-builds
	@mkdir -p $(BIN)
	@for c in $(COMMANDS); do \
	  echo "build $$c"; \
	  CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/$$c ./cmd/$$c || exit 1; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/linux-arm64/$$c ./cmd/$$c || exit 1; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=arm GOARM=7 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/linux-arm/$$c ./cmd/$$c || exit 1; \
	done

.PHONY: clean
clean: ## Remove build output
	rm -rf $(BIN)
