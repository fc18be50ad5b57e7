// Package efuse is the part of a simulated board's eFuses that secure boot
// uses: up to three trusted key digests, burned once, and one revoke bit
// per key, set once and never cleared. As on an ESP32, nothing clears a
// fuse: keys are burned at the first start that names any, and after that
// only revoke bits change.
//
// A board with no key burned is open: it checks no signature (package
// image, Trust.Enabled). Once keys are burned, the bootloader and the
// update service accept only images carrying a block that verifies with a
// burned key whose revoke bit is clear.
//
// # The file
//
// The fuses live in <data>/flash/efuse, 108 bytes, little-endian:
//
//	offset  size  field
//	     0     4  magic "HBEF"
//	     4     1  format version, 1
//	     5     1  number of key digests burned, 0-3
//	     6     1  revoke bits: bit i set revokes key digest i
//	     7     1  secure version: the highest secure version
//	              (image.Desc.SecureVersion) of an image that confirmed
//	              itself on this board, 0-255; reserved and zero before
//	              anti-rollback, so older files read as 0
//	     8    96  key digests 0, 1, 2 (SHA-256 of the public key as a
//	              signature block holds it, see image.KeyDigest); zero
//	              past the number burned
//	   104     4  CRC-32 (IEEE) of bytes 0-103
//
// A missing file is a board with nothing burned. Every write makes a new
// file (efuse.new), syncs it, renames it over efuse and syncs the
// directory, under an exclusive lock (efuse.lock) so the bootloader and
// the firmware never interleave: a power cut at any moment leaves the old
// fuses or the new ones, never a mix. A file that exists but does not
// decode (wrong magic, CRC) is ErrCorrupt: the board refuses to guess
// which keys it trusts.
//
// # Which keys are burned
//
// Burn takes the keys of the first start that names any: the board's
// --ota-key files, or the public keys built into the firmware binary
// (BuiltinKeys, set with go build -ldflags "-X ...efuse.BuiltinKeys=K1,K2",
// each K the base64 of a PKIX public key, image.LinkKey; make build
// KEY=PUB does it). A plain go build has none. The order is the key slots'
// order, which revocation uses.
//
// # Revocation
//
// An image lists key digests to revoke in its application description
// (image.Desc.Revoke). Once that image has confirmed itself, and again
// at every start that boots it confirmed (so a power cut between the two
// writes only delays it), the board revokes each listed key that is
// burned in an earlier slot than a key that signed the image: a later key
// revokes an earlier one. A key that signed the image, a later key, or a
// key this board never burned is left alone (Revocable).
package efuse

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/holofleet/holofleet/bus/image"
)

// Layout of the fuse file.
const (
	// MaxKeys is how many key digests a board burns.
	MaxKeys  = 3
	FileName = "efuse"
	Size     = 108
	magic    = "HBEF"
	version  = 1
	offKeys  = 8
	offCRC   = 104
	newName  = FileName + ".new"
	lockName = FileName + ".lock"
)

// BuiltinKeys are the public keys built into the firmware (link-time,
// -ldflags -X): image.LinkKey forms separated by commas or spaces.
var BuiltinKeys = ""

// Errors of the fuses.
var (
	// ErrCorrupt means the fuse file exists but does not decode.
	ErrCorrupt = errors.New("efuse: fuse file corrupt")
	// ErrBurned means keys are burned already and others were given: the
	// burned ones stay.
	ErrBurned = errors.New("efuse: keys already burned")
	// ErrTooMany means more than MaxKeys keys, or the same key twice.
	ErrTooMany = errors.New("efuse: at most three distinct keys")
	// ErrBuiltin means BuiltinKeys does not hold P-256 public keys.
	ErrBuiltin = errors.New("efuse: bad built-in key")
)

// State is what the fuses hold.
type State struct {
	// Keys are the burned key digests in slot order.
	Keys []image.KeyDigest
	// Revoked[i] is the revoke bit of Keys[i].
	Revoked [MaxKeys]bool
	// SecureVersion is the highest secure version confirmed on the board
	// (anti-rollback); images below it are refused.
	SecureVersion uint32
}

// MaxSecureVersion is the highest secure version the fuses hold (one
// byte, as ESP32 parts hold a few dozen in a thermometer-coded field):
// raise it for security fixes only.
const MaxSecureVersion = 255

// ErrSecureVersion means a secure version above MaxSecureVersion.
var ErrSecureVersion = errors.New("efuse: secure version out of range")

