// Package dmx is the gateway's front door for lighting desks: DMX512
// universes over the network, as sACN (ANSI E1.31, package sacn) and
// Art-Net (package artnet), patched to boards and groups and sent to the
// fleet as the same actions every other surface sends.
//
// The way in:
//
//	UDP packet -> Listener (decode; sACN preview data and non-zero start
//	codes are not for output) -> Engine.Data: the source's frame is kept,
//	the universe merged (merge.go: highest priority wins; equal
//	priorities take the highest dimmer and the latest of the rest) ->
//	latched until a sync packet when the source is in sync mode
//	(Engine.Sync), else applied at once -> every patched fixture of the
//	universe decoded by its profile (profile.go) into a Look per target.
//
// The way out (output.go): each target keeps the look it last got and at
// most one newer look not yet sent; a newer look replaces an unsent one
// (coalesced, never queued); a look equal to what the target has sends
// nothing; what changed becomes fleet actions (scene_apply, leds,
// screen_show, holo) run by Fleet.Do, which prepares each one with
// fleet.Prepare like every surface. A group fixture is one group action:
// one group frame per line. Looks released by a sync packet carry the same
// moment (the sync's arrival plus SyncLead), so the fleet fires them as
// one timed fire across lines and the LAN. The DMX traffic on an RS485
// line is held to a share of the line's time (a token bucket of line
// time, charged what each send took), so the
// gateway's polling and the boards' events go on.
//
// Loss: a source silent for 2.5 s (sACN) or 4 s (Art-Net) is dropped; a
// universe with no source left holds its last look, or releases its
// boards (scene_end) when the patch says so. A receiver that heard no sync
// packet for the same times applies data at once again.
//
// Access: DMX has no authentication. Every source has the role of
// Options.Role (the --osc-access model: none, read, show); the guard
// decides and records once per source, not per packet. Changes of the
// patch go through GET/PUT /v1/dmx/patch (Handler), viewer to read, admin
// to change, audited. docs/dmx.md is the user's guide.
package dmx
