package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
	"github.com/holofleet/holofleet/bus/stream"
	"github.com/holofleet/holofleet/bus/transport"
)

const boardUsage = `holoctl board [--url URL] [--password-file FILE] [-o json] COMMAND
  info                      GET /info
  get PATH                  GET an API path (/leds, /screen, /ota ...)
  call METHOD PATH [JSON]   any API request; prints the board's reply
  upload LOCAL PATH         PUT /fs/file (raw bytes, overwrite)
  events [KINDS]            follow the event stream (SSE)
The URL is the board's base (http://IP:PORT, env HOLO_BOARD); changing
requests send the URL's host, so use the board's IP address.`

// runBoard talks to one board over HTTP.
func runBoard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("board", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, boardUsage) }
	def := os.Getenv("HOLO_BOARD")
	if def == "" {
		def = "http://127.0.0.1:80"
	}
	base := fs.String("url", def, "board base URL (env HOLO_BOARD)")
	pw := os.Getenv("HOLO_BOARD_PASSWORD")
	password := &pw
	fs.Func("password-file", "file holding the board's web password (mode 0600, one line; default: env HOLO_BOARD_PASSWORD)", func(path string) error {
		p, err := readSecretFile(path)
		if err != nil {
			return err
		}
		pw = p
		return nil
	})
	fs.Func("password", "removed: a password on the command line shows in ps and shell history; use --password-file FILE or env HOLO_BOARD_PASSWORD", func(string) error {
		return errors.New("secrets are not taken on the command line (ps and shell history show them): use --password-file FILE or env HOLO_BOARD_PASSWORD")
	})
	output := fs.String("o", "text", "output: text or json")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return fmt.Errorf("%w: a board command is needed\n%s", errUsage, boardUsage)
	}
	b := &boardClient{base: strings.TrimRight(*base, "/"), password: *password, http: &http.Client{Timeout: 60 * time.Second}}
	switch rest[0] {
	case "info":
		return b.print(ctx, stdout, *output, "GET", "/info", nil, "")
	case "get":
		if len(rest) != 2 {
			return fmt.Errorf("%w: board get PATH", errUsage)
		}
		return b.print(ctx, stdout, *output, "GET", rest[1], nil, "")
	case "call":
		if len(rest) < 3 || len(rest) > 4 {
			return fmt.Errorf("%w: board call METHOD PATH [JSON]", errUsage)
		}
		var body []byte
		if len(rest) == 4 {
			if !json.Valid([]byte(rest[3])) {
				return fmt.Errorf("%w: %q is not valid JSON", errUsage, rest[3])
			}
			body = []byte(rest[3])
		}
		return b.print(ctx, stdout, *output, strings.ToUpper(rest[1]), rest[2], body, "application/json")
	case "upload":
		if len(rest) != 3 {
			return fmt.Errorf("%w: board upload LOCAL PATH", errUsage)
		}
		data, err := os.ReadFile(rest[1])
		if err != nil {
			return err
		}
		return b.print(ctx, stdout, *output, "PUT", "/fs/file?overwrite=true&parents=true&path="+rest[2], data, "application/octet-stream")
	case "events":
		path := "/events"
		if len(rest) > 1 {
			path += "?kinds=" + rest[1]
		}
		return b.events(ctx, stdout, path)
	}
	return fmt.Errorf("%w: unknown board command %q\n%s", errUsage, rest[0], boardUsage)
}

type boardClient struct {
	base, password string
	http           *http.Client
}

