package ota

import (
	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/buildinfo"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
)

// Session states (see bus/boardapi).
const (
	StateIdle        = boardapi.SessionIdle
	StateReceiving   = boardapi.SessionReceiving
	StateDownloading = boardapi.SessionDownloading
	StateVerifying   = boardapi.SessionVerifying
	StateStaged      = boardapi.SessionStaged
	StateActive      = boardapi.SessionActive
	StateFailed      = boardapi.SessionFailed
)

// Session sources (see bus/boardapi).
const (
	SourceNone     = boardapi.SourceNone
	SourceUpload   = boardapi.SourceUpload
	SourcePull     = boardapi.SourcePull
	SourceConsole  = boardapi.SourceConsole
	SourceActivate = boardapi.SourceActivate
)

// The update API's JSON shapes live in bus/boardapi, the leaf package the
// gateway reads them with; these are their names here.
type (
	// Session is the update in progress or the last one finished.
	Session = boardapi.OTASession
	// App is an image's application description.
	App = buildinfo.App
	// Status is the reply of GET /ota.
	Status = boardapi.OTAStatus
	// Slot is one application slot in GET /ota.
	Slot = boardapi.OTASlot
	// PullInfo is the pull object of GET /ota.
	PullInfo = boardapi.PullInfo
	// ActivateRequest is the optional body of POST /ota/activate.
	ActivateRequest = boardapi.ActivateRequest
	// ActivateResult is the reply of POST /ota/activate.
	ActivateResult = boardapi.ActivateResult
	// Manifest is a release channel's manifest.
	Manifest = boardapi.Manifest
	// SecureBootStatus is the secure_boot object of GET /ota.
	SecureBootStatus = boardapi.SecureBootStatus
	// TrustedKey is one burned key digest.
	TrustedKey = boardapi.TrustedKey
)

func secureBootOf(st efuse.State) SecureBootStatus {
	out := SecureBootStatus{Enabled: st.Enabled(), Keys: []TrustedKey{}, SecureVersion: st.SecureVersion}
	for i, k := range st.Keys {
		out.Keys = append(out.Keys, TrustedKey{Digest: k.String(), Revoked: st.Revoked[i]})
	}
	return out
}

func hexKeys(keys []image.KeyDigest) []string {
	if keys == nil {
		return nil
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.String()
	}
	return out
}

func strp(s string) *string { return &s }