// Enabled reports whether any key is burned (secure boot on).
func (s State) Enabled() bool { return len(s.Keys) > 0 }

// Trust is the state as the image package checks against it.
func (s State) Trust() image.Trust {
	t := image.Trust{Keys: slices.Clone(s.Keys), MinSecureVersion: s.SecureVersion}
	for i, k := range s.Keys {
		if s.Revoked[i] {
			t.Revoked = append(t.Revoked, k)
		}
	}
	return t
}

// Encode is the file's bytes.
func (s State) Encode() ([Size]byte, error) {
	var b [Size]byte
	if len(s.Keys) > MaxKeys {
		return b, fmt.Errorf("%w: %d keys", ErrTooMany, len(s.Keys))
	}
	if s.SecureVersion > MaxSecureVersion {
		return b, fmt.Errorf("%w: %d", ErrSecureVersion, s.SecureVersion)
	}
	copy(b[:], magic)
	b[4] = version
	b[7] = byte(s.SecureVersion)
	b[5] = byte(len(s.Keys))
	for i, k := range s.Keys {
		copy(b[offKeys+32*i:], k[:])
		if s.Revoked[i] {
			b[6] |= 1 << i
		}
	}
	binary.LittleEndian.PutUint32(b[offCRC:], crc32.ChecksumIEEE(b[:offCRC]))
	return b, nil
}

// Decode reads the file's bytes.
func Decode(b []byte) (State, error) {
	var s State
	switch {
	case len(b) != Size:
		return s, fmt.Errorf("%w: %d bytes, want %d", ErrCorrupt, len(b), Size)
	case string(b[:4]) != magic:
		return s, fmt.Errorf("%w: magic %q", ErrCorrupt, b[:4])
	case binary.LittleEndian.Uint32(b[offCRC:]) != crc32.ChecksumIEEE(b[:offCRC]):
		return s, fmt.Errorf("%w: CRC mismatch", ErrCorrupt)
	case b[4] != version:
		return s, fmt.Errorf("%w: format version %d", ErrCorrupt, b[4])
	case b[5] > MaxKeys || b[6]>>b[5] != 0:
		return s, fmt.Errorf("%w: %d keys, revoke bits %#x", ErrCorrupt, b[5], b[6])
	}
	s.SecureVersion = uint32(b[7])
	for i := range int(b[5]) {
		var k image.KeyDigest
		copy(k[:], b[offKeys+32*i:])
		s.Keys = append(s.Keys, k)
		s.Revoked[i] = b[6]&(1<<i) != 0
	}
	if !bytes.Equal(b[offKeys+32*int(b[5]):offCRC], make([]byte, offCRC-offKeys-32*int(b[5]))) {
		return State{}, fmt.Errorf("%w: data in unburned key slots", ErrCorrupt)
	}
	return s, nil
}

// Fuses are the fuses of the board whose flash directory is dir.
type Fuses struct {
	dir string
	// Cut, when set, is called at each step of a write ("burn" or
	// "revoke", then ":written", ":synced" or ":renamed"): the power-cut
	// fault hook of the black-box tests.
	Cut func(step string)
}

// Open returns the fuses under the flash directory dir.
func Open(dir string) *Fuses { return &Fuses{dir: dir} }

