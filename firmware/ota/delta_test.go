package ota

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/holofleet/holofleet/bus/imagedelta"
	"github.com/holofleet/holofleet/firmware/ota/flash"
)

// TestDeltaUpload: a delta from the running image rebuilds the new image
// in the free slot and stages it as a full upload would; a delta from
// another base is 409 base_mismatch, a corrupt one 422 invalid_image, and
// neither changes the free slot (its bytes) nor otadata.
func TestDeltaUpload(t *testing.T) {
	e := newEnv(t)
	base := testImage(t, "1.0.0", "holo-board", 5000)
	st := e.status()
	if st.Slots[0].SHA256 != shaHex(base) || st.Slots[1].SHA256 != "" {
		t.Fatalf("running slot sha256 %q, want %s", st.Slots[0].SHA256, shaHex(base))
	}
	// Something staged in ota_1 first: the refusals below must leave it.
	prev := testImage(t, "1.5.0", "holo-board", 20000)
	if r := e.upload(prev, ""); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	fl, _ := flash.Open(e.dir)
	slotFile := filepath.Join(fl.Dir(), flash.Slots[1])
	if _, err := os.Stat(slotFile); err != nil {
		t.Fatalf("slot file: %v", err)
	}
	target := testImage(t, "2.0.0", "holo-board", 300000)
	delta, err := imagedelta.Make(base, target)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := imagedelta.Make(prev, target)
	corrupt := bytes.Clone(delta)
	corrupt[len(corrupt)/2+imagedelta.HeaderSize/2] ^= 0xff
	wrongTarget := testImage(t, "2.0.1", "holo-board", 300000)
	for _, tt := range []struct {
		name   string
		query  string
		body   []byte
		status int
		code   string
	}{
		{"base not running", "?base=" + shaHex(prev), other, http.StatusConflict, "base_mismatch"},
		{"query and header disagree", "?base=" + shaHex(base), other, http.StatusBadRequest, "bad_request"},
		{"bad base", "?base=xyz", delta, http.StatusBadRequest, "bad_sha256"},
		{"empty base", "?base=", delta, http.StatusBadRequest, "bad_sha256"},
		{"not a delta", "?base=" + shaHex(base), target[:1000], http.StatusUnprocessableEntity, "invalid_image"},
		{"corrupt frame", "?base=" + shaHex(base), corrupt, http.StatusUnprocessableEntity, "invalid_image"},
		{"truncated frame", "?base=" + shaHex(base), delta[:len(delta)-20], http.StatusUnprocessableEntity, "invalid_image"},
		{"sha256 not the target", "?base=" + shaHex(base) + "&sha256=" + shaHex(wrongTarget), delta, http.StatusUnprocessableEntity, "sha256_mismatch"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before, rec := fileSum(t, slotFile), e.record()
			r := e.upload(tt.body, tt.query)
			if r.status != tt.status || r.code() != tt.code {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, tt.status, tt.code)
			}
			if fileSum(t, slotFile) != before || e.record() != rec {
				t.Fatal("a refused delta changed the free slot or otadata")
			}
		})
	}
	r := e.upload(delta, "?base="+shaHex(base))
	s := r.session(t)
	if r.status != 200 || s.State != StateStaged || *s.SHA256 != shaHex(target) || s.App.Version != "2.0.0" || s.Total != int64(len(target)) {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got, _ := os.ReadFile(slotFile); !bytes.HasPrefix(got, target) {
		t.Fatal("the free slot does not hold the rebuilt image")
	}
	if len(delta) >= len(target)/10 {
		t.Errorf("delta %d bytes for a %d-byte image", len(delta), len(target))
	}
}
