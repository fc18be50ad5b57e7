package testlevel

import "testing"

func TestPick(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
	}{{"", 5}, {"0", 5}, {"1", 50}, {"yes", 50}} {
		t.Setenv(Env, tc.env)
		if got := Pick(5, 50); got != tc.want {
			t.Errorf("%s=%q: Pick(5, 50) = %d, want %d", Env, tc.env, got, tc.want)
		}
	}
}

func ExamplePick() {
	kills := Pick(5, 50) // five in make test, fifty in make soak
	_ = kills
}
