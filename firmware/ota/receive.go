package ota

import (
	"context"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/firmware/ota/otadata"
)

// Upload receives an image of length bytes from r into the slot that is
// not running (PUT /ota/image; the console uses it with its own source).
// abort, when set, is called on DELETE /ota/image to unblock a read of r.
// It returns the session when the image is staged, activated, or
// activated with a restart coming; otherwise an *api.Error.
func (s *Service) Upload(source string, r io.Reader, length int64, opt Options, abort func()) (Session, error) {
	if length < 0 {
		return Session{}, api.Errorf(api.ErrLengthRequired, "the image's Content-Length is required")
	}
	if length > flash.SlotSize {
		return Session{}, api.Errorf(api.ErrTooLarge, "%d bytes do not fit the %d-byte slot", length, flash.SlotSize)
	}
	if err := checkSHA(opt.SHA256); err != nil {
		return Session{}, err
	}
	w, ctx, slot, release, err := s.begin(source, nil, length, abort)
	if err != nil {
		return Session{}, err
	}
	err = s.receive(ctx, w.gen, slot, r, length, opt)
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

func checkSHA(h string) error {
	if h == "" {
		return nil
	}
	if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
		return api.Errorf(api.ErrBadSHA256, "sha256 must be 64 hex digits, not %q", h)
	}
	return nil
}

// finished marks worker w through.
func (s *Service) finished(w *worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.work == w {
		s.work = nil
	}
	close(w.done)
}

// receive streams the image into the slot while checking it, then
// completes the check; the session moves to staged or failed. The bytes
// go to the slot's staging file (flash.Staged): the slot and its otadata
// record change only once the image has passed every check, signature
// included, so a refused image leaves the slot as it was.
func (s *Service) receive(ctx context.Context, gen uint64, slot int, r io.Reader, total int64, opt Options) error {
	part, err := s.fl.Stage(flash.Slots[slot])
	if err != nil {
		return s.fail(gen, err)
	}
	committed := false
	defer func() {
		if !committed {
			part.Abort()
		}
	}()
	exp := s.cfg.Expect
	exp.Force = opt.Force
	v := image.NewVerifier(exp)
	buf := make([]byte, chunkSize)
	var off int64
	// The description's secure version is read from the first bytes: a
	// downgrade is refused then, not after the whole image came (the
	// verified description is checked again at the end, so a forged early
	// one can only cost its sender the upload).
	earlyDone := false
	for off < total {
		if ctx.Err() != nil {
			return s.fail(gen, api.Errorf(api.ErrCancelled, "the update was cancelled"))
		}
		n, rerr := r.Read(buf[:min(int64(len(buf)), total-off)])
		if rerr == io.EOF && off+int64(n) < total {
			rerr = io.ErrUnexpectedEOF
		} else if rerr == io.EOF {
			rerr = nil
		}
		if n > 0 {
			if _, err := v.Write(buf[:n]); err != nil {
				return s.fail(gen, imageError(err))
			}
			if !earlyDone {
				if e, ok := v.Early(); ok {
					earlyDone = true
					if err := s.checkSecureVersion(e.Desc); err != nil {
						return s.fail(gen, err)
					}
				}
			}
			if _, err := part.WriteAt(buf[:n], off); err != nil {
				return s.fail(gen, fmt.Errorf("writing %s: %w", flash.Slots[slot], err))
			}
			off += int64(n)
			s.progress(gen, off)
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return s.fail(gen, api.Errorf(api.ErrCancelled, "the update was cancelled"))
			}
			if e := deltaError(off, total, rerr); e != nil {
				return s.fail(gen, e)
			}
			return s.fail(gen, api.Errorf(api.ErrBadRequest, "the image stopped after %d of %d bytes: %v", off, total, rerr))
		}
	}
	if !s.move(gen, StateVerifying) {
		return api.Errorf(api.ErrCancelled, "the update was cancelled")
	}
	im, err := v.Finish()
	if err != nil {
		return s.fail(gen, imageError(err))
	}
	sum := hex.EncodeToString(im.SHA256[:])
	if opt.SHA256 != "" && subtle.ConstantTimeCompare([]byte(strings.ToLower(opt.SHA256)), []byte(sum)) != 1 {
		return s.fail(gen, api.Errorf(api.ErrSHA256Mismatch, "the image's SHA-256 is %s, not %s", sum, strings.ToLower(opt.SHA256)))
	}
	if err := s.checkSignature(im); err != nil {
		return s.fail(gen, err)
	}
	s.mu.Lock()
	cancelled := s.gen != gen
	s.mu.Unlock()
	if cancelled {
		return api.Errorf(api.ErrCancelled, "the update was cancelled")
	}
	// The image is good: forget what the slot held, then replace it.
	if _, err := s.store.Update(func(cur otadata.Record, rerr error) (otadata.Record, error) {
		if rerr != nil || cur.States[slot] == otadata.Undefined {
			return cur, errNothingToClear
		}
		return cur.With(slot, otadata.Undefined)
	}); err != nil && !errors.Is(err, errNothingToClear) {
		return s.fail(gen, err)
	}
	if err := part.Commit(); err != nil {
		return s.fail(gen, err)
	}
	committed = true
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return api.Errorf(api.ErrCancelled, "the update was cancelled")
	}
	s.staged = im
	s.signers = image.Signers(im)
	s.sess.State = StateStaged
	s.sess.SHA256 = strp(sum)
	s.sess.App = appOf(im.Desc)
	s.sess.Bytes = off
	s.end = s.cfg.Clock.Now()
	s.emit()
	s.cfg.Log.Info("ota: image staged", "slot", flash.Slots[slot], "version", im.Desc.Version, "sha256", sum, "signers", hexKeys(s.signers))
	return nil
}

