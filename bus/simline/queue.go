package simline

import "sync"

// rxQueue is a node's receive buffer: a fixed-size ring that the line
// fills and Read drains. The line never waits for a reader: bytes that do
// not fit are lost and counted as an overrun, as in a UART's FIFO.
type rxQueue struct {
	mu       sync.Mutex
	buf      []byte
	r, n     int
	overruns int64
	received int64
	ready    chan struct{} // holds a token while bytes are waiting
	done     chan struct{} // closed when the queue closes
	closed   bool
}

func newRxQueue(size int) *rxQueue {
	return &rxQueue{buf: make([]byte, size), ready: make(chan struct{}, 1), done: make(chan struct{})}
}

// push appends b, dropping what does not fit.
func (q *rxQueue) push(b []byte) {
	if len(b) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	for _, c := range b {
		if q.n == len(q.buf) {
			q.overruns++
			continue
		}
		q.buf[(q.r+q.n)%len(q.buf)] = c
		q.n++
		q.received++
	}
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// read copies waiting bytes into p, blocking until there are some or the
// queue closes (then it returns 0, false).
func (q *rxQueue) read(p []byte) (int, bool) {
	for {
		q.mu.Lock()
		if q.n > 0 {
			k := 0
			for k < len(p) && q.n > 0 {
				c := copy(p[k:], q.buf[q.r:min(len(q.buf), q.r+q.n)])
				k += c
				q.r = (q.r + c) % len(q.buf)
				q.n -= c
			}
			if q.n > 0 {
				select {
				case q.ready <- struct{}{}:
				default:
				}
			}
			q.mu.Unlock()
			return k, true
		}
		if q.closed {
			q.mu.Unlock()
			return 0, false
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-q.done:
		}
	}
}

func (q *rxQueue) buffered() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

func (q *rxQueue) counts() (received, overruns int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.received, q.overruns
}

func (q *rxQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.done)
	}
}
