// Command holo-board is the board firmware: one simulated board per
// process, serving the HTTP API and the host link.
//
//	holo-board --data DIR --http ADDR [--uart URL] [--console URL] [--hostname NAME] [--ota-key PUB]...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/holofleet/holofleet/firmware/assemble"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/console"
	"github.com/holofleet/holofleet/firmware/link"
	"github.com/holofleet/holofleet/firmware/longop"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/firmware/web"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "holo-board:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("holo-board", flag.ContinueOnError)
	data := fs.String("data", "holo-board-data", "the board's flash and storage directory (created on first start)")
	httpAddr := fs.String("http", ":80", "address the HTTP API listens on")
	uart := fs.String("uart", "", "host-link transport: tcp://ADDR, pty, a serial device path, or simline://HUB.sock")
	hostname := fs.String("hostname", "", "set and save the board's hostname (default holo-xxxx from its identity)")
	volumeSize := fs.Int64("volume-size", 12<<20, "capacity of the storage volume in bytes")
	apHTTP := fs.String("ap-http", "127.0.0.1:0", "address the simulated access point serves the API on while it is on")
	mdnsOn := fs.Bool("mdns", false, "announce <hostname>.local and the HTTP service over mDNS while joined")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	stall := fs.Duration("stall-timeout", longop.DefaultIdle, "cut an upload, pull or download whose client sends or takes no byte for this long")
	minRate := fs.Int64("min-rate", longop.DefaultMinRate, "cut an upload, pull or download averaging fewer bytes a second than this over --rate-window of waiting (negative: never)")
	rateWindow := fs.Duration("rate-window", longop.DefaultRateWindow, "the waiting time --min-rate is averaged over")
	consoleAddr := fs.String("console", "", "console transport: stdio, pty, tcp://ADDR or a serial device (default stdio when stdin is a terminal)")
	openOTA := fs.Bool("open-ota", false, "with --hal linux: start without trusted OTA keys, so that anyone who reaches the API may install firmware (the simulator is always open without keys, as the spec says)")
	passwordFile := fs.String("password-file", "", "set the board's password from the first line of this file at every start")
	proc := processFlags(fs, data)  // process mode: bootloader, slots, OTA (boot.go)
	hwFlags := newHardwareFlags(fs) // --hal, --hardware (hardware.go)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	lv := new(slog.LevelVar) // the console's log level changes it
	lv.Set(level)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
	proc.powerCut = func() { powerCut(proc) }
	if os.Getenv("HOLO_BOARD_INSECURE_TEST_KDF") == "1" { // boardtest.TestKDFEnv
		web.DefaultKDF = web.KDF{Memory: 64, Time: 1, Threads: 1}
		log.Warn("HOLO_BOARD_INSECURE_TEST_KDF=1: new passwords are stored with a cheap KDF; for tests only")
	}
	if err := hwFlags.check(); err != nil { // before any boot: a bad description never crash-loops
		return err
	}
	// Real hardware with no trusted key runs whatever a LAN client
	// uploads (issue 25 row 5): refused before anything is opened.
	if hwFlags.hal == halLinux && !*openOTA {
		if err := proc.requireTrust(); err != nil {
			return err
		}
	}
	var password string
	if *passwordFile != "" {
		pw, err := readPasswordFile(*passwordFile)
		if err != nil {
			return err
		}
		password = pw
	}
	if done, err := proc.start(log, args, *httpAddr); done || err != nil {
		return err
	}
	defer proc.finish()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var (
		b   *board.Board
		err error
	)
	if *stall <= 0 {
		return fmt.Errorf("--stall-timeout must be positive, not %s", *stall)
	}
	if *minRate == 0 || *rateWindow <= 0 {
		return fmt.Errorf("--min-rate must not be 0 (negative turns it off) and --rate-window must be positive")
	}
	cfg := board.Config{DataDir: *data, Hostname: *hostname, Password: password, Log: log, OnRestart: proc.onRestart(), StallTimeout: *stall,
		MinRate: *minRate, RateWindow: *rateWindow, Clock: hwFlags.clock()}
	var running atomic.Pointer[board.Board] // for the BOOT button, once open
	hw, devs, err := hwFlags.open(ctx, log, func() *board.Boot {
		if r := running.Load(); r != nil {
			return r.Current()
		}
		return nil
	})
	if err != nil {
		return err
	}
	if devs != nil {
		defer devs.Close()
		cfg.Hardware = hw
		if *uart == "" {
			*uart = devs.Link
		}
	}
	cfg.OnReady = func(addr net.Addr) {
		// Tests and tools read this line to learn the port of --http :0.
		fmt.Printf("holo-board %s listening on http://%s\n", b.Current().Web.Hostname(), addr)
		proc.ready(log)
	}
	var port *link.Port
	if *uart != "" {
		port, err = link.OpenPort(ctx, *uart)
		if err != nil {
			return fmt.Errorf("--uart: %w", err)
		}
		defer port.Close()
		// Tests and tools read this line to find a pty's path.
		fmt.Printf("holo-board link on %s\n", port.Name())
	}
	if *consoleAddr == "" && console.IsTerminal(os.Stdin) {
		*consoleAddr = console.Stdio
	}
	var conPort *console.Port
	if *consoleAddr != "" {
		if conPort, err = console.Open(ctx, *consoleAddr, os.Stdin, os.Stdout); err != nil {
			return fmt.Errorf("--console: %w", err)
		}
		defer conPort.Close()
		fmt.Printf("holo-board console on %s\n", conPort.Name()) // tests read this line
	}
	netOpts := assemble.NetworkOptions{APAddr: *apHTTP, MDNS: *mdnsOn, OnAPOpen: func(a net.Addr) {
		fmt.Printf("holo-board access point on http://%s\n", a) // tests read this line
	}}
	cfg.Features = features(options{network: netOpts, dataDir: *data, volumeSize: *volumeSize, port: port, linuxHAL: devs != nil})
	cfg.Features = append([]board.Feature{assemble.PowerCut(func() { powerCut(proc) })}, cfg.Features...)
	b, err = board.Open(cfg)
	if err != nil {
		return err
	}
	running.Store(b)
	ln, err := proc.listen(*httpAddr)
	if err != nil {
		b.DB().Close()
		return err
	}
	if conPort != nil {
		con := console.New(console.Options{Target: console.BoardTarget(b), Level: lv, Log: log.With("part", "console")})
		go func() { _ = con.Serve(ctx, conPort) }() // ends when conPort closes
	}
	if err := b.Run(ctx, ln); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("stopped")
	return nil
}

