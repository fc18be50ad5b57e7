package eventlog_test

import (
	"context"
	"fmt"

	"github.com/holofleet/holofleet/gateway/eventlog"
)

// A log numbers what it is given; a watcher that got up to N resumes
// with after = N and misses nothing the log still keeps.
func Example() {
	type event struct {
		N    uint64
		What string
	}
	l := eventlog.New(100, func(e *event, n uint64) { e.N = n })
	l.Append(event{What: "online"})
	l.Append(event{What: "happening"})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := l.Watch(ctx, 0, 16, nil) // after 0: from the first event
	l.Append(event{What: "offline"})
	for range 3 {
		e := <-w.C
		fmt.Println(e.N, e.What)
	}

	live := l.Watch(ctx, eventlog.Live, 16, nil) // only what comes next
	l.Append(event{What: "online"})
	fmt.Println((<-live.C).N)
	// Output:
	// 1 online
	// 2 happening
	// 3 offline
	// 4
}
