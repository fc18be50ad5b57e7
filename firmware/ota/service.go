package ota

import (
	"context"

	"errors"

	"log/slog"

	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/longop"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/firmware/ota/otadata"
)

// Timing of the service.
const (
	// ActivateRestartDelay is how long after replying POST /ota/activate
	// (with reboot) the board restarts.
	ActivateRestartDelay = time.Second
	// UpdateRestartDelay is the "moment" after which an upload or a pull
	// carrying activate and reboot restarts the board once the image is
	// staged and activated: the shortest delay POST /restart allows, time
	// enough for the reply to leave.
	UpdateRestartDelay = 200 * time.Millisecond
	// ProgressEvery bounds how often progress is published as an event
	// while bytes arrive.
	ProgressEvery = 250 * time.Millisecond
	chunkSize     = 128 << 10
)

// Errors of the service beyond the API's.
var (
	// ErrClosed means the service's boot has ended.
	ErrClosed = errors.New("ota: service closed")
)

// StateSink receives the session on every change (the boot's event hub).
type StateSink interface {
	SetState(kind string, state any)
}

// Config is what the service needs.
type Config struct {
	// DataDir is the board's data directory; the flash is under it.
	DataDir string
	// Running is the index of the slot the board runs from, or -1 when
	// not known (the boot slot of otadata is taken then).
	Running int
	// Expect is what an image must be for this board (chip, project); its
	// MaxSize is set to the slot size.
	Expect  image.Expect
	Clock   clock.Clock
	Log     *slog.Logger
	Events  StateSink
	Long    *longop.Lock
	Restart func(delay time.Duration)
	Pull    PullConfig
	// Fleet, when set, makes the feature choose the boot slot itself at
	// every boot (fleet mode); see Fleet.
	Fleet *Fleet
	// Keys are burned into the board's eFuses by the feature when none
	// are burned yet (package efuse); nil burns nothing.
	Keys []image.KeyDigest
	// Factory is the SHA-256 of the factory image (bootloader.Config's):
	// it may be activated without a signature, as the bootloader boots it.
	Factory [32]byte
	// Booted describes how the running image passed the bootloader's
	// check (its signers; whether it ran as the factory firmware); GET
	// /info and GET /ota show it.
	Booted Booted
}

// Booted is what the bootloader found about the running image.
type Booted struct {
	Signers []image.KeyDigest
	Factory bool
	// SHA256 and Size are the whole running image's, when the bootloader
	// checked it in this process (fleet mode); otherwise the service
	// reads the running slot once to learn them (RunningSHA256).
	SHA256 [32]byte
	Size   int64
}

// HostExpect is what a simulated board accepts: host images of holo-board.
func HostExpect() image.Expect { return image.HostExpect() }

// Service is the update service of one boot.
type Service struct {
	cfg   Config
	fl    *flash.Flash
	fuses *efuse.Fuses
	store *otadata.Store
	odp   *flash.Part
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	mu       sync.Mutex
	sess     Session
	gen      uint64 // bumped by every new session and every discard
	start    time.Time
	end      time.Time // zero while a session runs
	staged   *image.Image
	signers  []image.KeyDigest // of the staged image (trusted or not)
	slot     int               // the slot of the session's image
	work     *worker           // the receiving or downloading worker, nil when none
	lastEmit time.Time
	opMu     sync.Mutex // serialises session starts and activations

	checks checkCache

	runSHAOnce sync.Once
	runSHA     string // RunningSHA256
	runSize    int64  // the running image's length, with runSHA
}