// powerCut pulls the power: no clean-up at all. In process mode the
// supervisor (the board's power) is killed and the firmware dies with it;
// either way the shell sees status 137, as after kill -9.
func powerCut(proc *process) {
	if proc.child != nil {
		_ = syscall.Kill(os.Getppid(), syscall.SIGKILL)
	}
	os.Exit(console.PowerCutCode)
}

// ErrNoTrustedKeys is the refusal of --hal linux without keys.
var ErrNoTrustedKeys = errors.New("--hal linux: no trusted OTA key: give --ota-key FILE (or build keys in with make build KEY=PUB), or pass --open-ota to let anyone on the network install firmware")

// requireTrust fails unless OTA images will be checked against a key:
// --ota-key files, keys built in, or keys burned at an earlier start.
func (p *process) requireTrust() error {
	keys, err := p.keys()
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		return nil
	}
	st, err := efuse.Open(filepath.Join(*p.data, flash.Dir)).Read()
	if err != nil {
		return fmt.Errorf("secure boot: %w", err)
	}
	if st.Enabled() {
		return nil
	}
	return ErrNoTrustedKeys
}

// readPasswordFile reads a board password: the file's first line.
func readPasswordFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("--password-file: %w", err)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("--password-file %s: the first line is empty", name)
	}
	return pw, nil
}
