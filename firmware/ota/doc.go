// Package ota is the board's firmware update service: GET /ota and the
// update session (GET, PUT and DELETE /ota/image, POST /ota/activate,
// POST /ota/pull, GET /ota/check).
//
// An update is a session with the states idle, receiving (upload) or
// downloading (pull), verifying, staged, active and failed. Bytes go to
// the slot that is not running as they arrive, through its staging file
// (flash.Staged); the first image.EarlyCheckSize bytes are checked at
// once, and the image's structure, XOR checksum and SHA-256 are checked in
// the same pass (image.Verifier), so "verifying" only completes what the
// stream began. With keys burned in the board's eFuses (package efuse)
// verifying also checks the signature blocks (image.Trust.Check): an image
// without a good block of a trusted, unrevoked key is refused with 422
// invalid_image saying why. Only an image that passed replaces the slot:
// its otadata record is cleared and the staging file takes the slot's
// place in one rename, so a refused or cancelled update leaves the slot,
// and any rollback to it, as it was. Nothing changes what the board boots
// until an activation, which checks the image again from flash (the
// signature too, against the keys as they are then) and then selects its
// slot in otadata (package otadata).
//
// GET /ota carries secure_boot (whether keys are burned, and which,
// revoked or not) and, for the running and the staged image, the keys
// that signed it. The feature burns Config.Keys at a board's first start
// and sets GET /info's firmware.secure_boot.
//
// Every change of the session is published as an "ota" state event.
//
// Sub-packages: image (the ESP-IDF application image format and its
// signature blocks), otadata (the A/B boot selection records), flash
// (partitions as files), bootloader (process mode's slot choice, trial,
// rollback and signature check), efuse (trusted keys and revocations).
package ota
