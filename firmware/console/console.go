package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/board"
)

// Prompt is written before each command is read.
const Prompt = "holo> "

// Status lines, the last line of every command's output.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// The console's own error codes; errors of the API keep the API's codes.
var (
	// ErrUnknownCommand answers a line whose first word is no command.
	ErrUnknownCommand = &api.Error{Status: http.StatusNotFound, Code: "unknown_command", Message: "no such command"}
	// ErrBadArguments answers arguments that do not fit the command.
	ErrBadArguments = &api.Error{Status: http.StatusBadRequest, Code: "bad_arguments", Message: "bad arguments"}
	// ErrNotAvailable answers a command whose endpoint this firmware does
	// not have (a feature not built in, or not on this hardware).
	ErrNotAvailable = &api.Error{Status: http.StatusNotImplemented, Code: "not_available", Message: "not available on this firmware"}
	// ErrNoRollback answers ota rollback when no confirmed image waits in
	// the other slot.
	ErrNoRollback = &api.Error{Status: http.StatusConflict, Code: "no_rollback", Message: "no confirmed image to roll back to"}
	// ErrRestarting answers a command typed while the board restarts in
	// place.
	ErrRestarting = &api.Error{Status: http.StatusServiceUnavailable, Code: "restarting", Message: "the board is restarting"}
)

// Target is one boot as the console drives it.
type Target struct {
	// Lookup finds the API route for a method and path.
	Lookup func(method, path string) (api.Route, bool)
	// Touch is the boot's touch reporting; nil when not installed.
	Touch *Touch
}

// BoardTarget returns the Target of b's running boot, false while it
// restarts.
func BoardTarget(b *board.Board) func() (Target, bool) {
	return func() (Target, bool) {
		boot := b.Current()
		if boot == nil {
			return Target{}, false
		}
		return Target{Lookup: boot.HTTP.Lookup, Touch: TouchOf(boot)}, true
	}
}

// Options build a Console.
type Options struct {
	// Target returns the running boot (false while the board restarts);
	// every command runs against the boot running when it is typed.
	Target func() (Target, bool)
	// Level is the log level log level changes; nil leaves the command
	// unavailable.
	Level *slog.LevelVar
	// Client fetches the image of ota update URL (a client with a
	// 5-minute timeout when nil).
	Client *http.Client
	// RestartWait bounds how long a command waits for a board that is
	// (re)starting, as an HTTP request does (board.RestartWait when 0).
	RestartWait time.Duration
	Log         *slog.Logger
}

// Console runs command lines against the board. One Console may serve
// one Port at a time; Exec may be called from tests directly.
type Console struct {
	o    Options
	mu   sync.Mutex
	json bool
}

// New returns a console.
func New(o Options) *Console {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.RestartWait == 0 {
		o.RestartWait = board.RestartWait
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 5 * time.Minute}
	}
	return &Console{o: o}
}

// Serve reads command lines from p and answers them until ctx ends, p is
// closed, or a stdio console's input ends. The owner stops it by
// cancelling ctx and closing p.
func (c *Console) Serve(ctx context.Context, p *Port) error {
	br := bufio.NewReaderSize(p.r, 4096)
	out := &lineWriter{w: p.w, nl: p.nl}
	// The first prompt waits for the board to be up (or a short while).
	for wait := 0; wait < 500; wait++ {
		if _, ok := c.o.Target(); ok || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	out.WriteString(Prompt)
	out.flush()
	lr := lineReader{br: br}
	for {
		line, tooLong, err := lr.next()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if p.isClosed() || (p.stdio && errors.Is(err, io.EOF)) {
				return nil
			}
			// A host that went away: the wire stays; read again shortly.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if p.echo {
			out.WriteString(line + "\n")
		}
		if tooLong {
			writeStatus(out, fmt.Errorf("%w: at most %d bytes", ErrTooLong, MaxLine))
		} else {
			c.Exec(ctx, line, out)
		}
		out.WriteString(Prompt)
		if err := out.flush(); err != nil && p.isClosed() {
			return nil
		}
	}
}

// Exec runs one command line and writes its output and status line to w;
// a blank line or comment writes nothing.
func (c *Console) Exec(ctx context.Context, line string, w io.Writer) {
	l, err := Parse(line)
	if err != nil {
		writeStatus(w, err)
		return
	}
	if len(l.Words) == 0 {
		return
	}
	c.mu.Lock()
	asJSON := l.JSON || c.json
	c.mu.Unlock()
	res, err := c.run(ctx, l.Words, asJSON)
	if err != nil {
		writeStatus(w, err)
		return
	}
	if l.Words[0] == "json" {
		c.mu.Lock()
		asJSON = l.JSON || c.json // json on answers in the mode it turns on
		c.mu.Unlock()
	}
	switch {
	case asJSON:
		js := res.json
		if js == nil {
			js = []byte("{}")
		}
		fmt.Fprintf(w, "%s\n", bytes.TrimSpace(js))
	case res.text != "":
		io.WriteString(w, strings.TrimRight(res.text, "\n")+"\n")
	}
	io.WriteString(w, StatusOK+"\n")
}

// writeStatus writes the error status line: error <code>: <message>.
func writeStatus(w io.Writer, err error) {
	e := codeOf(err)
	msg := strings.ReplaceAll(e.Message, "\n", " ")
	fmt.Fprintf(w, "%s %s: %s\n", StatusError, e.Code, msg)
}

