package boardtest

import (
	"slices"
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	for _, tc := range []struct {
		name, gorace, want string
	}{
		{"no GORACE", "", "GORACE=atexit_sleep_ms=0"},
		{"the caller's kept", "halt_on_error=1", "GORACE=halt_on_error=1 atexit_sleep_ms=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GORACE", tc.gorace)
			env := Env()
			var races []string
			for _, kv := range env {
				if strings.HasPrefix(kv, "GORACE=") {
					races = append(races, kv)
				}
			}
			if !slices.Equal(races, []string{tc.want}) {
				t.Errorf("GORACE entries %q, want [%q]", races, tc.want)
			}
			if !slices.Contains(env, TestKDFEnv+"=1") {
				t.Errorf("%s missing", TestKDFEnv)
			}
		})
	}
}