// errNothingToClear skips an otadata write with nothing to change.
var errNothingToClear = errors.New("ota: no record to clear")

// checkSignature refuses an image the board's trusted keys do not let in
// (422 invalid_image, saying why); a board with no key burned takes any.
func (s *Service) checkSignature(im *image.Image) error {
	st, err := s.fuses.Read()
	if err != nil {
		return err
	}
	// Anti-rollback first, keys or not (issue 25 row 11).
	if err := downgradeError(st.Trust().CheckSecureVersion(im.Desc)); err != nil {
		return err
	}
	if !st.Enabled() {
		return nil
	}
	if _, err := st.Trust().Check(im); err != nil {
		return api.Errorf(api.ErrInvalidImage, "secure boot refuses the image: %s", strings.TrimPrefix(err.Error(), "image: "))
	}
	return nil
}

// checkSecureVersion refuses a description whose secure version is below
// the board's anti-rollback floor (422 downgrade_refused).
func (s *Service) checkSecureVersion(d image.Desc) error {
	st, err := s.fuses.Read()
	if err != nil {
		return err
	}
	return downgradeError(st.Trust().CheckSecureVersion(d))
}

func downgradeError(err error) error {
	if err == nil {
		return nil
	}
	return api.Errorf(api.ErrDowngrade, "%s", strings.TrimPrefix(err.Error(), "image: "))
}

// imageError maps the image package's errors to the API's.
func imageError(err error) error {
	if errors.Is(err, image.ErrTooLarge) {
		return api.Errorf(api.ErrTooLarge, "%v", err)
	}
	return api.Errorf(api.ErrInvalidImage, "%v", err)
}

// progress records bytes received, publishing at most every ProgressEvery.
func (s *Service) progress(gen uint64, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return
	}
	s.sess.Bytes = n
	if s.cfg.Clock.Since(s.lastEmit) >= ProgressEvery {
		s.emit()
	}
}

// move changes the state of session gen; false when it is no longer the
// current session.
func (s *Service) move(gen uint64, state string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return false
	}
	s.sess.State = state
	s.emit()
	return true
}

// fail ends session gen as failed with err's code (cancelled for a
// cancel) and returns err as an *api.Error.
func (s *Service) fail(gen uint64, err error) error {
	e := api.Wrap(err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		// DELETE already ended this session as cancelled.
		return api.Errorf(api.ErrCancelled, "the update was cancelled")
	}
	reason := e.Code + ": " + e.Message
	if e.Code == api.ErrCancelled.Code {
		reason = "cancelled"
	}
	s.sess.State = StateFailed
	s.sess.Error = strp(reason)
	s.end = s.cfg.Clock.Now()
	s.staged = nil
	s.emit()
	s.cfg.Log.Warn("ota: update failed", "source", s.sess.Source, "err", reason)
	return e
}
