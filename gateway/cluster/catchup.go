package cluster

// Catching up when a board changes hands: a gateway that reaches a board
// another gateway owns (a LAN board both reach) sees the board's
// happenings and restarts too, and publishes none of them. It keeps the
// last ones (since the board's last restart, at most standbyKeep); when
// it becomes the board's owner it publishes first those the stream does
// not have, so the board's story in the stream goes on in order: the
// restart the old owner did not live to publish, the happenings it had
// not sent. A happening is known by its seq, kind and data (the data
// carries the board's uptime in ms, so two boots never share one).

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/fleet"
)

const (
	// standbyKeep bounds the events kept per board this gateway does not
	// own, which are otherwise those of the last catchUpMargin: a minute
	// of a board at 34 happenings a second (the show's rate is 10).
	standbyKeep = 2048
	// catchUpMargin is how far back a takeover looks: kept events older
	// are dropped, and the stream is read from then (less catchUpSlack:
	// the gateways' clocks differ a little, and a line master that starts
	// hands over its boards' kept happenings, published up to a board's
	// kept span and a restart before; rs485.Options.ReplayKept).
	catchUpMargin = time.Minute
	catchUpSlack  = 30 * time.Second
	// catchUpTimeout bounds reading the stream at a takeover.
	catchUpTimeout = 15 * time.Second
)

// keepLocked keeps a restart or happening of a board this gateway does
// not own: those of the last catchUpMargin before it (by the events'
// times), at most standbyKeep, across restarts. Keeping the last 256
// only, a takeover of a board 10-30 s behind with its publishes found the
// old owner's backlog older than what it kept (the soak's gaps). The happenings before a restart are kept
// too: the board's owner may not have published the last of them when
// the board restarted (it was behind), and a takeover of the restarted
// board must publish them before the restart. Keeping only the new
// boot's, the soak saw the old owner's last happenings of the old boot
// land in the stream among the new owner's of the new boot (gaps and
// reorders at a LAN board's restart). Called with ev.mu held.
func (ev *events) keepLocked(e fleet.Event) {
	delete(ev.told, e.Board)
	if e.Type != fleet.EventRestarted && e.Type != fleet.EventHappening {
		return
	}
	q := append(ev.standby[e.Board], e)
	old := 0
	for old < len(q) && q[old].Time.Before(e.Time.Add(-catchUpMargin)) {
		old++
	}
	q = q[max(old, len(q)-standbyKeep):]
	ev.standby[e.Board] = q
}

// happeningKey identifies a happening across gateways.
type happeningKey struct {
	seq  uint16
	kind string
	data string
}

func keyOf(e fleet.Event) happeningKey {
	return happeningKey{seq: e.Seq, kind: e.Kind, data: string(e.Data)}
}

// streamStory is what the stream holds of one board since some time:
// its happenings (of every boot: a happening's data carries the board's
// uptime in ms, so two boots do not share one), and whether the last of
// its restarts and happenings is a restart.
type streamStory struct {
	happenings    map[happeningKey]bool
	lastRestarted bool
	// lastSeq is the seq of the last happening of the last boot (0: none).
	lastSeq uint16
	// lastID is the message id of the last happening or restart.
	lastID string
}

// missing returns the kept events the stream does not have, in order.
// Kept events may span restarts: each boot's happenings the stream lacks
// go out in their order, each restart before its boot's happenings
// unless the stream shows it already (it holds a happening of that boot
// or a later one, or, for the last restart, ends with a restart).
func missing(kept []fleet.Event, s streamStory) []fleet.Event {
	// Boots: the happenings before the first kept restart, then each
	// restart with the happenings after it.
	type boot struct {
		restart *fleet.Event
		hs      []fleet.Event
		inStory bool // the stream has one of its happenings
	}
	boots := []boot{{}}
	for _, e := range kept {
		switch e.Type {
		case fleet.EventRestarted:
			boots = append(boots, boot{restart: &e})
		case fleet.EventHappening:
			b := &boots[len(boots)-1]
			b.hs = append(b.hs, e)
			if s.happenings[keyOf(e)] {
				b.inStory = true
			}
		}
	}
	var out []fleet.Event
	for i, b := range boots {
		if b.restart != nil {
			shown := slices.ContainsFunc(boots[i:], func(b boot) bool { return b.inStory }) ||
				(i == len(boots)-1 && s.lastRestarted && len(out) == 0)
			if !shown {
				out = append(out, *b.restart)
			}
		}
		for _, e := range b.hs {
			if s.happenings[keyOf(e)] {
				continue
			}
			if i == 0 && len(out) == 0 && !b.inStory && !s.lastRestarted && s.lastSeq != 0 && !seqFollows(e.Seq, s.lastSeq) {
				// Its seq does not go on from the stream's: the board
				// restarted, and no gateway that saw it restart published
				// that (this one started after it, knowing no earlier
				// boot). Say so before its happenings. It takes the
				// number of the happening it comes before (catchUp gives
				// it its message id).
				out = append(out, fleet.Event{N: e.N, Board: e.Board, Type: fleet.EventRestarted, Time: e.Time})
			}
			out = append(out, e)
		}
	}
	return out
}

