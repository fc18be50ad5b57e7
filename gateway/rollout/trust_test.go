package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/fleetmode"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/artifact/sigtest"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// secureBoards starts n fleet-mode boards of which the first nSecure burn
// ks.Burned() and then revoke ks.Revoked (as a rotation release would):
// they trust ks.Trusted only. The others stay open.
func secureBoards(t *testing.T, n, nSecure int, ks sigtest.Keys) *boards {
	t.Helper()
	bs := startBoardsOTA(t, n, func(o *fleetmode.OTAOptions) {
		o.Keys = func(i int) []image.KeyDigest {
			if i < nSecure {
				return ks.Burned()
			}
			return nil
		}
	})
	for i, in := range bs.fm.Boards()[:nSecure] {
		fl, err := flash.Open(in.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, done, err := efuse.Open(fl.Dir()).Revoke([]image.KeyDigest{ks.Trusted.Digest}, []image.KeyDigest{ks.Revoked.Digest}); err != nil || len(done) != 1 {
			t.Fatalf("board %d: revoking: %v %v", i, done, err)
		}
	}
	return bs
}

// otaShot is what must not change on a board that refuses an image: its
// slots (what they hold, their states, which runs and which boots) and
// its update session.
type otaShot struct {
	Slots   []boardapi.OTASlot
	Session string
	SHA     string
}

func shoot(t *testing.T, url string) otaShot {
	t.Helper()
	b, err := httpGet(url + "/api/v1/ota")
	if err != nil {
		t.Fatal(err)
	}
	var st boardapi.OTAStatus
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("GET /ota: %v: %s", err, b)
	}
	s := otaShot{Slots: st.Slots, Session: st.Session.State}
	if st.Session.SHA256 != nil {
		s.SHA = *st.Session.SHA256
	}
	return s
}

func shootAll(t *testing.T, bs *boards) []otaShot {
	var out []otaShot
	for _, u := range bs.urls {
		out = append(out, shoot(t, u))
	}
	return out
}

// TestDryRunRefusesUntrusted: every image a secure board would refuse is
// refused for that board at dry run and at create, the board named with
// the reason; the open board is still selected; a good image selects
// every board. No board changes.
func TestDryRunRefusesUntrusted(t *testing.T) {
	ks := sigtest.NewKeys(t)
	bs := secureBoards(t, 3, 2, ks)
	g := startGateway(t, t.TempDir(), bs.urls, nil)
	g.waitOnline(t, 3)
	before := shootAll(t, bs)
	ctx := context.Background()
	for _, c := range sigtest.Cases(t, ks, "2.0.0") {
		if c.Structural {
			// Refused by the store itself (TestUploadTrust in package
			// artifact): never an artifact, never in a rollout.
			if _, _, err := g.arts.Add(ctx, strings.NewReader(string(c.Image)), "x", ""); !errors.Is(err, artifact.ErrInvalid) {
				t.Fatalf("%s: stored (%v)", c.Name, err)
			}
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			a := g.add(t, c.Image)
			plan := rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}}
			sel, err := g.eng.DryRun(ctx, plan)
			if err != nil {
				t.Fatal(err)
			}
			if c.Want == nil {
				if sel.Boards() != 3 || len(sel.Refused) != 0 || len(sel.Unchecked) != 0 {
					t.Fatalf("selection %+v, want every board", sel)
				}
				return
			}
			if sel.Boards() != 1 || sel.Waves[0][0] != bs.ids[2] || len(sel.Refused) != 2 {
				t.Fatalf("selection %+v, want only the open board", sel)
			}
			want := strings.TrimPrefix(c.Want.Error(), "image: ")
			for _, r := range sel.Refused {
				if !slices.Contains(bs.ids[:2], r.Board) || !strings.Contains(r.Reason, "secure boot would refuse the image") || !strings.Contains(r.Reason, want) ||
					!strings.Contains(r.Reason, ks.Trusted.Digest.Short()) {
					t.Errorf("refusal %+v, want a secure board refused with %q", r, want)
				}
			}
			// Create refuses the same boards; with only secure boards
			// targeted it refuses the plan and names each.
			plan.Target = rollout.Target{Boards: bs.ids[:2]}
			_, err = g.eng.Create(ctx, plan)
			if !errors.Is(err, rollout.ErrPlan) || !strings.Contains(err.Error(), bs.ids[0]+": secure boot") || !strings.Contains(err.Error(), bs.ids[1]+": secure boot") {
				t.Fatalf("create: %v", err)
			}
			plan.Canaries = []string{bs.ids[0]}
			plan.Target = rollout.Target{All: true}
			if _, err := g.eng.Create(ctx, plan); !errors.Is(err, rollout.ErrPlan) || !strings.Contains(err.Error(), "canary "+bs.ids[0]+" is refused: secure boot") {
				t.Fatalf("create with a refused canary: %v", err)
			}
			if len(g.eng.List()) != 0 {
				t.Fatalf("a rollout was created: %+v", g.eng.List())
			}
		})
	}
	if d := cmp.Diff(shootAll(t, bs), before); d != "" {
		t.Fatalf("boards changed (-got +want):\n%s", d)
	}
}

