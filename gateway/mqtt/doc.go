// Package mqtt mirrors the gateway's fleet into MQTT and takes commands
// from it, in the manner Zigbee2MQTT users know, with Home Assistant
// device discovery.
//
// # Topics
//
// Under the base (default "holo"; <b> is a board's name, its hostname by
// default and renameable):
//
//	bridge/state              retained {"state":"online"|"offline"}; the offline one is the last will
//	bridge/info               retained: gateway version, base, HA prefix, broker, queue counters
//	bridge/boards             retained: [{id, name, online, groups, firmware, ...}]
//	bridge/groups             retained: [{id, members:[names]}]
//	bridge/event              gateway happenings: board_restarted, board_renamed, rollout, command errors
//	bridge/rollout/<id>       retained: a rollout's state, wave, progress and board phases
//	bridge/request/<verb>     requests; replies on bridge/response/<verb> as
//	                          {status:"ok"|"error", data, error, transaction}
//	<b>/availability          retained {"state":"online"|"offline"}
//	<b>/<resource>            retained JSON state: screen, leds, holo, scene, scenes, settings, ota,
//	                          network, system, link (what the board reports), info (the gateway's view)
//	<b>/update                retained firmware state for HA: installed_version, latest_version
//	                          (a rollout's version while the board is in it, else the update
//	                          channel's, default stable), in_progress, update_percentage,
//	                          release_summary (who signed that image, or "unsigned image")
//	<b>/event/<kind>          happenings, QoS 1, not retained: the board's fields plus event_type,
//	                          board (id), seq, n (the fleet stream number) and time
//	<b>/set/<resource>        commands: leds, screen (PATCH bodies), holo (a motion), scene
//	                          ({name}|{slot}|{scene}|{end:true}), settings, restart, update
//	group/<n>/set/<resource>  the same for every member of group n: leds, scene, holo, screen; a
//	                          scene by slot goes out as one group frame on each line
//
// A gateway of a cluster (Options.Cluster) keeps its bridge's own topics
// under bridge/gateway/<name>/ (state, info, boards, groups) instead, and
// mirrors only the boards its gateway owns; the gateways' bridges share
// the base on one broker (cluster.go says who answers what).
//
// Home Assistant: one device discovery message per board on
// <prefix>/device/holo_<id>/config (retained), published again when
// <prefix>/status says "online".
//
// # Delivery
//
// Retained topics are kept by the bridge (the last payload per topic) and
// all published again on every (re)connect, so a broker that lost them
// gets them back. Happenings, bridge events and responses go through a
// spool (memory, spilling to bbolt) and are published in order with QoS 1
// and up to Window in flight; a message leaves the spool only once the
// broker acknowledged it, so a broker outage loses none (a consumer may
// see one twice around a reconnect: seq and n tell).
//
// # Commands
//
// Commands are checked before anything is sent: topic names, body size
// (MaxCommand), the body (the board's form by gateway/action's decoder,
// the one the API and the fleet use; Home Assistant's JSON light form by
// homeassistant.ParseLight), rate limits per board and per command topic. A refused
// command changes nothing and gets an error response (requests) or an
// error on bridge/event (set topics).
//
// Home Assistant's light commands are turned into board requests by pure
// functions of the command and the board's state (homeassistant.LEDsPatch,
// BacklightCalls): ON turns an off strip on and wakes a sleeping panel.
// docs/mqtt.md has the table of what every command HA sends does from
// each starting state.
//
// # Access control
//
// The policy (gateway/mqtt/policy) maps every topic and payload to the gateway's
// authorisation attributes; auth.Authorize decides. The embedded broker
// asks it for each client by the token it logged in with. With an
// external broker the bridge cannot tell who published: Options.Accept is
// the role it assumes for every command, and the broker's ACLs must keep
// admin topics (set/update, rollout requests, raw calls) for admins
// (docs/mqtt-security.md ships a Mosquitto ACL file).
package mqtt

import (
	"errors"

	"github.com/holofleet/holofleet/gateway/mqtt/cmdbody"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
)

// Errors of the bridge.
var (
	// ErrBadName: a board name or topic root is not usable in topics
	// (the topic layout's sentinel).
	ErrBadName = layout.ErrBadName
	// ErrNameTaken: another board already has that name.
	ErrNameTaken = errors.New("mqtt: name taken")
	// ErrBadCommand: a command's topic, size or body is not acceptable
	// (cmdbody's sentinel: every command check wraps this one).
	ErrBadCommand = cmdbody.ErrBadCommand
	// ErrRateLimited: the board or topic sent too many commands.
	ErrRateLimited = errors.New("mqtt: rate limited")
	// ErrUnknownBoard: no board has that name or id.
	ErrUnknownBoard = errors.New("mqtt: unknown board")
	// ErrUnsupported: the gateway cannot do that (yet).
	ErrUnsupported = errors.New("mqtt: not supported")
	// ErrBusy: too many commands are waiting.
	ErrBusy = errors.New("mqtt: busy")
	// ErrConfig: the options are not usable (broker URL, TLS files).
	ErrConfig = errors.New("mqtt: bad configuration")
)
