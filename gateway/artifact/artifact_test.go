package artifact

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/store"
)

func testImage(t testing.TB, version, project string, size int) []byte {
	t.Helper()
	exe := bytes.Repeat([]byte(version+"|"), size/(len(version)+1)+1)[:size]
	b, err := image.Pack(image.Desc{Version: version, Project: project, Date: "Jan  1 2026", Time: "00:00:00", IDF: "test"}, exe)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newStore(t testing.TB, max int64) *Store {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	exp := image.HostExpect()
	exp.MaxSize = max
	s, err := Open(Options{Dir: filepath.Join(dir, "artifacts"), DB: db, Expect: exp})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hexSHA(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestAddVerifies(t *testing.T) {
	good := testImage(t, "2.0.0", "holo-board", 5000)
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 0x40; return b }
	other := bytes.Clone(good)
	other[12], other[13] = 0x00, 0x00 // chip id (little-endian at 12) of an ESP32
	noHash := bytes.Clone(good[:len(good)-32])
	noHash[23] = 0
	cases := []struct {
		name string
		in   []byte
		sha  string
		want error
	}{
		{"good", good, "", nil},
		{"good with sha", good, hexSHA(good), nil},
		{"wrong sha", good, hexSHA(good[1:]), ErrInvalid},
		{"bad sha text", good, "xyz", ErrBadName},
		{"empty", nil, "", ErrInvalid},
		{"truncated", good[:len(good)-1], "", ErrInvalid},
		{"trailing bytes", append(bytes.Clone(good), 0, 1, 2), "", ErrInvalid},
		{"payload flipped", flip(len(good) - 100), "", ErrInvalid},
		{"digest flipped", flip(len(good) - 1), "", ErrInvalid},
		{"magic", flip(0), "", ErrInvalid},
		{"chip", other, "", ErrInvalid},
		{"project", testImage(t, "2.0.0", "other", 100), "", ErrInvalid},
		{"no appended hash", noHash, "", ErrInvalid},
		{"too large", testImage(t, "2.0.0", "holo-board", 70000), "", ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t, 64<<10)
			a, existed, err := s.Add(context.Background(), bytes.NewReader(c.in), "fw.bin", c.sha)
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			if err != nil {
				if l, _ := s.List(); len(l) != 0 {
					t.Fatalf("kept %v", l)
				}
				return
			}
			want := Artifact{SHA256: hexSHA(c.in), Size: int64(len(c.in)), Chip: image.ChipHost, Name: "fw.bin",
				App: boardapi.App{Project: "holo-board", Version: "2.0.0", Date: "Jan  1 2026", Time: "00:00:00", IDF: "test", ELFSHA256: a.App.ELFSHA256}, Added: a.Added,
				Trust: TrustUnsigned}
			if d := cmp.Diff(a, want); d != "" || existed {
				t.Fatalf("artifact (-got +want):\n%s existed %v", d, existed)
			}
			again, existed, err := s.Add(context.Background(), bytes.NewReader(c.in), "copy.bin", "")
			if err != nil || !existed || again.Name != "fw.bin" {
				t.Fatalf("dedup: %+v %v %v", again, existed, err)
			}
			files, _ := filepath.Glob(filepath.Join(s.o.Dir, "*"))
			if len(files) != 1 {
				t.Fatalf("files %v", files)
			}
		})
	}
}

func TestChannelsAndServe(t *testing.T) {
	s := newStore(t, 1<<20)
	img := testImage(t, "3.1.0", "holo-board", 40000)
	a, _, err := s.Add(context.Background(), bytes.NewReader(img), "x.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetChannel("Bad Name", a.SHA256, ""); !errors.Is(err, ErrBadName) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := s.SetChannel("stable", hexSHA(nil), ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown artifact: %v", err)
	}
	if _, err := s.SetChannel("stable", a.SHA256, "https://example.org/r/3.1.0"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(a.SHA256); !errors.Is(err, ErrInUse) {
		t.Fatalf("delete published: %v", err)
	}
	srv := httptest.NewServer(s.Handler("/firmware/"))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/firmware/channels/stable.json")
	if err != nil {
		t.Fatal(err)
	}
	var m boardapi.Manifest
	json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	want := boardapi.Manifest{Version: "3.1.0", ImageURL: "../images/" + a.SHA256 + ".bin", Size: int64(len(img)), SHA256: a.SHA256, ReleaseURL: "https://example.org/r/3.1.0"}
	if d := cmp.Diff(m, want); d != "" {
		t.Fatalf("manifest (-got +want):\n%s", d)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/firmware/images/"+a.SHA256+".bin", nil)
	req.Header.Set("Range", "bytes=100-199")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, img[100:200]) {
		t.Fatalf("range: %d %d bytes", resp.StatusCode, len(body))
	}
	for _, p := range []string{"/firmware/images/" + hexSHA(nil) + ".bin", "/firmware/channels/beta.json", "/firmware/images/../gw.db", "/firmware/x"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
	if err := s.DeleteChannel("stable"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(a.SHA256); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(a.SHA256); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func FuzzAdd(f *testing.F) {
	good := testImage(f, "1.2.3", "holo-board", 300)
	f.Add(good)
	f.Add(good[:100])
	f.Add([]byte{0xE9})
	k, err := image.GenerateKey()
	if err != nil {
		f.Fatal(err)
	}
	signed, err := image.Sign(good, k)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(signed)
	f.Add(signed[:len(signed)-100])
	d, _ := image.DigestOf(&k.PublicKey)
	board := image.Trust{Keys: []image.KeyDigest{d}}
	s := newStore(f, 1<<16)
	f.Fuzz(func(t *testing.T, b []byte) {
		a, _, err := s.Add(context.Background(), bytes.NewReader(b), "f", "")
		if err == nil && a.SHA256 != hexSHA(b) {
			t.Fatalf("stored %s for %s", a.SHA256, hexSHA(b))
		}
		if err == nil {
			im, err := image.VerifyBytes(b, s.Expect())
			if err != nil {
				t.Fatalf("kept an image Verify refuses: %v", err)
			}
			// The record decides as the image does.
			_, recErr := a.Check(board)
			_, imErr := board.Check(im)
			if (recErr == nil) != (imErr == nil) {
				t.Fatalf("record says %v, the image %v", recErr, imErr)
			}
		}
	})
}

func BenchmarkAdd2MiB(b *testing.B) {
	s := newStore(b, 4<<20)
	img := testImage(b, "1.0.0", "holo-board", 2<<20)
	b.ReportAllocs()
	b.SetBytes(int64(len(img)))
	for b.Loop() {
		if _, _, err := s.Add(context.Background(), bytes.NewReader(img), "f", ""); err != nil {
			b.Fatal(err)
		}
	}
}
