package main

// Process mode: holo-board is its own second-stage bootloader.
//
// The process the user starts is the supervisor, standing for the board's
// power and ROM: it binds the HTTP listener, takes <data>/flash/power.lock,
// and then, for every boot, runs the bootloader (firmware/ota/bootloader:
// read otadata, pick and check the slot, roll back an unconfirmed trial;
// the first start installs this very executable into ota_0), extracts the
// slot's executable to <data>/flash/run/ and starts it as a child with the
// same arguments. The child is the firmware. It inherits the listener (fd
// 3) and the power lock (fd 4), learns its slot from the HOLO_BOARD_BOOT
// environment variable (as firmware would read what the bootloader left in
// RTC memory), serves, and confirms itself in otadata once HTTP is served
// and its settings are loaded.
//
// What each exit means to the supervisor:
//   - the child exits with restartCode (an API restart, an activation):
//     boot again;
//   - the child exits any other way before a stop was asked (a crash, an
//     error exit, kill -9 of the child alone): a reset; boot again, so a
//     trial that did not confirm is rolled back at once;
//   - SIGTERM or SIGINT to the supervisor: passed to the child, and the
//     supervisor exits when it does (power off).
//
// kill -9 of the supervisor is a power cut: the child has Pdeathsig set to
// SIGKILL, so it dies with its parent, and the power lock (held by both
// through the shared open file) keeps a new start waiting until it is gone.
// The listener stays bound across boots, so clients see a board that is
// slow to answer while it restarts, not a new port.
//
// --bootloader=false runs the firmware directly from the executable, with
// no slots (in-place restarts; GET /ota shows otadata as it is).
//
// Secure boot: the first start given keys (--ota-key, or keys built in
// with make build KEY=PUB) burns their digests into the board's eFuses
// (package efuse) before anything boots. From then on the bootloader boots
// a slot only when its image carries a block of a trusted key, or is this
// executable (the factory firmware, which runs as is); the firmware
// refuses uploads and pulls without one, and, once a new image has
// confirmed itself, revokes the keys it asks to revoke.

import (
	"context"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/ota"
	"github.com/holofleet/holofleet/firmware/ota/bootloader"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
	"github.com/holofleet/holofleet/firmware/ota/flash"
)

const (
	// bootEnv carries the bootloader's handoff to the child.
	bootEnv = "HOLO_BOARD_BOOT"
	// restartCode is the child's exit status for "restart me".
	restartCode = 75
	// trialFaultCode is the exit status of a child failing its trial on
	// purpose (--fault-fail-trial).
	trialFaultCode = 70
	listenFD       = 3
	lockFD         = 4
	lockWait       = 20 * time.Second
	// crashLoop: a confirmed image that exits abnormally this many times
	// in a row, each within crashWindow of its start, powers the board off.
	crashLoop   = 5
	crashWindow = 3 * time.Second
)

// handoff is what the bootloader tells the firmware it started.
type handoff struct {
	Slot       int           `json:"slot"`
	Label      string        `json:"label"`
	Trial      bool          `json:"trial"`
	RolledBack string        `json:"rolled_back,omitempty"`
	App        buildinfo.App `json:"app"`
	Pull       pullFlags     `json:"pull"`
	FailTrial  string        `json:"fail_trial,omitempty"`
	// Signers are the hex digests of the keys whose blocks verify over the
	// booted image; Factory is true when it booted as the factory
	// firmware, whose payload digest is FactoryDigest (hex).
	Signers       []string `json:"signers,omitempty"`
	Factory       bool     `json:"factory,omitempty"`
	FactoryDigest string   `json:"factory_digest,omitempty"`
	// EFuseCut is the --fault-efuse-cut hook, for the firmware's
	// revocation.
	EFuseCut string `json:"efuse_cut,omitempty"`
}

type pullFlags struct {
	Channels string `json:"channels,omitempty"`
	CA       string `json:"ca,omitempty"`
	Offline  bool   `json:"offline,omitempty"`
}

// process holds the process-mode flags and, in the child, the handoff.
type process struct {
	data       *string
	bootloader bool
	pull       pullFlags
	failTrial  string
	keyFiles   []string
	efuseCut   string
	powerCut   func()

	child   *handoff
	restart bool
}