// print sends a request and prints the board's reply; an error reply is
// printed and returned as an error.
func (b *boardClient) print(ctx context.Context, out io.Writer, format, method, path string, body []byte, ctype string) error {
	req, err := http.NewRequestWithContext(ctx, method, b.base+"/api/v1"+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if body != nil || method == "POST" || method == "PATCH" {
		req.Header.Set("Content-Type", ctype)
		if ctype == "" {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	if b.password != "" {
		req.Header.Set("Authorization", "Bearer "+b.password)
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if format == "json" || !json.Valid(data) {
		_, _ = out.Write(data)
	} else {
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, data, "", "  ")
		fmt.Fprintln(out, pretty.String())
	}
	if resp.StatusCode >= 400 {
		var e struct{ Error, Message string }
		_ = json.Unmarshal(data, &e)
		return fmt.Errorf("board answered %d %s: %s", resp.StatusCode, e.Error, e.Message)
	}
	return nil
}

func (b *boardClient) events(ctx context.Context, out io.Writer, path string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", b.base+"/api/v1"+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("board answered %d: %s", resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	var kind string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			fmt.Fprintf(out, "%-14s %s\n", kind, strings.TrimPrefix(line, "data: "))
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

const linkUsage = `holoctl link --port URL [--addr N] COMMAND
  send 'LINE'               send one JSON line ("GET /leds", "PATCH /leds {...}")
                            and print the reply (and any event lines)
  ping                      native PING: protocol and uptime
  status                    native STATUS: the 12-byte status block
  listen                    print event lines and frames as they come
URL: tcp+dial://HOST:PORT, a pty or serial device path, serial:///dev/X?baud=N,
or simline:///path/hub.sock. --addr is required on RS485.`

// runLink talks to one board over its host link.
func runLink(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("link", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, linkUsage) }
	port := fs.String("port", "", "the link's transport URL")
	addr := fs.Int("addr", 0, "board address 1-223 (0: none, UART only)")
	wait := fs.Duration("wait", 2*time.Second, "how long to wait for a reply")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	rest := fs.Args()
	if *port == "" || len(rest) == 0 {
		return fmt.Errorf("%w: --port and a command are needed\n%s", errUsage, linkUsage)
	}
	if *addr < 0 || *addr > int(frame.MaxBoard) {
		return fmt.Errorf("%w: --addr must be 1-%d", errUsage, frame.MaxBoard)
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	rw, err := transport.Open(octx, *port)
	cancel()
	if err != nil {
		return err
	}
	defer rw.Close()
	recv := stream.New(stream.Config{})
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = recv.Pump(pctx, rw) }()
	next := func(d time.Duration) (stream.Item, bool) {
		c, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		it, err := recv.Next(c)
		if err != nil {
			return stream.Item{}, false
		}
		return stream.Item{Kind: it.Kind, Data: append([]byte(nil), it.Data...)}, true
	}
	switch rest[0] {
	case "send":
		if len(rest) != 2 {
			return fmt.Errorf("%w: link send 'LINE'", errUsage)
		}
		req, err := jsonline.ParseRequest([]byte(rest[1]))
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if *addr != 0 && !req.Addr.IsSet() {
			req.Addr = jsonline.Board(uint8(*addr))
		}
		if req.Tag == "" {
			req.Tag = "holoctl"
		}
		if _, err := rw.Write(jsonline.AppendRequest(nil, req)); err != nil {
			return err
		}
		deadline := time.Now().Add(*wait)
		for time.Now().Before(deadline) {
			it, ok := next(time.Until(deadline))
			if !ok {
				break
			}
			if it.Kind != stream.Line {
				continue
			}
			if strings.HasPrefix(string(it.Data), "!") {
				fmt.Fprintf(stdout, "%s\n", it.Data)
				continue
			}
			rep, err := jsonline.ParseReply(it.Data)
			if err != nil || rep.Tag != req.Tag {
				continue
			}
			fmt.Fprintf(stdout, "%s\n", it.Data)
			if rep.Status >= 400 {
				return fmt.Errorf("board answered %d", rep.Status)
			}
			return nil
		}
		return fmt.Errorf("no reply within %v", *wait)
	case "ping", "status":
		if *addr == 0 {
			*addr = 1
		}
		var req frame.Request = &frame.PingRequest{}
		if rest[0] == "status" {
			req = &frame.StatusRequest{}
		}
		wire, err := frame.AppendRequest(nil, frame.Address(*addr), 1, req)
		if err != nil {
			return err
		}
		if _, err := rw.Write(wire); err != nil {
			return err
		}
		deadline := time.Now().Add(*wait)
		for time.Now().Before(deadline) {
			it, ok := next(time.Until(deadline))
			if !ok {
				break
			}
			if it.Kind != stream.Frame || len(it.Data) < 3 || frame.Type(it.Data[2]) != req.Type().Reply() {
				continue
			}
			f := frame.Frame{Addr: frame.Address(it.Data[0]), Seq: it.Data[1], Type: frame.Type(it.Data[2]), Payload: it.Data[3:]}
			h, body, err := frame.ParseReply(f)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "board %v status %v pending %d\n", f.Addr, h.Status, h.Pending)
			switch m := body.(type) {
			case *frame.PingReply:
				fmt.Fprintf(stdout, "protocol %d uptime %ds\n", m.Protocol, m.UptimeS)
			case *frame.StatusReply:
				fmt.Fprintf(stdout, "%+v\n", m.Block)
			}
			return nil
		}
		return fmt.Errorf("no reply within %v", *wait)
	case "listen":
		for {
			it, ok := next(24 * time.Hour)
			if !ok {
				return nil
			}
			if it.Kind == stream.Frame {
				fmt.Fprintf(stdout, "frame % x\n", it.Data)
			} else {
				fmt.Fprintf(stdout, "%s\n", it.Data)
			}
		}
	}
	return fmt.Errorf("%w: unknown link command %q\n%s", errUsage, rest[0], linkUsage)
}
