package fleetv1

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerateReproducible runs the generators of `make generate` on a copy
// of proto/ and checks that they write exactly the committed files. It is
// skipped where `make tools` has not installed them.
func TestGenerateReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("runs buf")
	}
	gobin := ""
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gobin = filepath.Join(strings.TrimSpace(string(out)), "bin")
	}
	path := gobin + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, tool := range []string{"buf", "protoc-gen-go", "protoc-gen-go-grpc", "protoc-gen-grpc-gateway", "protoc-gen-openapiv2"} {
		if !found(tool, path) {
			t.Skipf("%s not installed (make tools)", tool)
		}
	}
	src := filepath.Join("..", "..", "..") // proto/
	dst := t.TempDir()
	inputs := []string{"buf.yaml", "buf.gen.yaml", "holo/fleet/v1/fleet.proto", "holo/fleet/v1/installation.proto",
		"holo/fleet/v1/fleet_gateway.yaml", "holo/fleet/v1/fleet_openapi.yaml"}
	for _, f := range inputs {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("buf", "generate")
	cmd.Dir = dst
	cmd.Env = append(os.Environ(), "PATH="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("buf generate: %v\n%s", err, out)
	}
	for _, f := range []string{"fleet.pb.go", "fleet_grpc.pb.go", "fleet.pb.gw.go", "fleet.swagger.json",
		"installation.pb.go", "installation_grpc.pb.go", "installation.swagger.json"} {
		got, err := os.ReadFile(filepath.Join(dst, "holo/fleet/v1", f))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what make generate writes: run make tools && make generate", f)
		}
	}
}

func found(tool, path string) bool {
	for _, dir := range filepath.SplitList(path) {
		if st, err := os.Stat(filepath.Join(dir, tool)); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return true
		}
	}
	return false
}
