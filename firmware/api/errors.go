package api

import "github.com/holofleet/holofleet/bus/boardapi"

// Error is the board API error; it lives in bus/boardapi, the leaf package
// the firmware, bus/ and the gateway share.
type Error = boardapi.Error

// Errorf returns a copy of the sentinel base with a formatted message.
func Errorf(base *Error, format string, args ...any) *Error {
	return boardapi.Errorf(base, format, args...)
}

// Wrap turns any error into an *Error: API errors pass through, anything
// else becomes 500 internal with the error's text.
func Wrap(err error) *Error { return boardapi.Wrap(err) }

// The specification's error codes (see bus/boardapi).
var (
	ErrBadRequest     = boardapi.ErrBadRequest
	ErrBadJSON        = boardapi.ErrBadJSON
	ErrBadSHA256      = boardapi.ErrBadSHA256
	ErrBadPath        = boardapi.ErrBadPath
	ErrNotADirectory  = boardapi.ErrNotADirectory
	ErrIsADirectory   = boardapi.ErrIsADirectory
	ErrAuthRequired   = boardapi.ErrAuthRequired
	ErrForbiddenHost  = boardapi.ErrForbiddenHost
	ErrNotFound       = boardapi.ErrNotFound
	ErrNoSuchSlot     = boardapi.ErrNoSuchSlot
	ErrNoFirmware     = boardapi.ErrNoFirmware
	ErrUnknownScene   = boardapi.ErrUnknownScene
	ErrBusy           = boardapi.ErrBusy
	ErrNothingStaged  = boardapi.ErrNothingStaged
	ErrCannotDiscard  = boardapi.ErrCannotDiscard
	ErrCancelled      = boardapi.ErrCancelled
	ErrNotRunning     = boardapi.ErrNotRunning
	ErrExists         = boardapi.ErrExists
	ErrNotEmpty       = boardapi.ErrNotEmpty
	ErrFull           = boardapi.ErrFull
	ErrSlotTaken      = boardapi.ErrSlotTaken
	ErrNotReady       = boardapi.ErrNotReady
	ErrPinInUse       = boardapi.ErrPinInUse
	ErrBaseMismatch   = boardapi.ErrBaseMismatch
	ErrLengthRequired = boardapi.ErrLengthRequired
	ErrTooLarge       = boardapi.ErrTooLarge
	ErrContentType    = boardapi.ErrContentType
	ErrInvalidImage   = boardapi.ErrInvalidImage
	ErrDowngrade      = boardapi.ErrDowngrade
	ErrSHA256Mismatch = boardapi.ErrSHA256Mismatch
	ErrNotPlayable    = boardapi.ErrNotPlayable
	ErrOffline        = boardapi.ErrOffline
	ErrUnreachable    = boardapi.ErrUnreachable
	ErrStreamsBusy    = boardapi.ErrStreamsBusy
	ErrNoSpace        = boardapi.ErrNoSpace
	ErrInternal       = boardapi.ErrInternal
)