// seqFollows reports whether happening seq a comes after b within one
// boot (seqs run 1-65535, then 1 again).
func seqFollows(a, b uint16) bool {
	d := a - b
	if a < b {
		d-- // no 0 between 65535 and 1
	}
	return d != 0 && d < 1<<15
}

// catchUp returns the kept events of board id the stream does not have.
// When the stream cannot be read it returns them all but the happenings
// older than the last restart: a repeat is better than a loss.
func (ev *events) catchUp(ctx context.Context, id string, kept []fleet.Event) []fleet.Event {
	// What a gateway kept longer ago than catchUpMargin its owner had
	// time to publish (or died with long ago): the story is read from
	// then, so that it stays short.
	since := ev.c.clk.Now().Add(-catchUpMargin)
	for len(kept) > 0 && kept[0].Time.Before(since) {
		kept = kept[1:]
	}
	if len(kept) == 0 {
		return nil
	}
	var s streamStory
	var err error
	for range 3 {
		if s, err = ev.story(ctx, id, since.Add(-catchUpSlack)); err == nil {
			out := missing(kept, s)
			ev.mu.Lock()
			for _, e := range out {
				if e.Type == fleet.EventRestarted && s.lastID != "" && !slices.ContainsFunc(kept, func(k fleet.Event) bool {
					return k.Type == fleet.EventRestarted && k.N == e.N
				}) {
					// Said by missing: it comes after the stream's last.
					ev.restartIDs[e.N] = restartID(id, s.lastID)
				}
			}
			ev.mu.Unlock()
			return out
		}
	}
	ev.c.log.Warn("cluster: reading a board's events at its takeover", "board", id, "err", err)
	return kept
}

// story reads the stream's events of board id since since.
func (ev *events) story(ctx context.Context, id string, since time.Time) (streamStory, error) {
	s := streamStory{happenings: map[happeningKey]bool{}}
	st := ev.streamOf()
	if st == nil {
		return s, errors.New("no stream yet")
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpTimeout)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil {
		return s, err
	}
	last := info.State.LastSeq
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime: &since, FilterSubjects: []string{subjectEvents + ".*." + key(id)}})
	if err != nil {
		return s, err
	}
	if ci := cons.CachedInfo(); ci != nil && ci.NumPending == 0 {
		return s, nil // nothing of this board since then
	}
	it, err := cons.Messages()
	if err != nil {
		return s, err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		// Read to the end: a story cut short would have the kept
		// events published twice.
		dl, _ := ctx.Deadline()
		m, err := it.Next(jetstream.NextMaxWait(max(time.Until(dl), time.Millisecond)))
		if err != nil {
			return s, err
		}
		md, err := m.Metadata()
		if err != nil {
			return s, err
		}
		var e fleet.Event
		if json.Unmarshal(m.Data(), &e) == nil {
			switch e.Type {
			case fleet.EventRestarted:
				s.lastRestarted, s.lastSeq = true, 0
				s.lastID = m.Headers().Get(jetstream.MsgIDHeader)
			case fleet.EventHappening:
				s.happenings[keyOf(e)] = true
				s.lastRestarted = false
				s.lastSeq = e.Seq
				s.lastID = m.Headers().Get(jetstream.MsgIDHeader)
			}
		}
		if md.Sequence.Stream >= last || md.NumPending == 0 {
			return s, nil
		}
	}
}