// TestNeverSentUntrusted: boards whose keys were not read at create (the
// check timed out) are checked again before the image leaves; a secure
// board never receives an image it does not trust and ends failed with
// the reason, unchanged, while the open board is updated. A good image
// (three blocks, the last trusted) then goes to every board.
func TestNeverSentUntrusted(t *testing.T) {
	ks := sigtest.NewKeys(t)
	bs := secureBoards(t, 3, 2, ks)
	g := startGateway(t, t.TempDir(), bs.urls, func(o *rollout.Options) { o.TrustTimeout = time.Nanosecond })
	g.waitOnline(t, 3)
	ctx := context.Background()
	cases := sigtest.Cases(t, ks, "2.0.0")
	for _, c := range cases {
		if c.Structural || c.Want == nil {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			before := shootAll(t, bs)[:2]
			a := g.add(t, c.Image)
			st, err := g.eng.Create(ctx, rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{Boards: bs.ids[:2]}})
			if err != nil {
				t.Fatal(err)
			}
			st = g.waitState(t, st.ID, 30*time.Second, rollout.StatePaused)
			got, err := g.eng.Boards(st.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.TrimPrefix(c.Want.Error(), "image: ")
			// The first refusal pauses the rollout (its failure
			// threshold): a board whose own check had not ended by then
			// stays pending, never sent. Which board is first is a race.
			failed := 0
			for _, b := range got {
				switch {
				case b.Phase == rollout.PhaseFailed && strings.Contains(b.Error, "secure boot would refuse the image") && strings.Contains(b.Error, want):
					failed++
				case b.Phase == rollout.PhasePending:
				default:
					t.Errorf("board %s: %s %q, want failed with %q (or pending)", b.Board, b.Phase, b.Error, want)
				}
				if slices.ContainsFunc(b.Timeline, func(s rollout.Step) bool { return s.Phase == rollout.PhaseStaging }) {
					t.Errorf("board %s went staging: %+v", b.Board, b.Timeline)
				}
			}
			if failed == 0 {
				t.Errorf("no board failed with %q: %+v", want, got)
			}
			if d := cmp.Diff(shootAll(t, bs)[:2], before); d != "" {
				t.Fatalf("boards changed (-got +want):\n%s", d)
			}
			if _, err := g.eng.Abort(ctx, st.ID, "test"); err != nil {
				t.Fatal(err)
			}
			g.waitState(t, st.ID, 10*time.Second, rollout.StateAborted)
		})
	}
	if n := g.eng.BytesSent(); n != 0 {
		t.Fatalf("%d image bytes sent", n)
	}
	good := cases[len(cases)-1]
	a := g.add(t, good.Image)
	if a.Trust != artifact.TrustSigned || len(a.Signers) != 3 {
		t.Fatalf("artifact %+v", a)
	}
	st, err := g.eng.Create(ctx, rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Image.Signers) != 3 || st.Image.Trust != artifact.TrustSigned {
		t.Fatalf("rollout image %+v", st.Image)
	}
	st = g.waitState(t, st.ID, 60*time.Second, rollout.StateDone)
	if st.Progress.Phases[rollout.PhaseSucceeded] != 3 {
		t.Fatalf("progress %+v", st.Progress)
	}
	for i, u := range bs.urls {
		for _, s := range shoot(t, u).Slots {
			if s.Running && (s.App == nil || s.App.Version != "2.0.0" || len(s.Signers) != 3) {
				t.Errorf("board %d runs %+v", i, s)
			}
		}
	}
}