// New opens the flash under cfg.DataDir and returns an idle service.
func New(cfg Config) (*Service, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Long == nil {
		cfg.Long = &longop.Lock{}
	}
	if cfg.Restart == nil {
		cfg.Restart = func(time.Duration) {}
	}
	cfg.Expect.MaxSize = flash.SlotSize
	fl, err := flash.Open(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	odp, err := fl.Open(flash.OTAData)
	if err != nil {
		return nil, err
	}
	fl.DropStaged() // an update cut short by a power cut
	ctx, stop := context.WithCancel(context.Background())
	s := &Service{cfg: cfg, fl: fl, fuses: efuse.Open(fl.Dir()), odp: odp, store: otadata.NewStore(odp), ctx: ctx, stop: stop,
		sess: idleSession()}
	s.start = cfg.Clock.Now()
	s.end = s.start
	return s, nil
}

// Close cancels a session in progress and waits for its goroutines.
func (s *Service) Close() {
	s.stop()
	s.mu.Lock()
	if s.work != nil {
		s.work.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.odp.Close()
}

func idleSession() Session { return Session{State: StateIdle, Source: SourceNone} }

// Session returns the session now.
func (s *Service) Session() Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot()
}

func (s *Service) snapshot() Session {
	out := s.sess
	end := s.end
	if end.IsZero() {
		end = s.cfg.Clock.Now()
	}
	out.ElapsedMS = end.Sub(s.start).Milliseconds()
	if out.State == StateIdle {
		out.ElapsedMS = 0
	}
	return out
}

// emit publishes the session; call with s.mu held.
func (s *Service) emit() {
	s.lastEmit = s.cfg.Clock.Now()
	if s.cfg.Events != nil {
		s.cfg.Events.SetState("ota", s.snapshot())
	}
}

// running returns the running slot and the otadata record (zero Record
// when otadata is empty).
func (s *Service) running() (int, otadata.Record, error) {
	rec, err := s.store.Read()
	if err != nil && !errors.Is(err, otadata.ErrEmpty) {
		return 0, rec, err
	}
	run := s.cfg.Running
	if run < 0 {
		run = 0
		if err == nil {
			run = rec.Boot()
		}
	}
	if err != nil {
		rec = otadata.Record{States: [2]otadata.State{otadata.Undefined, otadata.Undefined}}
	}
	return run, rec, nil
}

// bootOf is the slot that boots next: otadata's choice, or the running
// slot when otadata is empty.
func bootOf(run int, rec otadata.Record) int {
	if rec.Seq == 0 {
		return run
	}
	return rec.Boot()
}

// Status builds GET /ota.
func (s *Service) Status() (Status, error) {
	run, rec, err := s.running()
	if err != nil {
		return Status{}, err
	}
	fuses, err := s.fuses.Read()
	if err != nil {
		return Status{}, err
	}
	s.mu.Lock()
	sess := s.snapshot()
	staged := s.staged
	stagedSigners := s.signers
	sslot := s.slot
	s.mu.Unlock()
	st := Status{Session: sess, Slots: make([]Slot, 0, otadata.Slots), Pull: s.pullInfo(), SecureBoot: secureBootOf(fuses)}
	boot := bootOf(run, rec)
	for i, label := range flash.Slots {
		e, _ := flash.Lookup(label)
		sl := Slot{Label: label, Address: e.Address, Size: e.Size, Running: i == run, Boots: i == boot, Next: i != run}
		state := rec.States[i]
		if state != otadata.Undefined {
			sl.State = strp(state.String())
		}
		switch {
		case staged != nil && sslot == i:
			sl.App = appOf(staged.Desc)
			sl.Signers = hexKeys(stagedSigners)
		case state != otadata.Undefined || i == run:
			sl.App = s.slotApp(label)
		}
		if i == run && s.cfg.Running >= 0 {
			sl.Signers = hexKeys(s.cfg.Booted.Signers)
		}
		if i == run {
			sl.SHA256 = s.RunningSHA256()
		}
		st.Slots = append(st.Slots, sl)
	}
	st.Rollback = rec.States[1-run] == otadata.Valid
	return st, nil
}

// slotApp reads the description of the image in a slot, nil when it
// holds none.
func (s *Service) slotApp(label string) *App {
	p, err := s.fl.Open(label)
	if err != nil {
		return nil
	}
	defer p.Close()
	e, _, err := image.Read(p, p.Size())
	if err != nil {
		return nil
	}
	return appOf(e.Desc)
}

func appOf(d image.Desc) *App {
	return &App{Project: d.Project, Version: d.Version, Date: d.Date, Time: d.Time, IDF: d.IDF, ELFSHA256: d.ELFSHA256Hex(), SecureVersion: d.SecureVersion}
}

// Options are the choices of an upload or pull.
type Options struct {
	// SHA256, when set, is the hex SHA-256 the whole image must have.
	SHA256 string
	// Activate activates the image once staged; Reboot then restarts.
	Activate bool
	Reboot   bool
	// Force accepts an image built for another project.
	Force bool
}

// worker is one session's worker: how to stop it and when it has stopped.
type worker struct {
	gen    uint64
	cancel func()
	done   chan struct{}
}

// begin starts a session of source into the slot that is not running:
// it takes the long-operation lock. It returns the session's generation,
// context and the slot. The slot itself, and its otadata record, change
// only when the image has passed every check (receive).
func (s *Service) begin(source string, url *string, total int64, abort func()) (w *worker, ctx context.Context, slot int, release func(), err error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	release, err = s.cfg.Long.TryAcquire("firmware " + source)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	fail := func(e error) (*worker, context.Context, int, func(), error) {
		release()
		return nil, nil, 0, nil, e
	}
	run, rec, err := s.running()
	if err != nil {
		return fail(err)
	}
	s.mu.Lock()
	if s.sess.State == StateActive {
		s.mu.Unlock()
		return fail(api.Errorf(api.ErrBusy, "an activated image waits for the restart; activate the running slot to undo it first"))
	}
	s.mu.Unlock()
	slot = 1 - run
	if bootOf(run, rec) == slot {
		return fail(api.Errorf(api.ErrBusy, "%s is selected to boot; activate the running slot to undo that first", flash.Slots[slot]))
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.sess = Session{State: StateReceiving, Source: source, Slot: strp(flash.Slots[slot]), URL: url, Total: total}
	if source == SourcePull {
		s.sess.State = StateDownloading
	}
	s.start, s.end = s.cfg.Clock.Now(), time.Time{}
	s.staged, s.signers, s.slot = nil, nil, slot
	w = &worker{gen: s.gen, done: make(chan struct{}), cancel: func() {
		cancel()
		if abort != nil {
			abort()
		}
	}}
	s.work = w
	s.emit()
	unlock := release
	return w, ctx, slot, func() { cancel(); unlock() }, nil
}
