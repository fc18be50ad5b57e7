package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/holofleet/holofleet/bus/simline"
)

// runLineHub serves one simulated RS485 line on a Unix socket until
// interrupted, so the gateway, board processes and tests can share it
// (their link address is simline:///PATH).
func runLineHub(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("holoctl line-hub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "Unix socket path to serve the line on (required)")
	baud := fs.Int("baud", simline.DefaultBaud, "the line's baud rate (10 bits per byte)")
	seed := fs.Uint64("seed", 1, "seed of the fault generator, for reproducible runs")
	flip := fs.Float64("flip-rate", 0, "probability per byte of one inverted bit")
	drop := fs.Float64("drop-rate", 0, "probability per byte of losing it")
	noise := fs.Float64("noise-rate", 0, "probability per byte of a noise burst after it")
	noiseMax := fs.Int("noise-max", simline.DefaultNoiseMaxBurst, "longest noise burst in bytes")
	silent := fs.String("silent", "", "comma-separated node names whose transmitter is disconnected")
	statsEvery := fs.Duration("stats", 0, "print the line's counters this often (0: only at exit)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: holoctl line-hub --socket PATH [--baud N] [fault flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if *socket == "" || fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%w: --socket is required and no arguments are taken", errUsage)
	}
	var names []string
	for n := range strings.SplitSeq(*silent, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	line, err := simline.New(simline.Config{
		Baud:   *baud,
		Seed:   *seed,
		Silent: names,
		Faults: simline.Faults{FlipRate: *flip, DropRate: *drop, NoiseRate: *noise, NoiseMaxBurst: *noiseMax},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	defer line.Close()

	ln, err := listenUnix(ctx, *socket)
	if err != nil {
		return err
	}
	// Tests and scripts wait for this line.
	fmt.Fprintf(stdout, "line-hub listening on %s (%d baud)\n", *socket, *baud)

	statsCtx, stopStats := context.WithCancel(ctx)
	statsDone := make(chan struct{})
	go func() {
		defer close(statsDone)
		if *statsEvery <= 0 {
			return
		}
		t := time.NewTicker(*statsEvery)
		defer t.Stop()
		for {
			select {
			case <-statsCtx.Done():
				return
			case <-t.C:
				printStats(stdout, line.Stats())
			}
		}
	}()
	err = simline.ServeHub(ctx, line, ln)
	stopStats()
	<-statsDone
	printStats(stdout, line.Stats())
	return err
}

// listenUnix listens on path, first removing a socket file left by a hub
// that is gone; it refuses to take over from a hub still answering.
func listenUnix(ctx context.Context, path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		d := net.Dialer{Timeout: time.Second}
		if c, err := d.DialContext(ctx, "unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("a hub already serves %s", path)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("removing stale socket: %w", err)
		}
	}
	var lc net.ListenConfig
	return lc.Listen(ctx, "unix", path)
}

func printStats(w io.Writer, s simline.Stats) {
	fmt.Fprintf(w, "line-hub stats: nodes=%d bytes=%d frames=%d lines=%d collisions=%d flips=%d dropped=%d noise_bursts=%d noise_bytes=%d silenced=%d overruns=%d\n",
		s.Nodes, s.Bytes, s.Frames, s.Lines, s.Collisions, s.BitFlips, s.Dropped, s.NoiseBursts, s.NoiseBytes, s.Silenced, s.Overruns)
}
