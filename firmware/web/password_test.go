package web

import (
	"encoding/json"
	"strings"
	"testing"
)

// cheapKDF keeps tests fast; TestProductionKDF runs DefaultKDF once.
var cheapKDF = KDF{Memory: 64, Time: 1, Threads: 1}

func record(t *testing.T, st memStore) saved {
	t.Helper()
	var doc saved
	if err := json.Unmarshal(st[storeKey], &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestOldRecordUpgrades (issue 25 row 14): a record stored by a board
// before the fix (one salted SHA-256) still logs in with its password and
// is rewritten as argon2id at that login; wrong passwords fail before and
// after, and a wrong one changes nothing.
func TestOldRecordUpgrades(t *testing.T) {
	st := memStore{}
	const salt = "00112233445566778899aabbccddeeff"
	old := saved{Hostname: "holo-ab12", PasswordSalt: salt, PasswordHash: legacyHash(salt, "s3cret"), TrustedSites: DefaultTrustedSites}
	if err := st.Put(storeKey, old); err != nil {
		t.Fatal(err)
	}
	s, err := Load(st, "holo-ab12")
	if err != nil {
		t.Fatal(err)
	}
	s.SetKDF(cheapKDF)
	if !s.HasPassword() {
		t.Fatal("the old record is not seen as a password")
	}
	for _, wrong := range []string{"", "S3cret", "s3cret ", salt} {
		if s.CheckPassword(wrong) {
			t.Errorf("wrong password %q logs in on the old record", wrong)
		}
	}
	if got := record(t, st); got.PasswordHash != old.PasswordHash || got.PasswordSalt != salt {
		t.Fatalf("a wrong password rewrote the record: %+v", got)
	}
	if !s.CheckPassword("s3cret") {
		t.Fatal("the old record's password does not log in")
	}
	got := record(t, st)
	if !strings.HasPrefix(got.PasswordHash, "$argon2id$v=19$m=64,t=1,p=1$") || got.PasswordSalt != "" {
		t.Fatalf("the record was not upgraded: %+v", got)
	}
	if got.Hostname != "holo-ab12" || len(got.TrustedSites) != len(DefaultTrustedSites) {
		t.Errorf("the upgrade lost other settings: %+v", got)
	}
	// A fresh boot reads the new record: no cache to lean on.
	s2, err := Load(st, "holo-ab12")
	if err != nil {
		t.Fatal(err)
	}
	if !s2.CheckPassword("s3cret") || s2.CheckPassword("S3cret") || s2.CheckPassword("") {
		t.Fatal("the upgraded record does not verify as it should")
	}
}

// TestPasswordChangeForgetsTheGoodOne: the remembered good password does
// not outlive a change of password.
func TestPasswordChangeForgetsTheGoodOne(t *testing.T) {
	st := memStore{}
	s, _ := Load(st, "holo-ab12")
	s.SetKDF(cheapKDF)
	if _, err := s.Apply(Patch{Password: json.RawMessage(`"one"`)}); err != nil {
		t.Fatal(err)
	}
	if !s.CheckPassword("one") || !s.CheckPassword("one") || s.CheckPassword("two") {
		t.Fatal("first password")
	}
	if _, err := s.Apply(Patch{Password: json.RawMessage(`"two"`)}); err != nil {
		t.Fatal(err)
	}
	if s.CheckPassword("one") || !s.CheckPassword("two") {
		t.Fatal("after the change")
	}
	if _, err := s.Apply(Patch{Password: json.RawMessage(`"bad\nline"`)}); err == nil {
		t.Fatal("a password with a line break was taken")
	}
	if !s.CheckPassword("two") {
		t.Fatal("a refused change changed the password")
	}
}

// TestProductionKDF runs the production cost once: a new password is
// stored as argon2id with DefaultKDF and verifies from a fresh load.
func TestProductionKDF(t *testing.T) {
	if productionKDF != (KDF{Memory: 19 * 1024, Time: 2, Threads: 1}) {
		t.Fatalf("DefaultKDF is %+v; change docs/secure-boot.md and web.KDF's doc with it", productionKDF)
	}
	st := memStore{}
	s, _ := Load(st, "holo-ab12")
	s.SetKDF(productionKDF)
	if _, err := s.Apply(Patch{Password: json.RawMessage(`"pw"`)}); err != nil {
		t.Fatal(err)
	}
	rec := record(t, st).PasswordHash
	if !strings.HasPrefix(rec, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("record %q", rec)
	}
	k, salt, key, err := parsePHC(rec)
	if err != nil || k != productionKDF || len(salt) != kdfSaltLen || len(key) != kdfKeyLen {
		t.Fatalf("record %q: %+v %v", rec, k, err)
	}
	s2, _ := Load(st, "holo-ab12")
	if !s2.CheckPassword("pw") {
		t.Fatal("the password does not verify")
	}
}

func FuzzParsePHC(f *testing.F) {
	f.Add(cheapKDF.hashNew("x"))
	f.Add("$argon2id$v=19$m=64,t=1,p=1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("$argon2id$v=19$m=4294967295,t=1,p=1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("deadbeef")
	f.Fuzz(func(t *testing.T, rec string) {
		k, salt, key, err := parsePHC(rec)
		if err != nil {
			return
		}
		if k.Memory > 1<<22 || k.Time > 64 || k.Threads < 1 || len(salt) < 8 || len(key) < 16 {
			t.Fatalf("accepted %q as %+v", rec, k)
		}
	})
}