// processFlags registers the process-mode flags on fs.
func processFlags(fs *flag.FlagSet, data *string) *process {
	p := &process{data: data}
	fs.BoolVar(&p.bootloader, "bootloader", true, "run firmware from the A/B slots under --data (false: run this executable directly)")
	fs.StringVar(&p.pull.Channels, "ota-channels", "", "https base URL of the release channels (<URL>/<channel>.json)")
	fs.StringVar(&p.pull.CA, "ota-ca", "", "PEM file of CA certificates trusted for pulls, instead of the system's")
	fs.BoolVar(&p.pull.Offline, "ota-offline", false, "simulate a station link without internet (pull and check answer 503 offline)")
	fs.StringVar(&p.failTrial, "fault-fail-trial", "", "fault hook: firmware of this version exits during its trial instead of confirming")
	fs.Func("ota-key", "PEM `file` of a public key (or a private key: its public half) to trust for OTA images; repeat for up to three. Burned into the eFuses at the first start given keys, then fixed", func(v string) error {
		if len(p.keyFiles) == efuse.MaxKeys {
			return fmt.Errorf("at most %d keys", efuse.MaxKeys)
		}
		p.keyFiles = append(p.keyFiles, v)
		return nil
	})
	fs.StringVar(&p.efuseCut, "fault-efuse-cut", "", "fault hook: pull the power at this step of an eFuse write (burn:written, burn:synced, burn:renamed, revoke:...)")
	return p
}

