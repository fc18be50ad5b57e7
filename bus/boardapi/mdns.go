package boardapi

// DNS-SD service a board announces on the LAN (besides the generic
// "_http._tcp"), and the keys of its TXT record. Gateways browse for
// MDNSService to find boards; the board's responder
// (firmware/network/mdns) announces it.
const (
	// MDNSService is the holofleet board service type, without the
	// ".local." domain.
	MDNSService = "_holofleet._tcp"
	// MDNSTxtID is the TXT key carrying the board's id.
	MDNSTxtID = "id"
	// MDNSTxtVersion is the TXT key carrying the firmware version.
	MDNSTxtVersion = "version"
	// MDNSTxtAPI is the TXT key carrying the API major version ("1").
	MDNSTxtAPI = "api"
)
