package artifact

import (
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/holofleet/holofleet/bus/image"
)

// signatureOf reads the signature sector of the verified image im from
// f (the upload's file) and tells what each block is.
func signatureOf(f io.ReaderAt, im *image.Image) (*Signature, []Signer, error) {
	if !im.Signed() {
		return nil, nil, nil
	}
	sec := make([]byte, image.SectorSize)
	if _, err := f.ReadAt(sec, im.Content); err != nil {
		return nil, nil, fmt.Errorf("artifact: reading the signature sector: %w", err)
	}
	sig := &Signature{Content: im.Content, Digest: hex.EncodeToString(im.Digest[:]), Sector: sec}
	if im.SectorErr != nil {
		sig.Error = im.SectorErr.Error()
	}
	// Trusting every block's own key leaves, block by block, only what
	// is wrong with the block itself: its shape, its claim, its signature.
	own := make([]image.KeyDigest, 0, len(im.Blocks))
	for _, b := range im.Blocks {
		own = append(own, b.KeyDigest)
	}
	var signers []Signer
	for _, c := range (image.Trust{Keys: own}).CheckBlocks(im) {
		sg := Signer{KeyDigest: c.Block.KeyDigest.String(), Valid: c.SignatureOK}
		if !c.SignatureOK && c.Err != nil {
			sg.Error = c.Err.Error()
		}
		signers = append(signers, sg)
	}
	return sig, signers, nil
}

// annotate fills in a's Trusted flags and Trust against the store's keys.
func (s *Store) annotate(a Artifact) Artifact {
	a.Signers = slices.Clone(a.Signers)
	a.Trust = TrustUnsigned
	sectorOK := a.Signature != nil && a.Signature.Error == ""
	for i := range a.Signers {
		sg := &a.Signers[i]
		d, err := image.ParseKeyDigest(sg.KeyDigest)
		sg.Trusted = err == nil && s.trust().Trusted(d)
		switch {
		case !sectorOK || !sg.Valid:
		case sg.Trusted:
			a.Trust = TrustTrusted
		case a.Trust == TrustUnsigned:
			a.Trust = TrustSigned
		}
	}
	return a
}

// Trusted returns the key digests the store trusts (Options.Trusted).
func (s *Store) Trusted() []image.KeyDigest { return slices.Clone(s.o.Trusted) }

// trust is the store's keys as the image package takes them.
func (s *Store) trust() image.Trust { return image.Trust{Keys: s.o.Trusted, Revoked: s.o.Revoked} }

// untrusted wraps why t.Check refused an image.
func (s *Store) untrusted(err error) error {
	return fmt.Errorf("%w: %w; the gateway trusts only images signed by %s", ErrUntrusted, err, keyNames(s.o.Trusted, s.o.Revoked))
}

// Admit tells whether a may be installed under the store's keys: nil
// without keys, else an error wrapping ErrUntrusted unless a valid block
// of a trusted key signs it. It matters for records kept before the keys
// were given (an upload checks the same at once).
func (s *Store) Admit(a Artifact) error {
	t := s.trust()
	if !t.Enabled() {
		return nil
	}
	if _, err := a.Check(t); err != nil {
		return s.untrusted(err)
	}
	return nil
}

// Check answers what a board trusting t (its burned keys and their
// revocations) decides about the image, from the record alone: with no
// key (secure boot off) nil and no signers, as such a board checks no
// signature; else image.Trust.Check's answer, the trusted signers or an
// error wrapping image.ErrUnsigned, ErrUntrustedKey, ErrRevokedKey,
// ErrBadSignature or ErrBadBlock.
func (a Artifact) Check(t image.Trust) ([]image.KeyDigest, error) {
	if !t.Enabled() {
		return nil, nil
	}
	im := &image.Image{}
	if sig := a.Signature; sig != nil {
		d, err := hex.DecodeString(sig.Digest)
		if err != nil || len(d) != len(im.Digest) {
			return nil, fmt.Errorf("%w: the record's content digest %q is not 64 hex digits", image.ErrBadBlock, sig.Digest)
		}
		im.Content = sig.Content
		copy(im.Digest[:], d)
		im.Blocks, im.SectorErr = image.ParseSector(sig.Sector)
	}
	return t.Check(im)
}

// keyNames lists the keys not revoked for people: their short forms.
func keyNames(keys, revoked []image.KeyDigest) string {
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		if !slices.Contains(revoked, k) {
			names = append(names, k.Short())
		}
	}
	if len(names) == 0 {
		return "no key (every trusted key is revoked)"
	}
	return strings.Join(names, ", ")
}
