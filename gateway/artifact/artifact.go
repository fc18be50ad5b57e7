// Package artifact is the gateway's firmware store: application images
// uploaded by operators, checked completely before any board sees them,
// kept once per content (named by the SHA-256 of the whole file) with the
// description the image carries, and release channels that point at one
// image each.
//
// Layout on disk and in the store:
//
//	<Dir>/<sha256 hex>.bin      the image, written once, read-only after
//	<Dir>/upload-*.tmp          an upload in progress (removed at Open)
//	bucket "artifacts"  key <sha256 hex>  -> Artifact (JSON)
//	bucket "channels"   key <channel>     -> Channel (JSON)
//
// A record is written only after its file is complete, verified, synced
// and renamed into place, so a record always names a whole, good file; a
// file without a record (a crash between the rename and the write) is
// taken up again by the next upload of the same bytes.
//
// Signatures: an image may carry a signature sector (Secure Boot V2 style
// ECDSA blocks, see bus/image). The record keeps the sector as
// uploaded and what each block is (key digest, whether it verifies), so
// the rollout engine can ask, board by board, what a board with its burned
// keys would decide (Artifact.Check) without reading the image again. A
// store given trusted keys (Options.Trusted, holo-gateway --trusted-key)
// refuses every image without a valid block of one of them (ErrUntrusted)
// before it writes anything; without keys it keeps unsigned images too and
// says so in Artifact.Trust. Records written before signatures were kept
// load as unsigned.
//
// Channels are published as release manifests in the board's format
// (docs/spec-decisions.md "Release channels"): GET <prefix>channels/<name>.json
// answers {version, image_url, size, sha256, release_url} with image_url
// relative to the manifest, and GET <prefix>images/<sha256>.bin serves the
// image itself with range requests straight from its file.
package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/gateway/fault"
	"github.com/holofleet/holofleet/store"
)

// Errors of the artifact store.
var (
	// ErrInvalid: the upload is not a complete, good image for the
	// fleet's boards (structure, checksum, hash, chip, project, size).
	ErrInvalid = fault.New(fault.Invalid, "artifact: invalid image")
	// ErrNotFound: no artifact has that SHA-256, or no such channel.
	ErrNotFound = fault.New(fault.NotFound, "artifact: not found")
	// ErrBadName: a SHA-256 that is not 64 hex digits, or a channel name
	// outside [a-z0-9._-]{1,32}.
	ErrBadName = fault.New(fault.Invalid, "artifact: bad name")
	// ErrInUse: the artifact is published on a channel or used by a
	// rollout.
	ErrInUse = fault.New(fault.Precondition, "artifact: in use")
	// ErrTooLarge: the upload is larger than a slot.
	ErrTooLarge = fault.New(fault.Invalid, "artifact: image too large")
	// ErrUntrusted: the store has trusted keys and the upload carries no
	// valid signature block of one of them. The error also wraps the
	// image package's reason (image.ErrUnsigned, ErrUntrustedKey,
	// ErrBadSignature, ErrBadBlock).
	ErrUntrusted = fault.New(fault.Invalid, "artifact: image not trusted")
)

// Trust verdicts of an artifact (Artifact.Trust).
const (
	// TrustTrusted: a block verifies with a key the gateway trusts.
	TrustTrusted = "trusted"
	// TrustSigned: blocks verify, but with no key the gateway trusts
	// (a gateway without --trusted-key trusts none).
	TrustSigned = "signed"
	// TrustUnsigned: no block verifies (no signature sector, or only
	// malformed or wrong blocks, or a malformed sector).
	TrustUnsigned = "unsigned"
)

// Bucket names in the store.
const (
	BucketArtifacts = "artifacts"
	BucketChannels  = "channels"
)

