package ota

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/bus/imagedelta"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/ota/flash"
)

// Delta uploads (extension ota-delta, docs/rollouts.md "Delta images").
//
// PUT /ota/image?base=<sha256> carries a delta (package bus/imagedelta)
// instead of an image. The board answers 409 base_mismatch, before the
// session starts, unless base is the SHA-256 of the image it runs and the
// delta's header names the same base. Then the board rebuilds the new
// image from its running slot and the delta, streaming it into the free
// slot's staging file exactly as a full upload's bytes arrive: the same
// verifier, the same checks (hash, signature, keys, anti-rollback), the
// same commit. A corrupt delta fails the session before the slot, or its
// otadata record, changes. The rebuilt image must hash to the delta
// header's target SHA-256 (and to sha256 when the query gives one).

// runningImage returns the image the board runs (its bytes and SHA-256).
func (s *Service) runningImage() ([]byte, [32]byte, error) {
	run, _, err := s.running()
	if err != nil {
		return nil, [32]byte{}, err
	}
	p, err := s.fl.Open(flash.Slots[run])
	if err != nil {
		return nil, [32]byte{}, err
	}
	defer p.Close()
	exp := s.cfg.Expect
	exp.Force = true
	im, err := image.VerifyAt(p, p.Size(), exp)
	if err != nil {
		return nil, [32]byte{}, fmt.Errorf("the running slot %s holds no image that checks: %w", flash.Slots[run], err)
	}
	b := make([]byte, im.Size)
	if _, err := p.ReadAt(b, 0); err != nil {
		return nil, [32]byte{}, err
	}
	return b, im.SHA256, nil
}

// RunningSHA256 is the hex SHA-256 of the running image: the
// bootloader's when it checked the image in this process, else read from
// the running slot once per boot ("" when it holds no image that checks).
func (s *Service) RunningSHA256() string {
	s.runSHAOnce.Do(func() {
		if b := s.cfg.Booted; b.Size > 0 && s.cfg.Running >= 0 {
			s.runSHA, s.runSize = hex.EncodeToString(b.SHA256[:]), b.Size
			return
		}
		if img, sum, err := s.runningImage(); err == nil {
			s.runSHA, s.runSize = hex.EncodeToString(sum[:]), int64(len(img))
		}
	})
	return s.runSHA
}

