// Package network is the board's Wi-Fi, simulated: a radio environment
// read from a file, the station that joins one of the known networks, the
// board's own access point, and the mDNS announcement of the board while
// it is joined (through an Announcer, see firmware/network/mdns).
//
// # Radio environment
//
// What the antenna hears is the JSON file Radio describes (radio.json in
// the data directory, written with DefaultRadio on first start). The board
// polls it every RadioPoll on its clock and takes a changed file at once:
// networks appear, vanish, change strength or passphrase. A file that does
// not parse is logged and the previous environment stays.
//
// # Station
//
// At every start, and whenever it is not joined while sta_enabled is true
// and the environment or the known list changes, the station joins the
// strongest network in range that is known and whose saved passphrase is
// right. Its address is the address of the board's HTTP listener (the
// simulator's "DHCP lease"; 127.0.0.1 when the listener is on every
// interface), since that is what clients reach.
//
// Known networks are saved oldest first, at most MaxKnown; saving one more
// forgets the one saved longest ago, and saving a known SSID again (or
// joining it) makes it the newest. Passphrases are kept only in the saved
// store: no reply, event or log line carries one.
//
// # Access point
//
// The access point is off at a normal start. It comes on for APTimeout
// (timed, off_in_s counting down) at a start where no network could be
// joined and when the BOOT button is pressed; PATCH /network/ap {on:true}
// or the console turn it on to stay. {on:true} on a timed access point
// starts the countdown again. While it is on, the board also serves its
// API on the access point's own listener (APListener); requests there see
// via "ap" in /info.
//
// # Cut-off
//
// Changes that drop clients (joining a network, forgetting the joined one,
// sta_enabled false, turning the access point off, changing its name or
// passphrase while it is on) are validated, answered with the state they
// lead to, and carried out CutoffDelay later on the board's clock, so the
// client always gets its reply.
package network

import (
	"errors"
	"time"
)

// Limits and timings.
const (
	// MaxKnown is how many known networks are kept.
	MaxKnown = 16
	// APTimeout is how long a timed access point stays on.
	APTimeout = 5 * time.Minute
	// CutoffDelay is how long after its reply a cutting change happens.
	CutoffDelay = 100 * time.Millisecond
	// ScanTime is how long a scan takes (a long operation).
	ScanTime = 1 * time.Second
	// RadioPoll is how often the radio file is checked for changes.
	RadioPoll = 1 * time.Second
)

// Errors of the package. The HTTP handlers answer with api errors; these
// sentinels are for the Go callers (console, tests) and wrap those.
var (
	// ErrRadioFile means the radio file could not be read or is invalid.
	ErrRadioFile = errors.New("network: bad radio file")
	// ErrAPListen means the access point's listener could not open.
	ErrAPListen = errors.New("network: access point listener")
)
