package artifact

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

// TestServeDelta: the handler serves a delta at deltas/<base>/<target>.bin
// only once it has been made (a request never makes one), byte for byte
// as OpenDelta made it; a malformed name is 404 and so is a delta never
// made.
func TestServeDelta(t *testing.T) {
	s := newStore(t, 1<<20)
	ctx := context.Background()
	base := testImage(t, "1.0.0", "holo-board", 200000)
	target := testImage(t, "1.0.1", "holo-board", 200000)
	for _, img := range [][]byte{base, target} {
		if _, _, err := s.Add(ctx, bytes.NewReader(img), "x.bin", ""); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(s.Handler("/firmware/"))
	t.Cleanup(srv.Close)
	get := func(path string) (int, []byte) {
		t.Helper()
		res, err := http.Get(srv.URL + "/firmware/" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	b, tg := hexSHA(base), hexSHA(target)
	if code, body := get(DeltaPath(b, tg)); code != 404 {
		t.Fatalf("a delta not made: %d %s", code, body)
	}
	if _, err := os.Stat(s.deltaPath(b, tg)); err == nil {
		t.Fatal("a GET made the delta")
	}
	f, n, err := s.OpenDelta(ctx, b, tg)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(f)
	f.Close()
	code, body := get(DeltaPath(b, tg))
	if code != 200 || int64(len(body)) != n || !bytes.Equal(body, want) {
		t.Fatalf("the made delta: %d, %d bytes of %d", code, len(body), n)
	}
	for _, p := range []string{"deltas/" + b + ".bin", "deltas/../" + tg + ".bin", "deltas/" + b + "/x.bin", "deltas/" + tg + "/" + b + ".bin"} {
		if code, body := get(p); code != 404 {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
	}
}
