// Package spool is the MQTT bridge's outbound queue: a first-in first-out
// list of messages bounded in memory that spills to a bbolt bucket when
// the memory part is full, so that what the gateway must publish survives
// a long broker outage (and a gateway restart) in order.
//
// Layout: messages are numbered as they are pushed. The oldest sit in
// memory (head, at most Mem of them); once head is full, newer ones go to
// a small write buffer (tail) that is written to the bucket in chunks of
// Chunk messages, one transaction per chunk, under keys that are the
// message numbers as 16 hex digits (so byte order is push order). Pop
// takes from head, refills head from the bucket, then from tail: the
// order out is always the order in. At most Disk messages are kept in the
// bucket; a push beyond that is dropped and counted.
package spool

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/holofleet/holofleet/gateway/defaults"
	"github.com/holofleet/holofleet/store"
)

// Defaults of Options.
const (
	DefaultMem   = 4096
	DefaultDisk  = 1 << 20
	DefaultChunk = 256
	// Bucket is the bbolt bucket the spill lives in.
	Bucket = "mqtt_spool"
)

// Errors of the spool.
var (
	// ErrFull: the queue holds as many messages as it may; the message
	// was dropped.
	ErrFull = errors.New("spool: full")
)

// Message is one MQTT publication waiting to go out.
type Message struct {
	Topic   string    `json:"t"`
	Payload []byte    `json:"p"`
	QoS     byte      `json:"q,omitempty"`
	Retain  bool      `json:"r,omitempty"`
	At      time.Time `json:"at"` // when it was queued (for latency)
}

// Options configure a Queue.
type Options struct {
	// DB holds the spill; nil keeps everything in memory (then Mem+Chunk
	// messages at most).
	DB *store.DB
	// Mem bounds the messages kept in memory (default DefaultMem).
	Mem int
	// Disk bounds the messages kept in the bucket (default DefaultDisk;
	// negative: none, the queue never spills and holds at most Mem).
	Disk int
	// Chunk is how many messages one bucket write carries (default
	// DefaultChunk).
	Chunk int
}

// Split gives the Mem and Disk of a queue that holds at most max messages
// in all: up to DefaultMem in memory, the rest in the bucket. A max of 0
// or less gives the defaults (0, 0).
func Split(max int) (mem, disk int) {
	switch {
	case max <= 0:
		return 0, 0
	case max <= DefaultMem:
		return max, -1
	default:
		return DefaultMem, max - DefaultMem
	}
}

// Stats are the queue's counters.
type Stats struct {
	Queued  uint64 // messages pushed and kept
	Popped  uint64 // messages taken out
	Dropped uint64 // messages refused because the queue was full
	Spilled uint64 // messages written to the bucket
	Errors  uint64 // bucket writes or reads that failed
	Len     int    // messages waiting now
	OnDisk  int    // of which in the bucket
}

// Queue is the spool. Its methods are safe for concurrent use.
type Queue struct {
	o      Options
	bucket *store.Bucket

	mu         sync.Mutex
	head, tail []Message
	// Bucket keys diskFirst..diskNext-1 hold messages; next numbers the
	// next chunk's first message.
	diskFirst, diskNext uint64
	st                  Stats
	ready               chan struct{}
}

// Open makes a queue; with a DB it first takes back what a previous run
// left in the bucket (those go out first).
func Open(o Options) (*Queue, error) {
	o.Mem = defaults.Positive(o.Mem, DefaultMem)
	if o.Disk >= 0 {
		o.Disk = defaults.Positive(o.Disk, DefaultDisk)
	}
	o.Chunk = defaults.Positive(o.Chunk, DefaultChunk)
	q := &Queue{o: o, ready: make(chan struct{}, 1)}
	if o.DB == nil {
		return q, nil
	}
	q.bucket = o.DB.Bucket(Bucket)
	keys, err := q.bucket.Keys()
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	if len(keys) > 0 {
		first, err1 := strconv.ParseUint(keys[0], 16, 64)
		last, err2 := strconv.ParseUint(keys[len(keys)-1], 16, 64)
		if err1 != nil || err2 != nil || last-first+1 != uint64(len(keys)) {
			// Not ours or torn: start over rather than replay garbage.
			if err := q.bucket.Clear(); err != nil {
				return nil, fmt.Errorf("spool: %w", err)
			}
		} else {
			q.diskFirst, q.diskNext = first, last+1
			q.signal()
		}
	}
	return q, nil
}

// diskBase numbers the first message spilled into an empty bucket, so
// that a flush at shutdown can put older messages before it.
const diskBase = 1 << 40

func key(n uint64) string { return fmt.Sprintf("%016x", n) }

