// Package media decides what the board's screen can show and decodes it.
//
// Three kinds of file are playable, recognised by their first bytes (never
// by their name):
//
//   - clip: Motion-JPEG video in a QuickTime (MOV) container, at most
//     240x240. Every video sample is a complete JPEG picture, so a frame is
//     decoded by reading one sample from the file at its offset. The
//     sample descriptions accepted are "jpeg" (what ffmpeg writes) and
//     "mjpa" (Motion-JPEG format A: ordinary JPEG with an extra APP1
//     marker); "mjpb" (format B, markers stripped) and every other codec
//     are refused. Samples must be baseline or extended-sequential JPEG
//     (SOF0/SOF1); chroma sampling 4:4:4, 4:2:2, 4:2:0 and 4:4:0 and
//     greyscale decode.
//   - image: PNG, baseline JPEG (progressive JPEG, SOF2, is refused), or a
//     GIF with one frame, at most 240x240 (larger images are refused, not
//     scaled).
//   - animation: a GIF with more than one frame; it plays like a clip with
//     the frame delays the file gives (a delay under 20 ms counts as
//     100 ms, as browsers do).
//
// # MOV layout read by the parser
//
// A MOV file is a sequence of atoms: a 32-bit big-endian size (covering
// the header), a four-character type, then the payload; a size of 1 means
// a 64-bit size follows the type, 0 means "to the end of the file". The
// parser reads the top level for "moov" (before or after "mdat", both are
// common) and walks
//
//	moov/trak/mdia/{mdhd,hdlr,minf/stbl/{stsd,stts,stsc,stsz,stco|co64}}
//
// taking the first track whose handler is "vide"; sound and other tracks
// are ignored, as are edit lists. mdhd gives the time scale; stts the
// duration of every sample (the frame rate is samples x timescale /
// total duration, so 30000/1001 gives 29.97); stsz the sample sizes;
// stco/co64 the chunk offsets and stsc how many samples each chunk holds,
// from which every sample's offset in the file is computed.
//
// Nothing in a file is trusted: every atom must lie inside its parent and
// the file, every table's entry count must fit its atom, every sample must
// lie inside the file, and fixed caps (MaxMoov, MaxFrames, MaxSample,
// MaxAnimationPixels) bound what a lying file can make the board allocate.
// A file that breaks a rule is refused with an error wrapping
// ErrNotPlayable whose text says why.
package media
