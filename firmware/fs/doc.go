// Package fs is the board's storage volume: the flash partition that
// holds clips, images and other files, served under /fs.
//
// On the simulated board the volume is the directory <data>/storage with
// a fixed capacity (Options.Capacity, 12 MiB by default). Space is
// counted as a flash file system would: each file takes its size rounded
// up to whole 4 KiB blocks (an empty file one block), each directory but
// the root one block. A write that would leave less than Margin (32 KiB)
// free is refused with 507 no_space, checked before it starts (from
// Content-Length) and again as bytes are written.
//
// Paths are volume paths ("/clips/intro.mov"); Clean states the rules.
// Every operation goes through an os.Root over the directory, and each
// path is walked segment by segment without following links, so nothing
// reaches outside the volume; links placed there by hand are refused
// and left out of listings.
//
// Uploads and copies write <name>.part beside the destination, sync it,
// and rename it over the destination only once every byte arrived and
// the SHA-256 (when given) matched; on any failure the .part file is
// removed, so the old file is never damaged. A power cut leaves a .part
// file at worst, and OpenVolume removes those at every start. Users may
// not name a file *.part.
//
// Hashing, uploading, downloading and copying are long operations: they
// take the board's long-operation lock and answer 409 busy while another
// runs. Before a file is moved, replaced or deleted (or a directory
// holding it), the ScreenGuard is told, so the screen stops showing it.
//
// The feature also registers GET /media and GET /media/info (package
// media) over the same volume.
package fs
