package bootloader

import (
	"errors"
	"testing"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/ota/otadata"
)

func svImg(t *testing.T, version string, sv uint32, sb *signedBoard) []byte {
	t.Helper()
	b, err := image.WithSecureVersion(signedImg(t, version, nil), sv)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = image.Sign(b, sb.ka); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAntiRollbackRefusalPoints (issue 25 row 11) is the table of where an
// image below the board's secure version (2 here) is refused: Check,
// which the update service runs before activating (and upload and pull
// through efuse.State.Trust), and the boot choice. Equal and higher
// versions pass; the factory image is exempt.
func TestAntiRollbackRefusalPoints(t *testing.T) {
	for _, tc := range []struct {
		name    string
		img     func(sb *signedBoard) []byte
		refused bool
	}{
		{"secure version 1", func(sb *signedBoard) []byte { return svImg(t, "1.0.0", 1, sb) }, true},
		{"secure version 0 (an old image)", func(sb *signedBoard) []byte { return signedImg(t, "1.0.0", nil, sb.ka) }, true},
		{"secure version 2", func(sb *signedBoard) []byte { return svImg(t, "2.0.1", 2, sb) }, false},
		{"secure version 3", func(sb *signedBoard) []byte { return svImg(t, "3.0.0", 3, sb) }, false},
		{"the factory image", func(sb *signedBoard) []byte { return sb.factory }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := newSignedBoard(t)
			if _, err := sb.fuses.BurnSecureVersion(2); err != nil {
				t.Fatal(err)
			}
			st, _ := sb.fuses.Read()
			write(t, sb.fl, 1, tc.img(sb))
			// Activation (and the update service's recheck): Check.
			_, _, _, err := Check(sb.fl, 1, exp, st.Trust(), sb.cfg.Factory)
			if tc.refused != errors.Is(err, image.ErrSecureVersion) || !tc.refused && err != nil {
				t.Fatalf("Check: %v, refused %v", err, tc.refused)
			}
			// Upload and pull: the service checks the description against
			// the same trust before staging.
			im, verr := image.VerifyBytes(tc.img(sb), exp)
			if verr != nil {
				t.Fatal(verr)
			}
			if err := st.Trust().CheckSecureVersion(im.Desc); tc.refused != (err != nil) && im.SHA256 != sb.cfg.Factory {
				t.Fatalf("CheckSecureVersion: %v", err)
			}
			// Boot: a staged image below the version is recorded invalid
			// and the board stays on ota_0.
			set(t, sb.st, func(r otadata.Record) (otadata.Record, error) { return r.Select(1, otadata.New) })
			c, err := Choose(sb.cfg)
			want := 1
			if tc.refused {
				want = 0
			}
			if err != nil || c.Slot != want {
				t.Fatalf("boot: %+v %v, want slot %d", c, err, want)
			}
			if r, _ := sb.st.Read(); tc.refused && r.States[1] != otadata.Invalid {
				t.Fatalf("ota_1 %v, want invalid", r.States[1])
			}
		})
	}
}

// TestConfirmedImageBurnsItsSecureVersion: at confirm (ApplyRevocations)
// and at every boot of a confirmed image, its secure version is burned;
// a lower one never lowers it.
func TestConfirmedImageBurnsItsSecureVersion(t *testing.T) {
	sb := newSignedBoard(t)
	sb.stage(t, 1, svImg(t, "3.0.0", 3, sb), otadata.Valid)
	if _, err := ApplyRevocations(sb.cfg, 1); err != nil {
		t.Fatal(err)
	}
	if st, _ := sb.fuses.Read(); st.SecureVersion != 3 {
		t.Fatalf("after confirm: %d", st.SecureVersion)
	}
	// A power cut before the burn: the next boot burns it.
	sb2 := newSignedBoard(t)
	sb2.stage(t, 1, svImg(t, "4.0.0", 4, sb2), otadata.Valid)
	if c, err := Choose(sb2.cfg); err != nil || c.Slot != 1 {
		t.Fatalf("boot: %+v %v", c, err)
	}
	if st, _ := sb2.fuses.Read(); st.SecureVersion != 4 {
		t.Fatalf("after boot: %d", st.SecureVersion)
	}
	if st, err := sb2.fuses.BurnSecureVersion(1); err != nil || st.SecureVersion != 4 {
		t.Fatalf("lowering: %+v %v", st, err)
	}
}