func (q *Queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Ready is signalled (without blocking, coalesced) when a push makes the
// queue non-empty.
func (q *Queue) Ready() <-chan struct{} { return q.ready }

// Push appends m; it fails with ErrFull (and counts a drop) when every
// bound is reached, or when the bucket write fails.
func (q *Queue) Push(m Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	onDisk := int(q.diskNext - q.diskFirst)
	switch {
	case onDisk == 0 && len(q.tail) == 0 && len(q.head) < q.o.Mem:
		q.head = append(q.head, m)
	case q.bucket == nil, onDisk+len(q.tail) >= q.o.Disk, len(q.tail) >= 4*q.o.Chunk:
		// No spill, the spill is full, or the bucket keeps failing.
		q.st.Dropped++
		return ErrFull
	default:
		q.tail = append(q.tail, m)
		if len(q.tail) >= q.o.Chunk {
			q.spillLocked()
		}
	}
	q.st.Queued++
	q.signal()
	return nil
}

// spillLocked writes tail to the bucket as one chunk.
func (q *Queue) spillLocked() {
	if q.diskNext == q.diskFirst {
		q.diskFirst, q.diskNext = diskBase, diskBase
	}
	puts := make(map[string]any, len(q.tail))
	for i, m := range q.tail {
		puts[key(q.diskNext+uint64(i))] = m
	}
	if err := q.bucket.Batch(puts); err != nil {
		q.st.Errors++
		return // tail stays in memory; the next push tries again
	}
	q.diskNext += uint64(len(q.tail))
	q.st.Spilled += uint64(len(q.tail))
	q.tail = q.tail[:0]
}

// Pop takes up to max messages from the front, in order (nil when empty).
func (q *Queue) Pop(max int) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.head) == 0 {
		q.refillLocked()
	}
	n := min(max, len(q.head))
	if n == 0 {
		return nil
	}
	out := make([]Message, n)
	copy(out, q.head)
	clear(q.head[:n])
	q.head = q.head[n:]
	if len(q.head) == 0 {
		q.head = nil
	}
	q.st.Popped += uint64(n)
	return out
}

// refillLocked moves the oldest spilled messages (or else the tail) to
// head.
func (q *Queue) refillLocked() {
	if q.diskNext > q.diskFirst {
		n := min(q.diskNext-q.diskFirst, uint64(q.o.Mem))
		dels := make(map[string]any, n)
		for i := range n {
			k := key(q.diskFirst + i)
			var m Message
			if ok, err := q.bucket.Get(k, &m); err != nil || !ok {
				q.st.Errors++
			} else {
				q.head = append(q.head, m)
			}
			dels[k] = nil
		}
		if err := q.bucket.Batch(dels); err != nil {
			q.st.Errors++
		}
		q.diskFirst += n
		if q.diskFirst == q.diskNext {
			q.diskFirst, q.diskNext = diskBase, diskBase
		}
		return
	}
	q.head = append(q.head, q.tail...)
	clear(q.tail)
	q.tail = q.tail[:0]
}

// Len is the number of messages waiting.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.head) + len(q.tail) + int(q.diskNext-q.diskFirst)
}

// Stats returns the counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.st
	s.OnDisk = int(q.diskNext - q.diskFirst)
	s.Len = len(q.head) + len(q.tail) + s.OnDisk
	return s
}

// Flush writes what waits in memory to the bucket (at shutdown), so the
// next Open publishes it. Without a DB it does nothing.
func (q *Queue) Flush() error {
	if q.bucket == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	all := append(append([]Message(nil), q.head...), q.tail...)
	if len(all) == 0 {
		return nil
	}
	// Memory messages are older than the bucket's: renumber so they sort
	// first.
	first := q.diskFirst - uint64(len(q.head))
	if q.diskNext == q.diskFirst {
		first = diskBase
	}
	puts := make(map[string]any, len(all))
	if q.diskNext == q.diskFirst {
		for i, m := range all {
			puts[key(first+uint64(i))] = m
		}
		if err := q.bucket.Batch(puts); err != nil {
			return fmt.Errorf("spool: flush: %w", err)
		}
		q.diskFirst, q.diskNext = first, first+uint64(len(all))
	} else {
		if q.diskFirst < uint64(len(q.head)) {
			return fmt.Errorf("spool: flush: no room before the spilled messages")
		}
		for i, m := range q.head {
			puts[key(first+uint64(i))] = m
		}
		for i, m := range q.tail {
			puts[key(q.diskNext+uint64(i))] = m
		}
		if err := q.bucket.Batch(puts); err != nil {
			return fmt.Errorf("spool: flush: %w", err)
		}
		q.diskFirst = first
		q.diskNext += uint64(len(q.tail))
	}
	q.head, q.tail = nil, nil
	return nil
}