// Artifact describes one stored image.
type Artifact struct {
	SHA256 string `json:"sha256"` // hex SHA-256 of the whole file
	Size   int64  `json:"size"`
	// Chip is the image header's chip id.
	Chip uint16 `json:"chip"`
	// App is the image's application description.
	App boardapi.App `json:"app"`
	// Name is the file name given at upload, for people.
	Name  string    `json:"name,omitempty"`
	Added time.Time `json:"added"`
	// Signature is the image's signature sector; nil when it has none.
	Signature *Signature `json:"signature,omitempty"`
	// Signers are the signature blocks in sector order. Valid and Error
	// are kept with the record; Trusted is filled in when the record is
	// read, against the store's keys of the moment.
	Signers []Signer `json:"signers,omitempty"`
	// Trust is TrustTrusted, TrustSigned or TrustUnsigned, filled in when
	// the record is read (not stored: the keys may change).
	Trust string `json:"-"`
}

// Signature is an image's signature sector as uploaded.
type Signature struct {
	// Content is the length of the signed content: where the sector
	// starts.
	Content int64 `json:"content"`
	// Digest is the hex SHA-256 of the signed content.
	Digest string `json:"digest"`
	// Sector is the image.SectorSize bytes of the sector.
	Sector []byte `json:"sector"`
	// Error says what is wrong with the sector as a whole (data after its
	// last block); "" when nothing is.
	Error string `json:"error,omitempty"`
}

// Signer is one signature block of an artifact.
type Signer struct {
	// KeyDigest is the hex key digest the block names (what a board
	// burns); for a malformed block, whatever its key bytes hash to.
	KeyDigest string `json:"key_digest"`
	// Valid is true when the block is well formed, made for this image's
	// content and its signature verifies with its key.
	Valid bool `json:"valid"`
	// Trusted is true when the key is one of the store's trusted keys.
	Trusted bool `json:"-"`
	// Error says why the block does not verify.
	Error string `json:"error,omitempty"`
}

// Channel is one release channel: the image boards on it should run.
type Channel struct {
	Name       string    `json:"name"`
	SHA256     string    `json:"sha256"`
	Version    string    `json:"version"`
	ReleaseURL string    `json:"release_url,omitempty"`
	Updated    time.Time `json:"updated"`
}

// Options configure a Store.
type Options struct {
	// Dir holds the image files.
	Dir string
	// DB holds the records.
	DB *store.DB
	// Expect is what every image must be; the zero value means the
	// simulated boards' (host chip, holo-board, at most one slot).
	Expect image.Expect
	Clock  clock.Clock
	// InUse, when set, tells whether something else (a rollout) still
	// needs the artifact; Delete refuses then.
	InUse func(sha string) bool
	// Trusted are the key digests the gateway trusts. With any, an upload
	// must carry a valid signature block of one of them (ErrUntrusted);
	// without, every good image is kept and marked by Artifact.Trust.
	Trusted []image.KeyDigest
	// Revoked are key digests never trusted again, even when Trusted
	// names them: an image signed only by them is refused as signed by a
	// revoked key (image.ErrRevokedKey).
	Revoked []image.KeyDigest
}

// Store keeps artifacts and channels. It is safe for concurrent use.
type Store struct {
	o        Options
	arts     *store.Bucket
	channels *store.Bucket
	mu       sync.Mutex // serialises record changes
	deltas   deltaLocks
}

