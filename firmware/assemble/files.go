package assemble

import (
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/fs"
)

// Files installs the storage volume (/fs and /media) with the given
// capacity; 0 means fs.DefaultCapacity.
func Files(capacity int64) board.Feature {
	return fs.Feature(fs.Options{Capacity: capacity})
}
