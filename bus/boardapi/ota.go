package boardapi

// App is a firmware image's application description, as GET /info's
// firmware object and the OTA resources show it.
type App struct {
	Project   string `json:"project"`
	Version   string `json:"version"`
	Date      string `json:"date"`
	Time      string `json:"time"`
	IDF       string `json:"idf"`
	ELFSHA256 string `json:"elf_sha256"`
	// SecureVersion is the image's anti-rollback secure version (0 for
	// images that do not set it); omitted when 0.
	SecureVersion uint32 `json:"secure_version,omitempty" doc:"anti-rollback secure version of the image (application description offset 4); absent when 0"`
	// SecureBoot is set for the running firmware only (GET /info).
	SecureBoot *SecureBoot `json:"secure_boot,omitempty"`
}

// SecureBoot tells how the running firmware passed the bootloader's
// signature check (GET /info's firmware.secure_boot).
type SecureBoot struct {
	Enabled bool     `json:"enabled" doc:"true when the board has trusted keys burned and checks every image it boots; false: images are not checked"`
	Signers []string `json:"signers" doc:"hex digests of the keys whose signature blocks verify over the running image"`
	Factory bool     `json:"factory" doc:"the running image is the factory firmware (the executable the board was started with), which runs without a signature"`
}

// States of an update session.
const (
	SessionIdle        = "idle"
	SessionReceiving   = "receiving"
	SessionDownloading = "downloading"
	SessionVerifying   = "verifying"
	SessionStaged      = "staged"
	SessionActive      = "active"
	SessionFailed      = "failed"
)

// Sources of an update session. The specification names none and upload;
// pull and console are this firmware's, and activate names a session made
// by POST /ota/activate with a slot (going back to the previous firmware).
const (
	SourceNone     = "none"
	SourceUpload   = "upload"
	SourcePull     = "pull"
	SourceConsole  = "console"
	SourceActivate = "activate"
)

// OTASession is the update in progress or the last one finished (GET
// /ota/image and the reply of the update endpoints).
type OTASession struct {
	State  string  `json:"state" doc:"idle, receiving, downloading, verifying, staged, active or failed"`
	Source string  `json:"source" doc:"none, upload, pull, console or activate"`
	Slot   *string `json:"slot" doc:"slot being written"`
	URL    *string `json:"url" doc:"the pulled URL"`
	Bytes  int64   `json:"bytes"`
	Total  int64   `json:"total"`
	SHA256 *string `json:"sha256" doc:"hex SHA-256 of the whole image once known"`
	App    *App    `json:"app"`
	// BootsNext is true while the session's image is the boot image.
	BootsNext bool `json:"boots_next"`
	// DryRun is always false: this firmware offers no dry runs.
	DryRun    bool    `json:"dry_run"`
	Error     *string `json:"error" doc:"why the session failed (cancelled, invalid_image: ..., sha256_mismatch, ...)"`
	ElapsedMS int64   `json:"elapsed_ms"`
}

// OTAStatus is the reply of GET /ota.
type OTAStatus struct {
	// Rollback is true when the slot that is not running holds a confirmed
	// image to go back to.
	Rollback bool       `json:"rollback"`
	Slots    []OTASlot  `json:"slots"`
	Session  OTASession `json:"session"`
	Pull     PullInfo   `json:"pull"`
	// SecureBoot is the board's trusted keys (this firmware's extension).
	SecureBoot SecureBootStatus `json:"secure_boot"`
}

// SecureBootStatus is the secure_boot object of GET /ota: whether the
// board checks image signatures, and the key digests it has burned.
type SecureBootStatus struct {
	Enabled bool `json:"enabled" doc:"true once keys are burned: only images signed by a trusted, unrevoked key are accepted, activated and booted; false: images are not checked"`
	// Keys are the burned key digests in slot order.
	Keys []TrustedKey `json:"keys" doc:"burned key digests in slot order; empty when secure boot is off"`
	// SecureVersion is the highest secure version confirmed on the board.
	SecureVersion uint32 `json:"secure_version" doc:"anti-rollback: the highest secure version of an image confirmed on this board (kept in its eFuses); images below it are refused at upload, pull, activation and boot (422 downgrade_refused), keys or not"`
}

// TrustedKey is one burned key digest.
type TrustedKey struct {
	Digest  string `json:"digest" doc:"hex SHA-256 of the public key as a signature block holds it (curve id, X, Y)"`
	Revoked bool   `json:"revoked" doc:"revoked keys are never trusted again"`
}

// Slot states in GET /ota (null when the slot holds no selected image).
const (
	SlotTrial      = "trial"
	SlotConfirmed  = "confirmed"
	SlotInvalid    = "invalid"
	SlotRolledBack = "rolled_back"
)

// OTASlot is one application slot in GET /ota.
type OTASlot struct {
	Label   string `json:"label"`
	Address int64  `json:"address"`
	Size    int64  `json:"size"`
	Running bool   `json:"running"`
	Boots   bool   `json:"boots" doc:"boots at the next restart"`
	Next    bool   `json:"next" doc:"the next update is written here"`
	// State is trial, confirmed, invalid or rolled_back; null when the
	// slot holds no selected image.
	State *string `json:"state" doc:"trial, confirmed, invalid, rolled_back, or null"`
	App   *App    `json:"app"`
	// Signers are the keys whose signature blocks verify over the slot's
	// image, trusted or not; given for the running and the staged image.
	Signers []string `json:"signers,omitempty" doc:"hex key digests whose signature blocks verify over the image (running and staged image only)"`
	// SHA256 is the SHA-256 of the whole running image (signature sector
	// included), on the running slot of a board with the ota-delta
	// extension: the base a delta for this board must name.
	SHA256 string `json:"sha256,omitempty" doc:"hex SHA-256 of the whole running image (running slot, extension ota-delta): the base a delta upload names"`
}

// PullInfo is the pull object of GET /ota.
type PullInfo struct {
	Available bool `json:"available"`
	Channels  bool `json:"channels"`
	Online    bool `json:"online"`
}

// ActivateRequest is the optional body of POST /ota/activate.
type ActivateRequest struct {
	Slot   *string `json:"slot,omitempty" doc:"a slot label; absent means the staged image"`
	Reboot *bool   `json:"reboot,omitempty" doc:"restart a second after replying (default true)"`
}

// ActivateResult is the reply of POST /ota/activate.
type ActivateResult struct {
	// Slot is the slot that boots next.
	Slot string `json:"slot"`
	App  *App   `json:"app"`
	// RestartInMS is when the board restarts, or null with reboot false.
	RestartInMS *int64     `json:"restart_in_ms"`
	Session     OTASession `json:"session"`
}

// Manifest is a release manifest, the JSON document a release channel
// publishes at <base>/<channel>.json (or any URL given to pull or check):
//
//	{"version": "1.4.0",
//	 "image_url": "https://releases.example/holo-board-1.4.0.bin",
//	 "size": 10485760,
//	 "sha256": "<64 hex digits of the whole image>",
//	 "release_url": "https://releases.example/1.4.0"}
//
// image_url may be relative to the manifest's URL. A channel that
// publishes nothing answers 404, or a manifest with an empty version.
type Manifest struct {
	Version    string `json:"version"`
	ImageURL   string `json:"image_url"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	ReleaseURL string `json:"release_url,omitempty"`
}
