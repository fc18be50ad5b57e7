// Package rs485 is the gateway's master of one RS485 line: it finds the
// boards on the line, shares the half-duplex wire between commands and
// polling, fetches the boards' happenings and notices their state
// changes, restarts and disappearances, and reports all of it to a
// fleet.Sink. It implements fleet.Line.
//
// # One talker at a time
//
// A single scheduler goroutine (started by Run) owns the wire; the one
// exception is Group on an idle line, which writes its frame itself while
// holding the same wire lock, so that a scene fire costs little more than
// its wire time (BenchmarkGroupFire). Every
// exchange is one request followed by a wait for the reply that carries
// the same address and sequence number (native frames) or the same tag
// (JSON lines); anything else heard meanwhile (a late reply to an earlier
// request, another board's bytes, noise) is counted and dropped. Group and
// broadcast frames get no reply on RS485, so they end when their last byte
// has left the wire.
//
// Between exchanges the scheduler picks the next one in this order:
//
//  1. commands from callers (Call, Native, Group, GroupCall), first come
//     first served, except that group frames (Group) queued together go
//     out back to back in one write when the first of them is reached
//     (TestGroupFramesBackToBack): a lighting desk's look for several
//     group fixtures on the line waits for the wire once;
//  2. follow-ups for a board: reading GET /info and GET /link of a board
//     just found, enabling its happenings (PATCH /link/events), fetching
//     happenings it reported pending, re-reading a resource whose state
//     changed, and last, once every Options.ClockEvery after a poll, one
//     GET /time to measure its clock (see clock.go);
//  3. a PING again, with Options.PollWait, to an address whose board
//     answered a discovery PING after its wait (its reply was heard during
//     a later exchange): a busy board, or a simulated one on a loaded
//     host, is found then rather than when a sweep next comes to its
//     address, which took the whole initial sweep and then a slow sweep's
//     round;
//  4. the initial discovery sweep (a native PING to every address of
//     Options.Addresses, with the short Options.DiscoverWait);
//  5. the poll cycle: one native STATUS (every Options.PingEvery-th poll a
//     PING, for the uptime, followed at once by a STATUS so that a change
//     is still seen in that cycle) to each board known and online, in
//     address order, then one PING to a single address that is unknown or lost
//     (the slow sweep that finds boards plugged in later). A new cycle
//     starts Options.PollInterval after the previous one started.
//
// # Waits and retries
//
//	exchange            wait                      retries on timeout
//	command (Call...)   Options.ReplyWait (2 s)   Options.Retries (2)
//	poll (STATUS/PING)  Options.PollWait          1
//	native follow-up    Options.PollWait          1
//	JSON-line follow-up PollWait + a line's wire  1 (event fetch from the queue, GET /time: none)
//	discovery PING      Options.DiscoverWait      none (a late answer: once more, with PollWait)
//
// The spec lets a board take up to 2 s to answer a request, so commands
// wait that long. Polls and discovery wait much less (defaults: 100 ms
// plus the wire time of two largest frames, and 40 ms plus the wire time
// of 30 bytes, which is 42.6 ms at 115200 baud): a board that does not
// answer a PING within that is not worth holding the line for, and is
// found on a later pass. A follow-up in JSON lines waits the wire time of
// a longest line (1024 bytes) more: 89 ms at 115200 baud, 1.07 s at 9600,
// where a board's GET /info reply alone takes 600 ms (with PollWait only,
// a master at 9600 timed out, asked again over the reply and never read a
// board: TestSlowLine). A retry waits Options.Backoff, doubling each
// time. Error replies are answers and are never retried.
//
// Before a timed send (timed.go) the master's own exchanges get only the
// room left before its start: the wait is cut to end fireReady and the
// reply's wire time before it, and the exchange goes only when that still
// covers Options.Turnaround (20 ms) and the reply, so that polls and
// event fetches go on between a show's timed sends 100 ms apart
// (TestShowKeepsPolling).
//
// # Boards
//
// A board is known from its first answer. Its identity (GET /info) goes to
// Sink.Seen; its link settings (GET /link, which carries its groups) go to
// Sink.Changed with kind "link", so the fleet core learns the groups
// without a call of its own. Its happenings are enabled with push off
// (RS485 never pushes) and fetched with GET /link/events whenever a reply
// says pending > 0; they reach Sink.Happened with the board's JSON as is.
// Such a fetch hands the board's queue over even when its reply is lost,
// so it is never retried in place: until a fetch reply is believed (an
// error reply is not), the master reads the board's kept happenings after
// the last one given instead (GET /link/events?after=, or GET /events
// before the first).
// A poll whose status block differs from the last one re-reads what
// changed (GET /screen, /leds, /holo, /scenes) and reports it with
// Sink.Changed; successful changing calls through Call report the state
// their reply carries. No member answers a group frame, so the members
// are read back for it, merged per board and kind (Options.GroupQuiet,
// GroupReread): once no group frame reached the board for 200 ms, at
// most once a second, and a second after the first frame not yet read
// back at the latest while frames keep coming. A desk or a chase sending
// a group a look every few frames costs each member one re-read a
// second, not one per look (TestGroupRereadsMerged). While group frames
// keep a rhythm (a desk's looks), those re-reads and the clock samples
// start only when they end before the next frame is expected, so a look
// waits for a poll at most, not for a re-read (rhythm.go,
// TestRhythmHoldsRereads).
// A member that missed a group scene start (its first status block after
// it shows no new happening, where a scene_started would be) is sent the
// same start addressed, once (repair.go, docs/fire.md,
// TestGroupSceneMissedRepaired).
//
// A board that misses Options.MissLimit polls in a row is reported Lost and
// is then only probed by the slow sweep; when it answers again it is Seen
// again and its pending happenings are fetched. A command that got no
// reply to any of its tries counts as a missed poll too, so that a board
// that went away is reported lost while callers keep polls waiting.
//
// # Restarts and swaps
//
// A board is asked who it is again whenever it may not be the one the
// master knows: after it left a poll unanswered (a board swapped at the
// same address takes longer than a poll to come up) it is sent a PING and
// GET /info at its next answer. An uptime that went backwards, or grew by
// clearly less than the time that passed (see newBoot: this catches a
// board restarted soon after its own start), or a status block whose
// event number went backwards, means a new boot at the address. Either
// way, what the master knew of the board's boot is dropped and GET /info
// decides whose boot it is: the same id is Sink.Restarted; another id
// (believed once two reads agree, as JSON lines carry no checksum) is
// another board, told to the sink as Seen with its identity and never as
// a restart of the board that left. Then its link settings and states are
// read again, happenings are enabled again and the happenings it kept
// since its start (GET /events) are replayed.
package rs485
