package testbin

import (
	"bytes"
	"sync"
)

// Output collects what a process (or a logger) writes while the test
// reads it: a bytes.Buffer safe for one writer and readers at once. Its
// zero value is ready to use.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String is everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
