package rs485

import (
	"context"
	"net/http"
	"strings"

	"github.com/holofleet/holofleet/bus/frame"
	"github.com/holofleet/holofleet/bus/jsonline"
)

// groupSend is what a group send carried: a native request, or a JSON
// line (line set).
type groupSend struct {
	req  frame.Request
	line *jsonline.Request
}

// missCheck is a scene start a member took by group frame and is checked
// for: the latest happening number the board had given before the frame
// went (its status block's seq).
type missCheck struct {
	send groupSend
	seq  uint16
}

// startsScene reports whether s starts a scene: the one kind of group
// send whose effect a member's status block shows in every case (a
// scene_started happening moves its latest happening number), and the
// one a member stays wrong on until the next cue when it misses it. A
// look (LEDs, colour, backlight, holo) is not checked: a desk or a chase
// sends the next one soon, and it supersedes the missed one.
func (s groupSend) startsScene() bool {
	if s.line != nil {
		p, _, _ := strings.Cut(s.line.Path, "?")
		return s.line.Method == http.MethodPost && strings.TrimPrefix(p, jsonline.APIPrefix) == "/scenes/apply"
	}
	return s.req != nil && s.req.Type() == frame.TypeScene
}

// watchGroup runs for each member a group send reached (k: the kinds it
// changes). A newer send supersedes any check pending; a scene start is
// checked at the member's next status read (checkMissed).
func (l *Line) watchGroup(b *board, k kinds, s groupSend) {
	if k == 0 {
		return
	}
	b.missCheck = nil
	if s.startsScene() && b.haveStatus {
		b.missCheck = &missCheck{send: s, seq: b.status.Seq}
	}
}

// superseded drops the check pending on the board at addr: a command
// addressed to it changed it after the group frame.
func (l *Line) superseded(addr int, k kinds) {
	if b := l.boards[addr]; b != nil && k != 0 {
		b.missCheck = nil
	}
}

// checkMissed runs on the first status block a member gives after a
// group scene start. The board takes what reaches it in order, so that
// block already shows the frame's doing: a board that started the scene
// gave a scene_started happening, and its latest happening number moved.
// One that did not move missed the frame (lost on the line, or in the
// board's full receive buffer), and is sent the same request addressed
// to it, once: its reply (an error one too) is the board's answer.
func (l *Line) checkMissed(b *board) {
	c := b.missCheck
	if c == nil {
		return
	}
	b.missCheck = nil
	if b.status.Seq != c.seq {
		return
	}
	l.st.repaired.Add(1)
	j := &job{ctx: context.Background(), addr: frame.Address(b.addr), done: make(chan result, 1)}
	if c.send.line != nil {
		req, err := lineRequest(jsonline.Board(uint8(b.addr)), c.send.line.Method, c.send.line.Path, c.send.line.Body)
		if err != nil {
			return
		}
		j.kind, j.line = jobLine, req
	} else {
		j.kind, j.req = jobNative, c.send.req
	}
	l.log.Warn("rs485: a member missed a group scene start; sent to it addressed", "board", b.id, "addr", b.addr)
	l.queued(j)
}
