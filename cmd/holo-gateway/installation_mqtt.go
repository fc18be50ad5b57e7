package main

import (
	"github.com/holofleet/holofleet/gateway/installation"
	"github.com/holofleet/holofleet/gateway/mqtt"
	"github.com/holofleet/holofleet/gateway/mqtt/homeassistant"
)

// installStates gives the MQTT bridge the installation's findings, board
// by board, for Home Assistant's installation sensor.
func installStates(in *installation.Installer) mqtt.InstallationStates {
	return func() map[string]homeassistant.Install {
		rev, drifts := in.Findings()
		out := make(map[string]homeassistant.Install, len(drifts))
		for id, d := range drifts {
			reason := d.Summary
			if d.Error != "" && d.Error != reason {
				reason = d.Error
			}
			out[id] = homeassistant.Install{State: d.State, Reason: reason, Profile: d.Profile, Revision: rev, Checked: d.Checked}
		}
		return out
	}
}
