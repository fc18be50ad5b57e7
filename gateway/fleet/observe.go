package fleet

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// Observation is one command the core ran for a caller: a Call, one
// board's part of a Do, or one group frame of a Do. Metrics turn them
// into latency histograms.
type Observation struct {
	// Transport is the way the command went: ViaRS485, ViaLAN or
	// ViaGroup. For a Call tried on several transports it is the one that
	// answered (the first one tried when none did).
	Transport string
	// Kind is the action kind for Do (ActionLEDs, ...) and for Call the
	// method and the first path segment ("GET /link"); segments outside
	// the board API's resources read "other", so the set stays bounded.
	Kind string
	// Duration is how long the command took, transport retries included.
	Duration time.Duration
	// Err is the command's error (a board's error reply is an answer, not
	// an error).
	Err error
}

// observers holds the functions Observe added; copied on write.
type observers struct {
	mu    sync.Mutex
	fns   []func(Observation)
	fires []func(FireReport) // ObserveFire (fire.go)
}

// Observe adds fn to the functions called after every command the core
// runs for a caller (not for the calls it makes itself to identify
// boards). fn is called on the command's goroutine and must not block.
func (f *Fleet) Observe(fn func(Observation)) {
	f.obs.mu.Lock()
	defer f.obs.mu.Unlock()
	f.obs.fns = append(f.obs.fns[:len(f.obs.fns):len(f.obs.fns)], fn)
}

// observe reports one command that started at start; via "" means it
// reached no transport (unknown board, unreachable) and is not reported.
func (f *Fleet) observe(via, kind string, start time.Time, err error) {
	if via == "" {
		return
	}
	f.obs.mu.Lock()
	fns := f.obs.fns
	f.obs.mu.Unlock()
	if len(fns) == 0 {
		return
	}
	o := Observation{Transport: via, Kind: kind, Duration: f.clk.Since(start), Err: err}
	for _, fn := range fns {
		fn(o)
	}
}

// callResources are the board API's first path segments.
var callResources = map[string]bool{
	"events": true, "fs": true, "holo": true, "info": true, "leds": true, "link": true, "media": true,
	"network": true, "openapi.json": true, "ota": true, "restart": true, "scenes": true, "screen": true,
	"servos": true, "settings": true, "web": true,
}

// callKind names a Call for Observation.Kind: "GET /leds", "POST /other".
func callKind(method, path string) string {
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete:
	default:
		method = "OTHER"
	}
	seg := strings.TrimPrefix(apiPath(path), "/")
	if i := strings.IndexAny(seg, "/?"); i >= 0 {
		seg = seg[:i]
	}
	if !callResources[seg] {
		seg = "other"
	}
	return method + " /" + seg
}
