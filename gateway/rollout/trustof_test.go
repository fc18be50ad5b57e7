package rollout

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/gateway/fleet"
)

func TestTrustOf(t *testing.T) {
	a, b := image.KeyDigest{0xaa}, image.KeyDigest{0xbb}
	cases := []struct {
		name string
		in   boardapi.SecureBootStatus
		want image.Trust
		err  error
		text string // trustNames
	}{
		{"off", boardapi.SecureBootStatus{}, image.Trust{}, nil, ""},
		{"off with keys listed", boardapi.SecureBootStatus{Keys: []boardapi.TrustedKey{{Digest: a.String()}}}, image.Trust{}, nil, ""},
		{"on", boardapi.SecureBootStatus{Enabled: true, Keys: []boardapi.TrustedKey{{Digest: a.String(), Revoked: true}, {Digest: b.String()}}},
			image.Trust{Keys: []image.KeyDigest{a, b}, Revoked: []image.KeyDigest{a}}, nil, "the board trusts " + b.Short() + "; revoked " + a.Short()},
		{"on, every key revoked", boardapi.SecureBootStatus{Enabled: true, Keys: []boardapi.TrustedKey{{Digest: a.String(), Revoked: true}}},
			image.Trust{Keys: []image.KeyDigest{a}, Revoked: []image.KeyDigest{a}}, nil, "the board trusts no key; revoked " + a.Short()},
		{"on without keys", boardapi.SecureBootStatus{Enabled: true}, image.Trust{}, fleet.ErrBadReply, ""},
		{"bad digest", boardapi.SecureBootStatus{Enabled: true, Keys: []boardapi.TrustedKey{{Digest: "xyz"}}}, image.Trust{}, fleet.ErrBadReply, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := trustOf(c.in)
			if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
				t.Fatalf("err %v, want %v", err, c.err)
			}
			if err != nil {
				return
			}
			if d := cmp.Diff(got, c.want); d != "" {
				t.Fatalf("(-got +want):\n%s", d)
			}
			if c.text != "" && trustNames(got) != c.text {
				t.Fatalf("names %q, want %q", trustNames(got), c.text)
			}
		})
	}
}

// TestNoBoardNamesRefusals: a plan left with no board says which boards
// were refused and why, at most maxListed of them.
func TestNoBoardNamesRefusals(t *testing.T) {
	p := Plan{Artifact: "x", Target: Target{All: true}}
	if err := p.normalise(); err != nil {
		t.Fatal(err)
	}
	var s Selection
	for i := range maxListed + 2 {
		s.Refused = append(s.Refused, Refusal{Board: strings.Repeat("b", i+1), Reason: "secure boot would refuse the image"})
	}
	err := s.formWaves(&p, nil)
	if !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), "(12 refused: b: secure boot") || !strings.Contains(err.Error(), "and 2 more)") {
		t.Fatalf("%v", err)
	}
	p.Canaries = []string{"bb"}
	if err := s.formWaves(&p, []string{"c"}); !errors.Is(err, ErrPlan) || !strings.Contains(err.Error(), "canary bb is refused: secure boot") {
		t.Fatalf("%v", err)
	}
}