// keys are the digests of the --ota-key files, or of the keys built into
// this executable when none is given.
func (p *process) keys() ([]image.KeyDigest, error) {
	if len(p.keyFiles) == 0 {
		return efuse.Builtin()
	}
	var out []image.KeyDigest
	for _, f := range p.keyFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--ota-key: %w", err)
		}
		pub, err := image.ParsePublicKey(b)
		if err != nil {
			return nil, fmt.Errorf("--ota-key %s: %w", f, err)
		}
		d, err := image.DigestOf(pub)
		if err != nil {
			return nil, fmt.Errorf("--ota-key %s: %w", f, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// fuses returns the board's eFuses with the fault hook armed.
func (p *process) fuses(fl *flash.Flash, log *slog.Logger) *efuse.Fuses {
	f := efuse.Open(fl.Dir())
	cut := p.efuseCut
	if p.child != nil {
		cut = p.child.EFuseCut
	}
	if cut != "" {
		f.Cut = func(step string) {
			if step == cut {
				log.Error("fault hook: pulling the power during an eFuse write", "step", step)
				p.powerCut()
			}
		}
	}
	return f
}

// burn burns the keys at a start that is not a child's (the supervisor,
// or a board run without the bootloader), before anything boots.
func (p *process) burn(log *slog.Logger) error {
	if p.child != nil {
		return nil
	}
	keys, err := p.keys()
	if err != nil {
		return err
	}
	fl, err := flash.Open(*p.data)
	if err != nil {
		return err
	}
	st, err := p.fuses(fl, log).Burn(keys)
	switch {
	case errors.Is(err, efuse.ErrBurned):
		log.Warn("secure boot: keys are burned already; the keys given now are not", "err", err)
	case err != nil:
		return fmt.Errorf("secure boot: %w", err)
	case st.Enabled():
		log.Info("secure boot: on", "keys", len(st.Keys))
	}
	return nil
}

// start runs the supervisor when this process is not a child; it returns
// done true when the supervisor has finished (run then returns err). In a
// child it reads the handoff and returns done false.
func (p *process) start(log *slog.Logger, args []string, httpAddr string) (done bool, err error) {
	if v, ok := os.LookupEnv(bootEnv); ok {
		var h handoff
		if err := json.Unmarshal([]byte(v), &h); err != nil {
			return true, fmt.Errorf("%s: %w", bootEnv, err)
		}
		p.child = &h
		if h.RolledBack != "" {
			log.Warn("booted after a rollback", "rolled_back", h.RolledBack, "slot", h.Label)
		}
		return false, nil
	}
	if err := p.burn(log); err != nil {
		return true, err
	}
	if !p.bootloader {
		return false, nil
	}
	return true, p.supervise(log, args, httpAddr)
}

// listen returns the inherited listener in a child, a new one otherwise.
func (p *process) listen(addr string) (net.Listener, error) {
	if p.child != nil {
		f := os.NewFile(listenFD, "http-listener")
		defer f.Close()
		return net.FileListener(f)
	}
	return net.Listen("tcp", addr)
}

// onRestart is board.Config.OnRestart: in a child, exit for the
// supervisor to boot again.
func (p *process) onRestart() func() {
	if p.child == nil {
		return nil
	}
	return func() { p.restart = true }
}

// finish ends a child that asked for a restart with restartCode.
func (p *process) finish() {
	if p.restart {
		os.Exit(restartCode)
	}
}

// ready runs once the firmware serves: a trial image confirms itself
// (or, with the fault hook aimed at its version, fails its trial).
func (p *process) ready(log *slog.Logger) {
	if p.child == nil || !p.child.Trial {
		return
	}
	if p.child.FailTrial != "" && p.child.FailTrial == p.child.App.Version {
		log.Error("fault hook: failing the trial", "version", p.child.App.Version)
		os.Exit(trialFaultCode)
	}
	fl, err := flash.Open(*p.data)
	if err == nil {
		_, err = bootloader.Confirm(fl, p.child.Slot)
	}
	if err != nil {
		log.Error("confirming the image failed", "slot", p.child.Label, "err", err)
		return
	}
	log.Info("image confirmed", "slot", p.child.Label, "version", p.child.App.Version)
	// Now that it is up, the image may revoke the keys it asks to.
	factory, _ := hexDigest(p.child.FactoryDigest)
	if _, err := bootloader.ApplyRevocations(bootloader.Config{Flash: fl, Expect: ota.HostExpect(), Log: log,
		Fuses: p.fuses(fl, log), Factory: factory}, p.child.Slot); err != nil {
		log.Error("applying the image's revocations failed", "slot", p.child.Label, "err", err)
	}
}

func hexDigest(s string) ([32]byte, error) {
	var d [32]byte
	if s == "" {
		return d, nil
	}
	k, err := image.ParseKeyDigest(s)
	return [32]byte(k), err
}

// otaFeature installs the update service with what the bootloader handed
// over (or as a board running outside the slots).
func otaFeature(dataDir string) board.Feature {
	cfg := ota.Config{DataDir: dataDir, Running: -1, Expect: ota.HostExpect()}
	var h handoff
	if v, ok := os.LookupEnv(bootEnv); ok && json.Unmarshal([]byte(v), &h) == nil {
		cfg.Running = h.Slot
		cfg.Booted.Factory = h.Factory
		for _, s := range h.Signers {
			if d, err := image.ParseKeyDigest(s); err == nil {
				cfg.Booted.Signers = append(cfg.Booted.Signers, d)
			}
		}
		cfg.Factory, _ = hexDigest(h.FactoryDigest)
		cfg.Pull.BaseURL = h.Pull.Channels
		if h.Pull.Offline {
			cfg.Pull.Online = func() bool { return false }
		}
		if h.Pull.CA != "" {
			pem, err := os.ReadFile(h.Pull.CA)
			if err != nil {
				return func(*board.Boot) error { return fmt.Errorf("--ota-ca: %w", err) }
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return func(*board.Boot) error { return fmt.Errorf("--ota-ca: no certificates in %s", h.Pull.CA) }
			}
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig.RootCAs = pool
			cfg.Pull.Client = &http.Client{Transport: tr}
		}
	} else {
		cfg.Booted.Factory = true // run by hand, outside the slots
	}
	return ota.Feature(cfg)
}

// supervise is the supervisor: boot, run the child, repeat.
func (p *process) supervise(log *slog.Logger, args []string, httpAddr string) error {
	fl, err := flash.Open(*p.data)
	if err != nil {
		return err
	}
	lock, err := powerLock(fl)
	if err != nil {
		return err
	}
	defer lock.Close()
	ln, err := net.Listen("tcp", httpAddr)
	if err != nil {
		return err
	}
	lnf, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		return err
	}
	defer lnf.Close()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	// Pdeathsig fires when the thread that started the child ends: keep
	// this goroutine on one thread for the supervisor's life.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	factory, err := factoryDigest(exe)
	if err != nil {
		return err
	}
	install := func(w io.Writer) error { _, _, err := packSelf(exe, w); return err }
	fuses := p.fuses(fl, log)
	crashes := 0
	for {
		choice, err := bootloader.Choose(bootloader.Config{Flash: fl, Expect: ota.HostExpect(), Log: log,
			InstallTo: install, Fuses: fuses, Factory: factory})
		if err != nil {
			return err
		}
		path, err := bootloader.Extract(fl, choice)
		if err != nil {
			return err
		}
		d := choice.Image.Desc
		h := handoff{Slot: choice.Slot, Label: choice.Label, Trial: choice.Trial, RolledBack: choice.RolledBack,
			App:  buildinfo.App{Project: d.Project, Version: d.Version, Date: d.Date, Time: d.Time, IDF: d.IDF, ELFSHA256: d.ELFSHA256Hex(), SecureVersion: d.SecureVersion},
			Pull: p.pull, FailTrial: p.failTrial, Factory: choice.Factory,
			FactoryDigest: image.KeyDigest(factory).String(), EFuseCut: p.efuseCut}
		for _, k := range choice.Signers {
			h.Signers = append(h.Signers, k.String())
		}
		env, _ := json.Marshal(h)
		log.Info("bootloader: booting", "slot", choice.Label, "version", d.Version, "trial", choice.Trial,
			"secure_boot", choice.SecureBoot, "factory", choice.Factory, "signers", h.Signers)
		cmd := exec.Command(path, args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.ExtraFiles = []*os.File{lnf, lock}
		cmd.Env = append(os.Environ(), bootEnv+"="+string(env), buildinfo.AppEnv+"="+mustJSON(h.App))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		started := time.Now()
		if err := cmd.Start(); err != nil {
			// An executable that cannot start is a trial that fails.
			log.Error("bootloader: the image does not start", "slot", choice.Label, "err", err)
			if !choice.Trial {
				return err
			}
			continue
		}
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		stopping := false
		var werr error
	wait:
		for {
			select {
			case s := <-sigs:
				stopping = true
				_ = cmd.Process.Signal(s)
			case werr = <-waited:
				break wait
			}
		}
		code := cmd.ProcessState.ExitCode()
		switch {
		case stopping:
			return nil
		case code == restartCode:
			crashes = 0
		case code == 0:
			return nil
		default:
			log.Warn("bootloader: the firmware ended abnormally; resetting", "slot", choice.Label, "err", werr)
			if time.Since(started) < crashWindow && !choice.Trial {
				crashes++
				if crashes >= crashLoop {
					return fmt.Errorf("bootloader: %s crashed %d times in a row", choice.Label, crashes)
				}
			}
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// powerLock takes <flash>/power.lock, waiting for an earlier board on the
// same data directory (or its dying child) to let go.
func powerLock(fl *flash.Flash) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(fl.Dir(), "power.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockWait)
	defer cancel()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("%s is in use by another board", filepath.Dir(fl.Dir()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// factoryDigest is the SHA-256 of the factory image packSelf makes of
// exe: the image the bootloader boots without a signature.
func factoryDigest(exe string) ([32]byte, error) {
	_, sum, err := packSelf(exe, io.Discard)
	return sum, err
}

// packSelf packs the executable exe as the first image, described by this
// executable's build information, writing it to w as it reads exe (the
// image is as large as the executable: it is never held in memory). It
// returns the image's size and SHA-256.
func packSelf(exe string, w io.Writer) (int64, [32]byte, error) {
	f, err := os.Open(exe)
	if err != nil {
		return 0, [32]byte{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, [32]byte{}, err
	}
	app := buildinfo.Running()
	d := image.Desc{Project: app.Project, Version: app.Version, Date: app.Date, Time: app.Time, IDF: app.IDF}
	// Running hashed this very executable already (unless it read a
	// handoff from the environment); otherwise PackTo hashes exe itself.
	if sum, err := hex.DecodeString(app.ELFSHA256); err == nil && len(sum) == len(d.ELFSHA256) && hashedByRunning(exe) {
		copy(d.ELFSHA256[:], sum)
	}
	return image.PackTo(w, d, f, st.Size())
}

// hashedByRunning reports whether buildinfo.Running's ELFSHA256 is the
// SHA-256 of exe: exe is the running executable, and Running hashed it
// rather than reading a bootloader's handoff.
func hashedByRunning(exe string) bool {
	self, err := os.Executable()
	return err == nil && self == exe && os.Getenv(buildinfo.AppEnv) == ""
}
