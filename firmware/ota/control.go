package ota

import (
	"errors"
	"strings"
	"time"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/ota/bootloader"
	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/firmware/ota/otadata"
)

// discardWait bounds how long DELETE /ota/image waits for a cancelled
// worker to let go of the slot.
const discardWait = 5 * time.Second

// Discard is DELETE /ota/image: it cancels a session in progress (failed,
// error cancelled), forgets a staged image or a failure (idle), and
// refuses an activated image (409 cannot_discard).
func (s *Service) Discard() (Session, error) {
	s.mu.Lock()
	switch s.sess.State {
	case StateIdle:
	case StateReceiving, StateDownloading, StateVerifying:
		w := s.work
		s.gen++ // the worker's later updates no longer apply
		s.sess.State = StateFailed
		s.sess.Error = strp("cancelled")
		s.end = s.cfg.Clock.Now()
		s.emit()
		s.mu.Unlock()
		if w != nil {
			w.cancel()
			select {
			case <-w.done:
			case <-time.After(discardWait):
			}
		}
		return s.Session(), nil
	case StateStaged, StateFailed:
		s.gen++
		s.sess = idleSession()
		s.staged = nil
		s.emit()
	case StateActive:
		s.mu.Unlock()
		return Session{}, api.Errorf(api.ErrCannotDiscard, "the image is activated; activate the running slot (reboot false) to undo it")
	}
	defer s.mu.Unlock()
	return s.snapshot(), nil
}

// Activate is POST /ota/activate. A nil slot activates the staged image;
// a slot label selects that slot: the running one undoes an activation
// that has not restarted yet, the other one goes back to the image it
// holds. The image is checked again before it is selected. With reboot
// the board restarts ActivateRestartDelay after the reply.
func (s *Service) Activate(slotLabel *string, reboot bool) (ActivateResult, error) {
	return s.activate(slotLabel, reboot, ActivateRestartDelay)
}

// activate is Activate restarting delay after the reply.
func (s *Service) activate(slotLabel *string, reboot bool, delay time.Duration) (ActivateResult, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	run, rec, err := s.running()
	if err != nil {
		return ActivateResult{}, err
	}
	s.mu.Lock()
	state, staged, sslot := s.sess.State, s.staged, s.slot
	s.mu.Unlock()
	switch state {
	case StateReceiving, StateDownloading, StateVerifying:
		return ActivateResult{}, api.Errorf(api.ErrBusy, "an update is %s", state)
	}
	target := -1
	if slotLabel == nil {
		if state != StateStaged || staged == nil {
			return ActivateResult{}, api.Errorf(api.ErrNothingStaged, "no image is staged (the session is %s)", state)
		}
		target = sslot
	} else {
		for i, l := range flash.Slots {
			if l == *slotLabel {
				target = i
			}
		}
		if target < 0 {
			return ActivateResult{}, api.Errorf(api.ErrNoSuchSlot, "no slot %q; slots are %s and %s", *slotLabel, flash.Slots[0], flash.Slots[1])
		}
	}

	var res ActivateResult
	switch {
	case target == run:
		// Undo a pending activation (or nothing to undo).
		if bootOf(run, rec) != run {
			if _, err := s.store.Update(func(cur otadata.Record, _ error) (otadata.Record, error) {
				return cur.Select(run, cur.States[run])
			}); err != nil {
				return ActivateResult{}, err
			}
		}
		s.mu.Lock()
		if s.sess.State == StateActive {
			if s.staged != nil && s.sess.Source != SourceActivate {
				s.sess.State = StateStaged
				s.sess.BootsNext = false
			} else {
				s.gen++
				s.sess = idleSession()
				s.staged = nil
			}
			s.emit()
		}
		s.mu.Unlock()
		res.App = s.slotApp(flash.Slots[run])
	case staged != nil && target == sslot && (state == StateStaged || state == StateActive):
		im, err := s.recheck(target, staged)
		if err != nil {
			return ActivateResult{}, err
		}
		if err := s.selectSlot(run, target, otadata.New); err != nil {
			return ActivateResult{}, err
		}
		s.mu.Lock()
		s.sess.State = StateActive
		s.sess.BootsNext = true
		s.emit()
		s.mu.Unlock()
		res.App = appOf(im.Desc)
	default:
		switch st := rec.States[target]; st {
		case otadata.Invalid, otadata.Aborted:
			return ActivateResult{}, api.Errorf(api.ErrInvalidImage, "%s is recorded %s and cannot be activated", flash.Slots[target], st)
		case otadata.Undefined:
			return ActivateResult{}, api.Errorf(api.ErrInvalidImage, "%s holds no image that was ever selected", flash.Slots[target])
		}
		im, err := s.recheck(target, nil)
		if err != nil {
			return ActivateResult{}, err
		}
		if err := s.selectSlot(run, target, rec.States[target]); err != nil {
			return ActivateResult{}, err
		}
		s.mu.Lock()
		s.gen++
		s.staged = nil
		s.slot = target
		s.sess = Session{State: StateActive, Source: SourceActivate, Slot: strp(flash.Slots[target]),
			App: appOf(im.Desc), BootsNext: true, SHA256: strp(im.SHA256Hex()), Bytes: im.Size, Total: im.Size}
		s.start, s.end = s.cfg.Clock.Now(), s.cfg.Clock.Now()
		s.emit()
		s.mu.Unlock()
		res.App = appOf(im.Desc)
	}
	res.Slot = flash.Slots[target]
	if reboot {
		ms := delay.Milliseconds()
		res.RestartInMS = &ms
		s.cfg.Log.Info("ota: restarting into the activated slot", "slot", res.Slot, "in", delay)
		s.cfg.Restart(delay)
	}
	res.Session = s.Session()
	return res, nil
}

