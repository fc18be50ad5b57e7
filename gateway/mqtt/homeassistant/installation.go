package homeassistant

import (
	"time"

	"github.com/holofleet/holofleet/gateway/installation/boardstate"
	"github.com/holofleet/holofleet/gateway/mqtt/layout"
)

// The installation entity: a diagnostic sensor per board saying whether
// the board holds what the installation's current revision gives it
// (gateway/installation), with the reason as an attribute.

// LevelInstallation is the board's retained topic of its installation
// state (<b>/installation).
const LevelInstallation = "installation"

// InstallationStates are the sensor's options (an HA enum sensor): the
// states gateway/installation finds of a board (package boardstate),
// unassigned for a board no assignment of the current revision selects
// (or before any revision is applied).
var InstallationStates = boardstate.All

// Install is a board's installation state as the sensor shows it.
type Install struct {
	State    string    // one of InstallationStates (boardstate)
	Reason   string    // why, in words: what drifted, why it failed ("in sync" when it is)
	Profile  string    // the profile the board takes ("" unassigned)
	Revision int       // the revision checked against (0 before any)
	Checked  time.Time // when the board was last checked (zero: never)
}

// InstallationPayload is the retained JSON of <b>/installation: state
// (the sensor's value) and the attributes reason, profile, revision and
// checked (RFC 3339, when known).
func InstallationPayload(s Install) []byte {
	m := map[string]any{"state": s.State, "reason": s.Reason, "profile": s.Profile, "revision": s.Revision}
	if !s.Checked.IsZero() {
		m["checked"] = s.Checked.UTC().Format(time.RFC3339)
	}
	return mustJSON(m)
}

// installationSensor is the sensor's component in a board's discovery
// message: its value is state, its attributes the whole payload.
func installationSensor(t layout.Topics, name, uid string) map[string]any {
	topic := t.Board(name, LevelInstallation)
	return map[string]any{"p": "sensor", "name": "Installation", "unique_id": uid + "_installation",
		"device_class": "enum", "options": InstallationStates, "state_topic": topic,
		"value_template": "{{ value_json.state }}", "json_attributes_topic": topic,
		"entity_category": "diagnostic", "icon": "mdi:clipboard-check-outline"}
}