// baseImage reads the running image's bytes (RunningSHA256 first). The
// running slot is not written during a boot, so its bytes are not hashed
// again: a base that differed would only rebuild an image whose SHA-256
// is not the delta's target, which the checks refuse.
func (s *Service) baseImage() ([]byte, error) {
	if s.RunningSHA256() == "" {
		return nil, api.Errorf(api.ErrBaseMismatch, "the running slot holds no image that checks")
	}
	run, _, err := s.running()
	if err != nil {
		return nil, err
	}
	p, err := s.fl.Open(flash.Slots[run])
	if err != nil {
		return nil, err
	}
	defer p.Close()
	b := make([]byte, s.runSize)
	if _, err := p.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// UploadDelta receives a delta of length bytes from r and rebuilds the
// image it describes into the slot that is not running; base is the hex
// SHA-256 of the running image the delta applies to. See Upload for the
// rest.
func (s *Service) UploadDelta(source string, r io.Reader, length int64, base string, opt Options, abort func()) (Session, error) {
	if length < 0 {
		return Session{}, api.Errorf(api.ErrLengthRequired, "the delta's Content-Length is required")
	}
	if length > flash.SlotSize {
		return Session{}, api.Errorf(api.ErrTooLarge, "%d bytes do not fit the %d-byte slot", length, flash.SlotSize)
	}
	if err := checkSHA(base); err != nil || base == "" {
		return Session{}, api.Errorf(api.ErrBadSHA256, "base must be 64 hex digits, not %q", base)
	}
	if err := checkSHA(opt.SHA256); err != nil {
		return Session{}, err
	}
	base = strings.ToLower(base)
	if err := s.checkBase(base); err != nil {
		return Session{}, err
	}
	h, target, baseImg, err := s.deltaHeader(r, base, &opt, "the query")
	if err != nil {
		return Session{}, err
	}
	w, ctx, slot, release, err := s.begin(source, nil, h.Size, abort)
	if err != nil {
		return Session{}, err
	}
	s.cfg.Log.Info("ota: rebuilding an image from a delta", "base", base, "target", target, "delta_bytes", length, "image_bytes", h.Size)
	err = s.receiveDelta(ctx, w.gen, slot, baseImg, h, r, opt)
	s.finished(w)
	release()
	if err != nil {
		return Session{}, err
	}
	if opt.Activate {
		res, err := s.activate(nil, opt.Reboot, UpdateRestartDelay)
		return res.Session, err
	}
	return s.Session(), nil
}

// checkBase answers 409 base_mismatch unless base (64 hex digits) is the
// SHA-256 of the running image: before anything is read or changes.
func (s *Service) checkBase(base string) error {
	if err := checkSHA(base); err != nil || base == "" {
		return api.Errorf(api.ErrBadSHA256, "base must be 64 hex digits, not %q", base)
	}
	base = strings.ToLower(base)
	if run := s.RunningSHA256(); run != base {
		if run == "" {
			run = "an image that does not check"
		}
		return api.Errorf(api.ErrBaseMismatch, "the delta applies to %s; this board runs %s: send the whole image", base, run)
	}
	return nil
}

// receiveDelta rebuilds the image h describes from the running image
// base and the delta's body r into slot, checked as any upload is
// (receive); a body that does not open as h's delta fails the session.
func (s *Service) receiveDelta(ctx context.Context, gen uint64, slot int, base []byte, h imagedelta.Header, r io.Reader, opt Options) error {
	dr, err := imagedelta.NewReader(base, h, r)
	if err != nil {
		return s.fail(gen, api.Errorf(api.ErrInvalidImage, "%v", err))
	}
	defer dr.Close()
	return s.receive(ctx, gen, slot, dr, h.Size, opt)
}

// deltaHeader reads a delta's header from r and checks it against base
// (named by who: "the query", "the request"), opt's sha256 (set to the
// target when empty) and the slot; it returns the header, the target's
// hex SHA-256 and the running image the delta applies to.
func (s *Service) deltaHeader(r io.Reader, base string, opt *Options, who string) (imagedelta.Header, string, []byte, error) {
	h, err := imagedelta.ReadHeader(r)
	if err != nil {
		return h, "", nil, api.Errorf(api.ErrInvalidImage, "%v", err)
	}
	if got := hex.EncodeToString(h.Base[:]); got != base {
		return h, "", nil, api.Errorf(api.ErrBadRequest, "the delta's header names base %s, %s %s", got, who, base)
	}
	target := hex.EncodeToString(h.Target[:])
	if opt.SHA256 == "" {
		opt.SHA256 = target
	} else if strings.ToLower(opt.SHA256) != target {
		return h, "", nil, api.Errorf(api.ErrSHA256Mismatch, "the delta rebuilds %s, not %s", target, strings.ToLower(opt.SHA256))
	}
	if h.Size > flash.SlotSize {
		return h, "", nil, api.Errorf(api.ErrTooLarge, "the delta rebuilds %d bytes, the slot holds %d", h.Size, flash.SlotSize)
	}
	baseImg, err := s.baseImage()
	if err != nil {
		return h, "", nil, err
	}
	return h, target, baseImg, nil
}

// pullDelta is POST /ota/pull with base: resp is the answer of the
// delta's URL src. The header is read and checked before the session
// starts (a wrong delta changes nothing); then the image is rebuilt from
// the running one and the download into the free slot, through the same
// checks as any pull.
func (s *Service) pullDelta(resp *http.Response, src, base string, opt Options, cancelFetch func()) (Session, error) {
	fail := func(err error) (Session, error) {
		resp.Body.Close()
		cancelFetch()
		return Session{}, err
	}
	length := resp.ContentLength
	if length < 0 {
		return fail(api.Errorf(api.ErrUnreachable, "%s does not say its length", src))
	}
	if length > flash.SlotSize {
		return fail(api.Errorf(api.ErrTooLarge, "%d bytes do not fit the %d-byte slot", length, flash.SlotSize))
	}
	body := s.cfg.Long.WatchN(resp.Body, "firmware pull", length, cancelFetch)
	h, target, baseImg, err := s.deltaHeader(body, base, &opt, "the request")
	if err != nil {
		return fail(err)
	}
	w, wctx, slot, release, err := s.begin(SourcePull, strp(src), h.Size, cancelFetch)
	if err != nil {
		return fail(err)
	}
	sess := s.Session()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancelFetch()
		defer resp.Body.Close()
		s.cfg.Log.Info("ota: rebuilding a pulled image from a delta", "base", base, "target", target, "delta_bytes", length, "image_bytes", h.Size)
		err := s.receiveDelta(wctx, w.gen, slot, baseImg, h, body, opt)
		s.finished(w)
		release()
		if err == nil && opt.Activate {
			_, _ = s.activate(nil, opt.Reboot, UpdateRestartDelay)
		}
	}()
	return sess, nil
}

// deltaError maps a fault of a delta's frame to the API's error.
func deltaError(off, total int64, err error) error {
	if errors.Is(err, imagedelta.ErrCorrupt) {
		return api.Errorf(api.ErrInvalidImage, "the delta is corrupt after %d of %d bytes: %v", off, total, err)
	}
	return nil
}
