// Package events is the board's event hub and its GET /events endpoint.
//
// The board reports two sorts of event. A state event says a resource
// changed and carries what that resource's GET returns now; the hub keeps no
// copy of it. A happening says something occurred (a clip started, the
// screen was touched); it is numbered, stamped with the board's uptime and
// the last few are kept so a client that reconnects can catch up.
//
// # Data objects
//
// Every event is delivered as one JSON object on one line:
//
//	state:      {"event":"<kind>","state":<resource>}
//	happening:  {"event":"<kind>","seq":<n>,"t_ms":<uptime ms>,<fields...>}
//
// A happening's object is built once, when it is emitted, and shared by every
// consumer; its fields must not reuse the names event, seq or t_ms.
//
// # Numbering
//
// seq runs 1, 2, ... 65535, 1, 2 ...; it is never 0, so after=0 means "before
// the first". Internally every happening also has a 64-bit count that never
// wraps; a seq a client sends is mapped to the most recent count that has it
// (see [Hub.Since]). A seq the board has not issued since it started, such as
// one remembered from before a restart, is taken as 0: everything since the
// start is new to that client.
//
// # Delivery
//
// [Hub.SetState] and [Hub.Emit] only touch bounded memory and never wait for a
// consumer. Each [Subscription] has a queue: happenings in order, and at most
// one pending state per kind, which keeps the place in the queue of the
// kind's first pending change but carries the latest state (changes close
// together go out as one, the latest). A kind with a throttle interval (the
// holo's position: 250 ms) is sent at once when it has been quiet for the
// interval, otherwise held and its latest state sent when the interval ends.
// A subscriber more than [DefaultQueueLimit] happenings behind is closed with
// [ErrOverflow]; an SSE client then reconnects with Last-Event-ID.
//
// # Server-Sent Events framing
//
// With Accept: text/event-stream, GET /events answers 200 and writes
//
//	retry: 3000
//	<blank line>
//
// then, for each event,
//
//	event: <kind>
//	data: <the data object on one line>
//	id: <seq>          (happenings only)
//	<blank line>
//
// flushing as soon as the pending queue is written. Every 15 s a comment
// line ": keep-alive" and a blank line are written: proxies see traffic and keep
// the connection, and a write to a client that vanished fails, which ends the
// stream and frees its slot. Each write has a deadline ([DefaultWriteTimeout],
// real time), so a client that stops reading also loses its slot.
//
// # Stream slots
//
// At most [DefaultMaxStreams] streams are open at once; one more is
// answered 503 busy. With [Options.Trusted] set (the board sets it while a
// password is set) clients it does not trust share all but
// [DefaultReserved] of the slots, so strangers cannot take every stream
// and leave the gateway, which sends the password, without one. Without the
// SSE Accept header (and always over the host link) the reply is the JSON
// [Reply] of [Hub.Since].
package events
