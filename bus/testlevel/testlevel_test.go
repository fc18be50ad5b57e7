package testlevel

import (
	"flag"
	"testing"
)

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

func TestParallel(t *testing.T) {
	f := flag.Lookup("test.parallel")
	was := f.Value.String()
	t.Cleanup(func() { _ = flag.Set("test.parallel", was) })
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if err := Parallel(7); err != nil {
		t.Fatal(err)
	}
	want := "7"
	if given {
		want = was // the command line's -parallel wins
	}
	if got := f.Value.String(); got != want {
		t.Errorf("-parallel %s after Parallel(7), want %s", got, want)
	}
}