// recheck verifies the image in slot from flash, its signature included
// when keys are burned (as the bootloader will before booting it); a
// staged image must also still have the SHA-256 it was staged with. A bad
// image marks the slot invalid in otadata (when it has a record) and fails
// the session.
func (s *Service) recheck(slot int, staged *image.Image) (*image.Image, error) {
	fuses, err := s.fuses.Read()
	if err != nil {
		return nil, err
	}
	im, _, _, err := bootloader.Check(s.fl, slot, s.cfg.Expect, fuses.Trust(), s.cfg.Factory)
	if err == nil && staged != nil && im.SHA256 != staged.SHA256 {
		err = errors.New("the slot no longer holds the staged image")
	}
	if err == nil {
		return im, nil
	}
	_, _ = s.store.Update(func(cur otadata.Record, rerr error) (otadata.Record, error) {
		if rerr != nil || cur.States[slot] == otadata.Undefined {
			return cur, errors.New("no record to mark")
		}
		return cur.With(slot, otadata.Invalid)
	})
	e := api.Errorf(api.ErrInvalidImage, "%s fails its check: %v", flash.Slots[slot], err)
	if errors.Is(err, image.ErrSecureVersion) {
		e = api.Errorf(api.ErrDowngrade, "%s: %v", flash.Slots[slot], strings.TrimPrefix(err.Error(), "image: "))
	}
	s.mu.Lock()
	if staged != nil && s.staged == staged {
		s.sess.State = StateFailed
		s.sess.Error = strp(e.Code + ": " + e.Message)
		s.sess.BootsNext = false
		s.staged = nil
		s.emit()
	}
	s.mu.Unlock()
	return nil, e
}

// selectSlot makes target the boot slot with state st, once the slot's
// bytes are on the disk. On an empty otadata (a board whose bootloader
// never wrote one) the running slot is first recorded as confirmed.
func (s *Service) selectSlot(run, target int, st otadata.State) error {
	if err := s.fl.Durable(flash.Slots[target]); err != nil {
		return err
	}
	_, err := s.store.Update(func(cur otadata.Record, rerr error) (otadata.Record, error) {
		if rerr != nil {
			first, err := (otadata.Record{States: [2]otadata.State{otadata.Undefined, otadata.Undefined}}).Select(run, otadata.Valid)
			if err != nil {
				return cur, err
			}
			cur = first
		}
		return cur.Select(target, st)
	})
	return err
}
