// Command holoctl is the command line for people working with holofleet:
// talking to boards and the gateway, packing firmware, and running the
// simulated RS485 line.
//
//	holoctl COMMAND [flags]
//	holoctl help [COMMAND]
//
// Each command lives in its own file and is listed once in commands below.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand. run gets the arguments after the command's
// name and returns flag.ErrHelp when the user asked for its help.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the dispatch table; add a line per subcommand.
var commands = []command{
	{"line-hub", "serve a simulated RS485 line on a Unix socket", runLineHub},
	{"board", "talk to one board over HTTP: info, get, call, upload, events", runBoard},
	{"link", "talk to one board over its host link: JSON lines, PING, STATUS", runLink},
	{"gw", "talk to a holo-gateway: boards, labels, calls, actions, events", runGateway},
	{"dmx", "a holo-gateway's DMX patch and the sACN/Art-Net sources it hears", runDMX},
	{"token", "manage a holo-gateway's bearer tokens (admin)", runToken},
	{"image", "firmware images: pack, inspect, keygen, sign, verify, pubkey", runImage},
	{"fw", "a holo-gateway's firmware: upload, list, release channels", runFirmware},
	{"rollout", "a holo-gateway's rollouts: dry-run, create, watch, pause, revert", runRollout},
	{"audit", "a holo-gateway's audit log: who changed what, who was refused (admin)", runAudit},
	{"cue", "a holo-gateway's cue lists: go, stop, back, jump, standby, state, list", runCue},
	{"install", "the installation as code: diff, apply, status, history, rollback, export", runInstall},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches args and returns the exit status: 0 ok, 1 the command
// failed, 2 bad usage.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			args = []string{args[1], "--help"}
		} else {
			usage(stdout)
			if len(args) == 0 {
				return 2
			}
			return 0
		}
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "holoctl %s: %v\n", c.name, err)
			return 2
		default:
			fmt.Fprintf(stderr, "holoctl %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "holoctl: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// errUsage marks errors in how a command was called (exit status 2).
var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: holoctl COMMAND [flags]   (holoctl help COMMAND for its flags)")
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
}