// Read returns what the fuses hold; a board that never burned any reads
// as the zero State.
func (f *Fuses) Read() (State, error) {
	b, err := os.ReadFile(filepath.Join(f.dir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return State{}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("efuse: %w", err)
	}
	return Decode(b)
}

func (f *Fuses) lock() (func(), error) {
	fh, err := os.OpenFile(filepath.Join(f.dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("efuse: %w", err)
	}
	for {
		err = unix.Flock(int(fh.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("efuse: lock: %w", err)
	}
	return func() { _ = unix.Flock(int(fh.Fd()), unix.LOCK_UN); fh.Close() }, nil
}

func (f *Fuses) cut(step string) {
	if f.Cut != nil {
		f.Cut(step)
	}
}

// write replaces the file with s: new file, sync, rename, sync the
// directory. Call with the lock held.
func (f *Fuses) write(op string, s State) error {
	b, err := s.Encode()
	if err != nil {
		return err
	}
	tmp := filepath.Join(f.dir, newName)
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("efuse: %w", err)
	}
	if _, err = fh.Write(b[:]); err == nil {
		f.cut(op + ":written")
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("efuse: %w", err)
	}
	f.cut(op + ":synced")
	if err := os.Rename(tmp, filepath.Join(f.dir, FileName)); err != nil {
		return fmt.Errorf("efuse: %w", err)
	}
	f.cut(op + ":renamed")
	d, err := os.Open(f.dir)
	if err != nil {
		return fmt.Errorf("efuse: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("efuse: %w", err)
	}
	return nil
}

// Burn burns keys when the board has none burned, and returns what the
// fuses hold afterwards. With keys burned already it writes nothing, and
// returns ErrBurned (with the state) when keys names others: the burned
// set stays. No keys burns nothing.
func (f *Fuses) Burn(keys []image.KeyDigest) (State, error) {
	if len(keys) > MaxKeys {
		return State{}, fmt.Errorf("%w: %d given", ErrTooMany, len(keys))
	}
	for i, k := range keys {
		if slices.Contains(keys[:i], k) {
			return State{}, fmt.Errorf("%w: key %s given twice", ErrTooMany, k.Short())
		}
	}
	unlock, err := f.lock()
	if err != nil {
		return State{}, err
	}
	defer unlock()
	cur, err := f.Read()
	if err != nil {
		return cur, err
	}
	if cur.Enabled() {
		if len(keys) > 0 && !slices.Equal(keys, cur.Keys) {
			return cur, fmt.Errorf("%w: the board trusts %s; the keys given now are not burned", ErrBurned, names(cur.Keys))
		}
		return cur, nil
	}
	if len(keys) == 0 {
		return cur, nil
	}
	next := State{Keys: slices.Clone(keys)}
	if err := f.write("burn", next); err != nil {
		return cur, err
	}
	return next, nil
}

// Revocable returns the slots of s's keys that an image signed by signers
// and asking to revoke requested may revoke: each requested key burned in
// a slot before the slot of one of the signers (trusted, unrevoked keys
// whose blocks verify), not yet revoked.
func Revocable(s State, signers, requested []image.KeyDigest) []int {
	last := -1
	for j, k := range s.Keys {
		if slices.Contains(signers, k) && !s.Revoked[j] {
			last = j
		}
	}
	var out []int
	for i, k := range s.Keys {
		if i < last && !s.Revoked[i] && slices.Contains(requested, k) && !slices.Contains(signers, k) {
			out = append(out, i)
		}
	}
	return out
}

// Revoke sets the revoke bits an image signed by signers may set for the
// keys it asks to revoke (Revocable), and returns the state afterwards
// and the keys it revoked now (none: nothing written).
func (f *Fuses) Revoke(signers, requested []image.KeyDigest) (State, []image.KeyDigest, error) {
	unlock, err := f.lock()
	if err != nil {
		return State{}, nil, err
	}
	defer unlock()
	cur, err := f.Read()
	if err != nil {
		return cur, nil, err
	}
	slots := Revocable(cur, signers, requested)
	if len(slots) == 0 {
		return cur, nil, nil
	}
	next := cur
	next.Keys = slices.Clone(cur.Keys)
	var done []image.KeyDigest
	for _, i := range slots {
		next.Revoked[i] = true
		done = append(done, cur.Keys[i])
	}
	if err := f.write("revoke", next); err != nil {
		return cur, nil, err
	}
	return next, done, nil
}

// Builtin returns the digests of BuiltinKeys.
func Builtin() ([]image.KeyDigest, error) {
	var out []image.KeyDigest
	for _, s := range strings.FieldsFunc(BuiltinKeys, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' }) {
		pub, err := image.ParseLinkKey(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBuiltin, err)
		}
		d, err := image.DigestOf(pub)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBuiltin, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func names(keys []image.KeyDigest) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.Short()
	}
	return strings.Join(s, ", ")
}

// BurnSecureVersion raises the board's secure version to v (anti-rollback,
// once an image of secure version v has confirmed itself) and returns the
// state. A v not above the burned one writes nothing: like a fuse, the
// secure version never goes down. The write is the crash-safe one of Burn
// (steps "secver:written", ":synced", ":renamed").
func (f *Fuses) BurnSecureVersion(v uint32) (State, error) {
	if v > MaxSecureVersion {
		return State{}, fmt.Errorf("%w: %d, at most %d", ErrSecureVersion, v, MaxSecureVersion)
	}
	unlock, err := f.lock()
	if err != nil {
		return State{}, err
	}
	defer unlock()
	cur, err := f.Read()
	if err != nil || v <= cur.SecureVersion {
		return cur, err
	}
	next := cur
	next.Keys = slices.Clone(cur.Keys)
	next.SecureVersion = v
	if err := f.write("secver", next); err != nil {
		return cur, err
	}
	return next, nil
}