var (
	shaRE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	channelRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,31}$`)
)

// Open opens the store over o.Dir and o.DB and removes unfinished uploads.
func Open(o Options) (*Store, error) {
	if o.Dir == "" || o.DB == nil {
		return nil, errors.New("artifact: Dir and DB are required")
	}
	if o.Expect == (image.Expect{}) {
		o.Expect = image.HostExpect()
		o.Expect.MaxSize = image.SlotSize
	}
	o.Clock = defaults.Clock(o.Clock)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("artifact: %w", err)
	}
	tmps, _ := filepath.Glob(filepath.Join(o.Dir, "upload-*.tmp"))
	for _, t := range tmps {
		os.Remove(t)
	}
	return &Store{o: o, arts: o.DB.Bucket(BucketArtifacts), channels: o.DB.Bucket(BucketChannels)}, nil
}

// Expect is what the store requires of images.
func (s *Store) Expect() image.Expect { return s.o.Expect }

// CheckSHA returns sha in lower case when it is 64 hex digits.
func CheckSHA(sha string) (string, error) {
	sha = strings.ToLower(sha)
	if !shaRE.MatchString(sha) {
		return "", fmt.Errorf("%w: sha256 %q is not 64 hex digits", ErrBadName, sha)
	}
	return sha, nil
}

// CheckChannel checks a channel name.
func CheckChannel(name string) error {
	if !channelRE.MatchString(name) {
		return fmt.Errorf("%w: channel %q (1-32 of a-z 0-9 . _ -, starting with a letter or digit)", ErrBadName, name)
	}
	return nil
}

func (s *Store) path(sha string) string { return filepath.Join(s.o.Dir, sha+".bin") }

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Add stores the image read from r (streamed: never held whole in
// memory), verifying it as it arrives and completely before it is kept.
// wantSHA, when not empty, is the SHA-256 the upload must have. An image
// already stored is not written again: its record comes back with
// existed true.
func (s *Store) Add(ctx context.Context, r io.Reader, name, wantSHA string) (a Artifact, existed bool, err error) {
	if wantSHA != "" {
		if wantSHA, err = CheckSHA(wantSHA); err != nil {
			return a, false, err
		}
	}
	tmp, err := os.CreateTemp(s.o.Dir, "upload-*.tmp")
	if err != nil {
		return a, false, fmt.Errorf("artifact: %w", err)
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	v := image.NewVerifier(s.o.Expect)
	limit := s.o.Expect.MaxSize
	limit = defaults.Positive(limit, image.SlotSize)
	// Every byte goes through the verifier: after the image it takes
	// 0xFF padding and a signature sector, and refuses anything else.
	n, err := io.Copy(io.MultiWriter(tmp, h, v), io.LimitReader(ctxReader{ctx, r}, limit+1))
	if err != nil {
		if v.Err() != nil {
			return a, false, invalid(v.Err())
		}
		return a, false, fmt.Errorf("artifact: upload: %w", err)
	}
	if n > limit {
		return a, false, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	im, err := v.Finish()
	if err != nil {
		return a, false, invalid(err)
	}
	if im.Size != n {
		return a, false, fmt.Errorf("%w: %d bytes after the image's end", ErrInvalid, n-im.Size)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if sum != im.SHA256Hex() {
		return a, false, fmt.Errorf("%w: hash mismatch while reading", ErrInvalid)
	}
	if wantSHA != "" && sum != wantSHA {
		return a, false, fmt.Errorf("%w: sha256 is %s, expected %s", ErrInvalid, sum, wantSHA)
	}
	if t := s.trust(); t.Enabled() {
		if _, err := t.Check(im); err != nil {
			return a, false, s.untrusted(err)
		}
	}
	d := im.Desc
	a = Artifact{SHA256: sum, Size: n, Chip: im.Header.ChipID, Name: filepath.Base(name),
		App:   boardapi.App{Project: d.Project, Version: d.Version, Date: d.Date, Time: d.Time, IDF: d.IDF, ELFSHA256: d.ELFSHA256Hex(), SecureVersion: d.SecureVersion},
		Added: s.o.Clock.Now().UTC()}
	if a.Signature, a.Signers, err = signatureOf(tmp, im); err != nil {
		return a, false, err
	}
	if a.Name == "." || a.Name == "/" {
		a.Name = ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var old Artifact
	if ok, err := s.arts.Get(sum, &old); err != nil {
		return a, false, err
	} else if ok {
		if _, err := os.Stat(s.path(sum)); err == nil {
			return s.annotate(old), true, nil
		}
	}
	if err := tmp.Sync(); err != nil {
		return a, false, fmt.Errorf("artifact: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return a, false, fmt.Errorf("artifact: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path(sum)); err != nil {
		return a, false, fmt.Errorf("artifact: %w", err)
	}
	tmp = nil
	syncDir(s.o.Dir)
	if err := s.arts.Put(sum, a); err != nil {
		return a, false, err
	}
	return s.annotate(a), false, nil
}

// invalid wraps a verification error: ErrTooLarge for images larger
// than a slot, else ErrInvalid.
func invalid(err error) error {
	if errors.Is(err, image.ErrTooLarge) {
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	return fmt.Errorf("%w: %v", ErrInvalid, err)
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Get returns the artifact with that SHA-256.
func (s *Store) Get(sha string) (Artifact, error) {
	sha, err := CheckSHA(sha)
	if err != nil {
		return Artifact{}, err
	}
	var a Artifact
	ok, err := s.arts.Get(sha, &a)
	if err != nil {
		return a, err
	}
	if !ok {
		return a, fmt.Errorf("%w: artifact %s", ErrNotFound, sha)
	}
	return s.annotate(a), nil
}

// Open opens the artifact's file for reading (the caller closes it).
func (s *Store) Open(sha string) (*os.File, Artifact, error) {
	a, err := s.Get(sha)
	if err != nil {
		return nil, a, err
	}
	f, err := os.Open(s.path(a.SHA256))
	if err != nil {
		return nil, a, fmt.Errorf("%w: artifact %s: %v", ErrNotFound, sha, err)
	}
	return f, a, nil
}

// List returns every artifact, newest first.
func (s *Store) List() ([]Artifact, error) {
	out := []Artifact{}
	err := store.Each(s.arts, func(_ string, a Artifact) error {
		out = append(out, s.annotate(a))
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(x, y Artifact) int { return y.Added.Compare(x.Added) })
	return out, nil
}

// Delete removes an artifact no channel and no rollout uses.
func (s *Store) Delete(sha string) error {
	a, err := s.Get(sha)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	chs, err := s.listChannels()
	if err != nil {
		return err
	}
	for _, c := range chs {
		if c.SHA256 == a.SHA256 {
			return fmt.Errorf("%w: published on channel %s", ErrInUse, c.Name)
		}
	}
	if s.o.InUse != nil && s.o.InUse(a.SHA256) {
		return fmt.Errorf("%w: a rollout uses it", ErrInUse)
	}
	if err := s.arts.Delete(a.SHA256); err != nil {
		return err
	}
	if err := os.Remove(s.path(a.SHA256)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("artifact: %w", err)
	}
	s.dropDeltas(a.SHA256)
	return nil
}

// SetChannel points channel name at the artifact sha (publishing it).
func (s *Store) SetChannel(name, sha, releaseURL string) (Channel, error) {
	if err := CheckChannel(name); err != nil {
		return Channel{}, err
	}
	a, err := s.Get(sha)
	if err != nil {
		return Channel{}, err
	}
	c := Channel{Name: name, SHA256: a.SHA256, Version: a.App.Version, ReleaseURL: releaseURL, Updated: s.o.Clock.Now().UTC()}
	s.mu.Lock()
	defer s.mu.Unlock()
	return c, s.channels.Put(name, c)
}

// DeleteChannel withdraws a channel (boards then see no firmware).
func (s *Store) DeleteChannel(name string) error {
	if err := CheckChannel(name); err != nil {
		return err
	}
	if _, err := s.Channel(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.channels.Delete(name)
}

// Channel returns one channel.
func (s *Store) Channel(name string) (Channel, error) {
	if err := CheckChannel(name); err != nil {
		return Channel{}, err
	}
	var c Channel
	ok, err := s.channels.Get(name, &c)
	if err != nil {
		return c, err
	}
	if !ok {
		return c, fmt.Errorf("%w: channel %s", ErrNotFound, name)
	}
	return c, nil
}

// Channels lists the channels by name.
func (s *Store) Channels() ([]Channel, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listChannels()
}

func (s *Store) listChannels() ([]Channel, error) {
	out := []Channel{}
	err := store.Each(s.channels, func(_ string, c Channel) error {
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Manifest is channel name's release manifest, with image_url relative
// to the manifest's own URL (<prefix>channels/<name>.json).
func (s *Store) Manifest(name string) (boardapi.Manifest, error) {
	c, err := s.Channel(name)
	if err != nil {
		return boardapi.Manifest{}, err
	}
	a, err := s.Get(c.SHA256)
	if err != nil {
		return boardapi.Manifest{}, err
	}
	return boardapi.Manifest{Version: a.App.Version, ImageURL: "../images/" + a.SHA256 + ".bin", Size: a.Size,
		SHA256: a.SHA256, ReleaseURL: c.ReleaseURL}, nil
}
