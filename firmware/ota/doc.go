// Package ota is the board's firmware update service: GET /ota and the
// update session (GET, PUT and DELETE /ota/image, POST /ota/activate,
// POST /ota/pull, GET /ota/check).
//
// An update is a session with the states idle, receiving (upload) or
// downloading (pull), verifying, staged, active and failed. Bytes go
// straight into the slot that is not running as they arrive; the first
// image.EarlyCheckSize bytes are checked at once, and the image's
// structure, XOR checksum and SHA-256 are checked in the same pass
// (image.Verifier), so "verifying" only completes what the stream began.
// Before the first byte is written the slot's otadata record is cleared:
// the previous image there is being overwritten and may no longer be
// booted or rolled back to. Nothing changes what the board boots until an
// activation, which checks the image again from flash and then selects
// its slot in otadata (package otadata).
//
// Every change of the session is published as an "ota" state event.
//
// Sub-packages: image (the ESP-IDF application image format), otadata (the
// A/B boot selection records), flash (partitions as files), bootloader
// (process mode's slot choice, trial and rollback).
package ota