// TestGatewayKeysAdmit: a gateway with trusted keys does not roll out an
// artifact kept before it had them, unless one of them signs it.
func TestGatewayKeysAdmit(t *testing.T) {
	ks := sigtest.NewKeys(t)
	bs := startBoards(t, 1)
	dir := t.TempDir()
	g := startGateway(t, dir, bs.urls, nil)
	g.waitOnline(t, 1)
	plain := g.add(t, sigtest.Image(t, "2.0.0", 800))
	signed := g.add(t, sigtest.Sign(t, sigtest.Image(t, "2.0.1", 800), ks.Trusted))
	g.stop()
	g = startGatewayKeys(t, dir, bs.urls, []image.KeyDigest{ks.Trusted.Digest})
	g.waitOnline(t, 1)
	_, err := g.eng.DryRun(context.Background(), rollout.Plan{Artifact: plain.SHA256, Target: rollout.Target{All: true}})
	if !errors.Is(err, rollout.ErrArtifact) || !errors.Is(err, artifact.ErrUntrusted) || !strings.Contains(err.Error(), "not signed") {
		t.Fatalf("dry run of an unsigned artifact under keys: %v", err)
	}
	sel, err := g.eng.DryRun(context.Background(), rollout.Plan{Artifact: signed.SHA256, Target: rollout.Target{All: true}})
	if err != nil || sel.Boards() != 1 {
		t.Fatalf("dry run of a trusted artifact: %+v %v", sel, err)
	}
}

// BenchmarkDryRunKeys dry-runs a plan over 32 fleet-mode boards (16 with
// secure boot) and reports what reading and checking every board's keys
// costs: keys-ms is one dry run that reads them, plan-ms one that does not
// (the read cut off at once: every board unchecked), keyread-ratio the one
// over the other, and per-board-us the extra time per board.
func BenchmarkDryRunKeys(b *testing.B) {
	const n = 32
	ks := sigtest.NewKeys(b)
	bs := startBoardsOTA(b, n, func(o *fleetmode.OTAOptions) {
		o.Keys = func(i int) []image.KeyDigest {
			if i%2 == 0 {
				return []image.KeyDigest{ks.Trusted.Digest}
			}
			return nil
		}
	})
	dir := b.TempDir()
	g := startGateway(b, dir, bs.urls, nil)
	g.waitOnline(b, n)
	img := sigtest.Sign(b, sigtest.Image(b, "2.0.0", 4000), ks.Unknown)
	a := g.add(b, img)
	noKeys := startGateway(b, b.TempDir(), bs.urls, func(o *rollout.Options) { o.TrustTimeout = time.Nanosecond })
	noKeys.waitOnline(b, n)
	noKeys.add(b, img)
	plan := rollout.Plan{Artifact: a.SHA256, Target: rollout.Target{All: true}}
	ctx := context.Background()
	var keys, plain time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		sel, err := g.eng.DryRun(ctx, plan)
		keys += time.Since(t0)
		if err != nil || len(sel.Refused) != n/2 {
			b.Fatalf("%+v %v", sel, err)
		}
		t0 = time.Now()
		sel, err = noKeys.eng.DryRun(ctx, plan)
		plain += time.Since(t0)
		if err != nil || len(sel.Unchecked) != n {
			b.Fatalf("%+v %v", sel, err)
		}
	}
	runs := float64(b.N)
	b.ReportMetric(keys.Seconds()*1000/runs, "keys-ms")
	b.ReportMetric(plain.Seconds()*1000/runs, "plan-ms")
	b.ReportMetric(float64(keys)/float64(plain), "keyread-ratio")
	b.ReportMetric((keys-plain).Seconds()*1e6/runs/n, "per-board-us")
}
