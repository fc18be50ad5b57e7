package mqtt

import (
	"fmt"

	"github.com/holofleet/holofleet/gateway/auth"
)

// ParseAccept reads Options.Accept: the role whose commands the bridge
// takes ("" is admin).
func ParseAccept(s string) (auth.Role, error) {
	switch s {
	case "":
		return auth.RoleAdmin, nil
	case "none":
		return auth.RoleNone, nil
	}
	r, err := auth.ParseRole(s)
	if err != nil {
		return auth.RoleNone, fmt.Errorf("%w: accept %q (none, viewer, operator or admin)", ErrConfig, s)
	}
	return r, nil
}

// admit checks a command against Options.Accept: what its publisher,
// taken to have that role, may send.
func (b *Bridge) admit(c command) error {
	who := auth.Identity{Name: "mqtt-accept", Role: b.accept}
	return b.policy.Publish(who, "", c.topic, c.payload).Err()
}
