package nettest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Grpcurl returns functions running grpcurl -plaintext with args, the
// real gRPC client working from the server's reflection alone: the first
// returns its output and error, the second its output and fails the test
// on an error. It skips the test where grpcurl is not installed (fails it
// in CI, whose .ci/run installs it).
func Grpcurl(t testing.TB) (try func(args ...string) (string, error), run func(args ...string) string) {
	t.Helper()
	bin, err := exec.LookPath("grpcurl")
	if err != nil {
		// Where `go install` puts it, when that is not on PATH.
		if out, gerr := exec.Command("go", "env", "GOPATH").Output(); gerr == nil {
			p := filepath.Join(strings.TrimSpace(string(out)), "bin", "grpcurl")
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("grpcurl not installed (go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3)")
		}
		t.Skip("grpcurl not installed (go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3; CI installs it)")
	}
	try = func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, append([]string{"-plaintext"}, args...)...).CombinedOutput()
		return string(out), err
	}
	run = func(args ...string) string {
		t.Helper()
		out, err := try(args...)
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return out
	}
	return try, run
}
