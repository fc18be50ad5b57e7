package mqtt_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/artifact/sigtest"
	"github.com/holofleet/holofleet/gateway/mqtt"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// TestReleaseSummaryTrust: the HA update entity's release_summary says
// whether the offered image is unsigned, signed by a key the gateway does
// not trust, or signed by one it trusts (from the update channel, and
// from a rollout while the board is in it); bridge/rollout/<id> carries
// the image's trust and signers.
func TestReleaseSummaryTrust(t *testing.T) {
	if testing.Short() {
		t.Skip("integration")
	}
	t.Parallel()
	const long = 30 * time.Second
	url := brokerCases()[0].start(t) // the summary does not depend on the broker
	trusted, other := sigtest.NewKey(t), sigtest.NewKey(t)
	fr := startFWRigKeys(t, url, 1, nil)
	b := fr.base
	rc := newRecorder(t, url, b+"/#")
	names := fr.waitOnline(t)
	upd := b + "/" + names[0] + "/update"
	add := func(img []byte) artifact.Artifact {
		a, _, err := fr.arts.Add(t.Context(), bytes.NewReader(img), "fw.bin", "")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	publishOn := func(a artifact.Artifact) {
		if _, err := fr.arts.SetChannel(mqtt.DefaultUpdateChannel, a.SHA256, ""); err != nil {
			t.Fatal(err)
		}
	}
	summary := func(v map[string]any) string { s, _ := v["release_summary"].(string); return s }

	publishOn(add(sigtest.Image(t, "2.1.0", 2000)))
	rc.waitLast(long, upd, func(v map[string]any) bool {
		return v["latest_version"] == "2.1.0" && strings.Contains(summary(v), "unsigned image")
	})
	signed := add(sigtest.Sign(t, sigtest.Image(t, "2.2.0", 2000), other))
	publishOn(signed)
	rc.waitLast(long, upd, func(v map[string]any) bool {
		return v["latest_version"] == "2.2.0" && strings.Contains(summary(v), "signed by "+other.Digest.Short()+", not a key the gateway trusts")
	})

	// A rollout's image is offered while the board is in it, with its
	// own summary; its topic says who signed it.
	st, err := fr.eng.Create(t.Context(), rollout.Plan{Artifact: add(sigtest.Sign(t, sigtest.Image(t, "2.3.0", 2000), other, trusted)).SHA256,
		Target: rollout.Target{All: true}})
	if err != nil {
		t.Fatal(err)
	}
	done := rc.waitLast(long, b+"/bridge/rollout/"+st.ID, func(v map[string]any) bool { return v["state"] == rollout.StateDone })
	if done["trust"] != artifact.TrustSigned || len(done["signers"].([]any)) != 2 {
		t.Errorf("rollout topic %v", done)
	}
	var sawRollout bool
	for _, m := range rc.all() {
		if m.Topic == upd && bytes.Contains(m.Payload, []byte(`"latest_version":"2.3.0"`)) &&
			bytes.Contains(m.Payload, []byte("signed by "+other.Digest.Short()+", "+trusted.Digest.Short())) {
			sawRollout = true
		}
	}
	if !sawRollout {
		t.Error("the update entity never offered the rollout's image with its signers")
	}

	// A gateway trusting the key says so.
	fr2 := startFWRigKeys(t, url, 1, []image.KeyDigest{trusted.Digest})
	rc2 := newRecorder(t, url, fr2.base+"/#")
	names2 := fr2.waitOnline(t)
	a, _, err := fr2.arts.Add(t.Context(), bytes.NewReader(sigtest.Sign(t, sigtest.Image(t, "2.4.0", 2000), other, trusted)), "fw.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fr2.arts.SetChannel(mqtt.DefaultUpdateChannel, a.SHA256, ""); err != nil {
		t.Fatal(err)
	}
	rc2.waitLast(long, fr2.base+"/"+names2[0]+"/update", func(v map[string]any) bool {
		s := summary(v)
		return v["latest_version"] == "2.4.0" && strings.Contains(s, "signed by "+trusted.Digest.Short()+", a key the gateway trusts") &&
			!strings.Contains(s, other.Digest.Short())
	})
}
