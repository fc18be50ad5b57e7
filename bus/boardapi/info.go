package boardapi

import "slices"

// Feature names GET /info's features may hold: the specification's API
// areas, and nothing else.
const (
	FeatureOTA      = "ota"
	FeatureFiles    = "files"
	FeatureScreen   = "screen"
	FeatureLEDs     = "leds"
	FeatureHolo     = "holo"
	FeatureScenes   = "scenes"
	FeatureSettings = "settings"
	FeatureNetwork  = "network"
	FeatureEvents   = "events"
	FeatureLink     = "link"
)

// Features lists the specification's feature names.
var Features = []string{FeatureOTA, FeatureFiles, FeatureScreen, FeatureLEDs, FeatureHolo,
	FeatureScenes, FeatureSettings, FeatureNetwork, FeatureEvents, FeatureLink}

// IsFeature reports whether name is one of the specification's feature
// names.
func IsFeature(name string) bool { return slices.Contains(Features, name) }

// Extensions of the board API a holofleet board advertises in GET /info's
// extensions (a field of its own, so features keeps to the specification's
// values; docs/spec-decisions.md, "GET /info extensions"). A client that
// does not know a name ignores it.
const (
	// ExtensionFire: the changing endpoints take fire_at and at_ms
	// (scheduled apply, docs/fire.md).
	ExtensionFire = "fire"
	// ExtensionTime: GET /time, the board's clock for synchronised fire.
	ExtensionTime = "time"
	// ExtensionLinkI2C: the host link can run as an I2C target.
	ExtensionLinkI2C = "link-i2c"
	// ExtensionOTADelta: PUT /ota/image takes a delta image (package
	// bus/imagedelta) with base, the SHA-256 of the running image it
	// applies to; GET /ota's running slot carries that SHA-256.
	ExtensionOTADelta = "ota-delta"
	// ExtensionClipSync: PUT /time takes the gateway's alignment of the
	// board's clock, and a clip plays on the aligned clock, so clips
	// started together on many boards stay on the same frame
	// (docs/spec-decisions.md, "Clips that stay together").
	ExtensionClipSync = "clip-sync"
)

// HasExtension reports whether a board whose GET /info carried features
// and extensions offers the extension name. Boards before the extensions
// field listed their extensions in features, so both are read.
func HasExtension(features, extensions []string, name string) bool {
	return slices.Contains(extensions, name) || slices.Contains(features, name)
}
