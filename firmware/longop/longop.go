// Package longop is the board-wide lock of long operations. A firmware
// upload or pull, a file upload, download or copy, a file's SHA-256 and a
// Wi-Fi scan run one at a time; while one runs, another is refused with
// 409 busy at once (never queued), and every other request is still
// answered because nothing else takes this lock.
package longop

import (
	"sync"

	"github.com/holofleet/holofleet/firmware/api"
)

// Lock admits one long operation at a time. The zero value is ready.
type Lock struct {
	mu     sync.Mutex
	holder string
}

// TryAcquire takes the lock for the operation named what, or returns a
// 409 busy error naming the operation that holds it. The returned release
// function is safe to call more than once.
func (l *Lock) TryAcquire(what string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holder != "" {
		return nil, api.Errorf(api.ErrBusy, "%s is running; long operations run one at a time", l.holder)
	}
	l.holder = what
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.holder = ""
			l.mu.Unlock()
		})
	}, nil
}

// Holder names the running long operation, or "" when none runs.
func (l *Lock) Holder() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holder
}
