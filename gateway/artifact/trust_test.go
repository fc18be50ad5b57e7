package artifact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/gateway/artifact/sigtest"
	"github.com/holofleet/holofleet/store"
)

// keyStore is a store over a fresh directory with the given keys.
func keyStore(t testing.TB, trusted, revoked []image.KeyDigest) *Store {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	exp := image.HostExpect()
	exp.MaxSize = 1 << 20
	s, err := Open(Options{Dir: filepath.Join(dir, "artifacts"), DB: db, Expect: exp, Trusted: trusted, Revoked: revoked})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// nothingKept fails unless the store holds no record and no file.
func nothingKept(t *testing.T, s *Store) {
	t.Helper()
	if l, _ := s.List(); len(l) != 0 {
		t.Fatalf("kept records %v", l)
	}
	files, _ := os.ReadDir(s.o.Dir)
	if len(files) != 0 {
		t.Fatalf("kept files %v", files)
	}
}

// TestUploadTrust sends every case of sigtest to a gateway that trusts a
// key (and knows another revoked) and to one that trusts none.
func TestUploadTrust(t *testing.T) {
	ks := sigtest.NewKeys(t)
	bt := ks.Trust()
	for _, c := range sigtest.Cases(t, ks, "2.0.0") {
		t.Run(c.Name+"/keys", func(t *testing.T) {
			s := keyStore(t, bt.Keys, bt.Revoked)
			a, _, err := s.Add(context.Background(), bytes.NewReader(c.Image), "fw.bin", "")
			switch {
			case c.Structural:
				if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrUntrusted) {
					t.Fatalf("err %v, want ErrInvalid", err)
				}
				nothingKept(t, s)
			case c.Want != nil:
				if !errors.Is(err, ErrUntrusted) || !errors.Is(err, c.Want) || !strings.Contains(err.Error(), ks.Trusted.Digest.Short()) {
					t.Fatalf("err %v, want ErrUntrusted and %v naming the trusted key", err, c.Want)
				}
				nothingKept(t, s)
			default:
				if err != nil {
					t.Fatal(err)
				}
				if a.Trust != TrustTrusted {
					t.Fatalf("trust %q", a.Trust)
				}
				last := a.Signers[len(a.Signers)-1]
				if last.KeyDigest != ks.Trusted.Digest.String() || !last.Valid || !last.Trusted {
					t.Fatalf("signers %+v", a.Signers)
				}
				for _, sg := range a.Signers[:len(a.Signers)-1] {
					if !sg.Valid || sg.Trusted { // unknown, and revoked
						t.Fatalf("signers %+v", a.Signers)
					}
				}
				if err := s.Admit(a); err != nil {
					t.Fatal(err)
				}
			}
		})
		t.Run(c.Name+"/open", func(t *testing.T) {
			s := keyStore(t, nil, nil)
			a, _, err := s.Add(context.Background(), bytes.NewReader(c.Image), "fw.bin", "")
			if c.Structural {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err %v, want ErrInvalid", err)
				}
				nothingKept(t, s)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := TrustSigned
			if c.Valid == 0 {
				want = TrustUnsigned
			}
			valid := 0
			for _, sg := range a.Signers {
				if sg.Valid {
					valid++
				}
				if sg.Trusted || sg.Valid != (sg.Error == "") {
					t.Fatalf("signer %+v", sg)
				}
			}
			if a.Trust != want || valid != c.Valid || s.Admit(a) != nil {
				t.Fatalf("trust %q, %d valid signers %+v, want %q and %d", a.Trust, valid, a.Signers, want, c.Valid)
			}
			// What a board with the keys decides, from the record alone,
			// is what it decides from the image.
			im, err := image.VerifyBytes(c.Image, image.HostExpect())
			if err != nil {
				t.Fatal(err)
			}
			_, boardErr := bt.Check(im)
			_, recErr := a.Check(bt)
			if !errors.Is(recErr, c.Want) || (recErr == nil) != (boardErr == nil) || (recErr != nil && recErr.Error() != boardErr.Error()) {
				t.Fatalf("record says %v, the image %v, want %v", recErr, boardErr, c.Want)
			}
			if signers, err := a.Check(image.Trust{}); err != nil || signers != nil {
				t.Fatalf("a board without keys: %v %v", signers, err)
			}
			// The record survives the store: read again, it says the same.
			got, err := s.Get(a.SHA256)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(got, a); d != "" {
				t.Fatalf("read back (-got +want):\n%s", d)
			}
		})
	}
}