// codeOf maps an error to its API error; parser errors are bad_arguments.
func codeOf(err error) *api.Error {
	var e *api.Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, ErrTooLong) || errors.Is(err, ErrQuote) || errors.Is(err, ErrControl) {
		return &api.Error{Status: http.StatusBadRequest, Code: ErrBadArguments.Code, Message: err.Error()}
	}
	return api.Wrap(err)
}

// result is a command's output: json for --json, text for people.
type result struct {
	json []byte
	text string
}

// run finds the command and runs it.
func (c *Console) run(ctx context.Context, words []string, asJSON bool) (result, error) {
	cmd, ok := lookupCommand(words[0])
	if !ok {
		return result{}, api.Errorf(ErrUnknownCommand, "unknown command %q; help lists the commands", words[0])
	}
	s := &call{c: c, ctx: ctx, asJSON: asJSON}
	res, err := cmd.run(s, words[1:])
	var e *api.Error
	if errors.As(err, &e) && e.Code == ErrBadArguments.Code {
		return res, api.Errorf(ErrBadArguments, "%s (usage: %s)", e.Message, strings.Join(cmd.usage, " | "))
	}
	return res, err
}

// lineReader splits input into lines at LF, CR or CRLF.
type lineReader struct {
	br     *bufio.Reader
	lastCR bool
}

// next returns the next line; tooLong is true (and the line cut) when
// it was over MaxLine bytes.
func (lr *lineReader) next() (string, bool, error) {
	var b []byte
	tooLong := false
	for {
		ch, err := lr.br.ReadByte()
		if err != nil {
			if len(b) > 0 || tooLong {
				return string(b), tooLong, nil
			}
			return "", false, err
		}
		wasCR := lr.lastCR
		lr.lastCR = ch == '\r'
		switch ch {
		case '\n':
			if wasCR && len(b) == 0 && !tooLong {
				continue // the LF of a CRLF
			}
			return string(b), tooLong, nil
		case '\r':
			return string(b), tooLong, nil
		}
		if len(b) < MaxLine+1 {
			b = append(b, ch)
		} else {
			tooLong = true
		}
	}
}

// lineWriter collects output and writes it with the port's line ending.
type lineWriter struct {
	w   io.Writer
	nl  string
	buf bytes.Buffer
}

func (lw *lineWriter) Write(p []byte) (int, error) { return lw.buf.Write(p) }

func (lw *lineWriter) WriteString(s string) { lw.buf.WriteString(s) }

func (lw *lineWriter) flush() error {
	b := lw.buf.Bytes()
	if lw.nl != "\n" {
		b = bytes.ReplaceAll(b, []byte("\n"), []byte(lw.nl))
	}
	lw.buf.Reset()
	_, err := lw.w.Write(b)
	return err
}

// call is one command being run.
type call struct {
	c      *Console
	ctx    context.Context
	asJSON bool
}

type viaKey struct{}

// Via reports whether an API request came from the console.
func Via(r *http.Request) bool {
	v, _ := r.Context().Value(viaKey{}).(bool)
	return v
}

// WithConsole marks ctx as the console's.
func WithConsole(ctx context.Context) context.Context {
	return context.WithValue(ctx, viaKey{}, true)
}

// do runs an API request through the route's own handler, as the host
// link does, so effects and events are those of the HTTP API. body is
// marshalled (nil: none), or sent as is when it is a bodyReader. It
// returns the reply body, or the API error.
func (s *call) do(method, path string, body any) ([]byte, error) {
	return s.doCtx(s.ctx, method, path, body)
}

// bodyReader is a raw request body of known length.
type bodyReader struct {
	r      io.Reader
	length int64
}

// target returns the running boot, waiting up to Options.RestartWait for
// one.
func (s *call) target() (Target, error) {
	deadline := time.Now().Add(s.c.o.RestartWait)
	for {
		if t, ok := s.c.o.Target(); ok {
			return t, nil
		}
		if time.Now().After(deadline) {
			return Target{}, ErrRestarting
		}
		select {
		case <-s.ctx.Done():
			return Target{}, ErrRestarting
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (s *call) doCtx(ctx context.Context, method, path string, body any) ([]byte, error) {
	t, err := s.target()
	if err != nil {
		return nil, err
	}
	p := path
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	route, ok := t.Lookup(method, p)
	if !ok {
		return nil, api.Errorf(ErrNotAvailable, "%s %s is not available on this firmware", method, p)
	}
	var rd io.Reader
	length := int64(0)
	switch b := body.(type) {
	case nil:
	case bodyReader:
		rd, length = b.r, b.length
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd, length = bytes.NewReader(raw), int64(len(raw))
	}
	if rd == nil {
		rd = http.NoBody
	}
	r, err := http.NewRequestWithContext(WithConsole(ctx), method, "/api/v1"+path, rd)
	if err != nil {
		return nil, api.Errorf(ErrBadArguments, "bad path: %v", err)
	}
	r.ContentLength = length
	if _, raw := body.(bodyReader); raw {
		r.Header.Set("Content-Type", "application/octet-stream")
	} else if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	status, reply := api.Invoke(route.Handler, r)
	if status >= 400 {
		var e api.Error
		if json.Unmarshal(reply, &e) != nil || e.Code == "" {
			e = api.Error{Code: "internal", Message: strings.TrimSpace(string(reply))}
		}
		e.Status = status
		return nil, &e
	}
	return bytes.TrimSpace(reply), nil
}
