package image

import "github.com/holofleet/holofleet/bus/buildinfo"

// HostExpect is what a host build of holo-board (process and fleet mode)
// requires of an image: the host chip id and the firmware's project name.
// The board's update service and the gateway's artifact store check
// images against it.
func HostExpect() Expect {
	return Expect{Chip: ChipHost, Project: buildinfo.Project}
}