// TestSignerErrors: a block that does not verify says why.
func TestSignerErrors(t *testing.T) {
	ks := sigtest.NewKeys(t)
	good := sigtest.Sign(t, sigtest.Image(t, "2.0.0", 1000), ks.Trusted, ks.Unknown)
	s := keyStore(t, nil, nil)
	a, _, err := s.Add(context.Background(), bytes.NewReader(sigtest.FlipBlock(sigtest.FlipSignature(good, 0), 1)), "x", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Signers) != 2 || a.Signers[0].Valid || !strings.Contains(a.Signers[0].Error, "signature does not verify") ||
		a.Signers[1].Valid || !strings.Contains(a.Signers[1].Error, "CRC") || a.Trust != TrustUnsigned {
		t.Fatalf("%+v", a)
	}
}

// TestTrustFollowsKeys: the trust of a record is read against the keys
// the store has now, and a record kept before the keys were given is not
// admitted for installs.
func TestTrustFollowsKeys(t *testing.T) {
	ks := sigtest.NewKeys(t)
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	open := func(trusted ...image.KeyDigest) *Store {
		s, err := Open(Options{Dir: filepath.Join(dir, "artifacts"), DB: db, Trusted: trusted})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	signed, _, err := s.Add(context.Background(), bytes.NewReader(sigtest.Sign(t, sigtest.Image(t, "1.0.0", 500), ks.Trusted)), "a", "")
	if err != nil {
		t.Fatal(err)
	}
	plain, _, err := s.Add(context.Background(), bytes.NewReader(sigtest.Image(t, "1.0.1", 500)), "b", "")
	if err != nil {
		t.Fatal(err)
	}
	if signed.Trust != TrustSigned || plain.Trust != TrustUnsigned {
		t.Fatalf("open store: %q %q", signed.Trust, plain.Trust)
	}
	s = open(ks.Trusted.Digest)
	got, _ := s.Get(signed.SHA256)
	if got.Trust != TrustTrusted || !got.Signers[0].Trusted || s.Admit(got) != nil {
		t.Fatalf("with the key: %+v", got)
	}
	got, _ = s.Get(plain.SHA256)
	if err := s.Admit(got); !errors.Is(err, ErrUntrusted) || !errors.Is(err, image.ErrUnsigned) {
		t.Fatalf("unsigned record admitted under keys: %v", err)
	}
	list, _ := s.List()
	if !slices.ContainsFunc(list, func(a Artifact) bool { return a.Trust == TrustTrusted }) {
		t.Fatalf("list %+v", list)
	}
	// Uploading the unsigned image again is refused now: nothing is
	// answered from the old record.
	if _, _, err := s.Add(context.Background(), bytes.NewReader(sigtest.Image(t, "1.0.1", 500)), "b", ""); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("re-upload: %v", err)
	}
}

// TestRecordWithoutSignature: a record written before signatures were
// kept (no signature, no signers) loads as unsigned.
func TestRecordWithoutSignature(t *testing.T) {
	s := keyStore(t, nil, nil)
	img := sigtest.Image(t, "0.9.0", 400)
	a, _, err := s.Add(context.Background(), bytes.NewReader(img), "old.bin", "")
	if err != nil {
		t.Fatal(err)
	}
	old := `{"sha256":"` + a.SHA256 + `","size":` + strconv.Itoa(len(img)) + `,"chip":20303,"app":{"project":"holo-board","version":"0.9.0","date":"","time":"","idf":"","elf_sha256":""},"name":"old.bin","added":"2026-01-01T00:00:00Z"}`
	if err := s.arts.Put(a.SHA256, json.RawMessage(old)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(a.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if got.Trust != TrustUnsigned || got.Signature != nil || got.App.Version != "0.9.0" {
		t.Fatalf("%+v", got)
	}
	if _, err := got.Check(image.Trust{Keys: []image.KeyDigest{{1}}}); !errors.Is(err, image.ErrUnsigned) {
		t.Fatalf("board check of an old record: %v", err)
	}
}
