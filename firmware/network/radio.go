package network

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"
)

// Security kinds of a visible network, as the radio file and the replies
// spell them.
const (
	SecurityOpen = "open"
	SecurityWPA2 = "wpa2"
	SecurityWPA3 = "wpa3"
)

// Radio is the simulated radio environment: what the board's antenna
// would hear. It is the JSON document of the radio file:
//
//	{
//	  "provision": ["holofleet-lab"],
//	  "networks": [
//	    {"ssid": "holofleet-lab", "security": "wpa2", "passphrase": "...",
//	     "rssi": -48, "channel": 6, "internet": true}
//	  ]
//	}
//
// provision names the networks a board knows on its very first start (as
// if set up before it left the workshop); their passphrases come from the
// networks list. Each network has an SSID of 1-32 bytes, a security of
// open, wpa2 or wpa3, a passphrase (none for open, 8-63 characters
// otherwise), an RSSI in dBm (-100 to 0), a channel (1-14) and whether it
// reaches the internet.
type Radio struct {
	Provision []string       `json:"provision,omitempty"`
	Networks  []RadioNetwork `json:"networks"`
}

// RadioNetwork is one network in range.
type RadioNetwork struct {
	SSID       string `json:"ssid"`
	Security   string `json:"security"`
	Passphrase string `json:"passphrase,omitempty"`
	RSSI       int    `json:"rssi"`
	Channel    int    `json:"channel"`
	Internet   bool   `json:"internet"`
}

// DefaultRadio is the radio file written on a board's first start.
func DefaultRadio() Radio {
	return Radio{
		Provision: []string{"holofleet-lab"},
		Networks: []RadioNetwork{
			{SSID: "holofleet-lab", Security: SecurityWPA2, Passphrase: "holofleet-lab-2024", RSSI: -48, Channel: 6, Internet: true},
			{SSID: "workshop-guest", Security: SecurityOpen, RSSI: -67, Channel: 11, Internet: true},
			{SSID: "backstage", Security: SecurityWPA3, Passphrase: "droids-only-please", RSSI: -74, Channel: 1},
		},
	}
}

// Validate checks every network of the environment.
func (r Radio) Validate() error {
	for i, n := range r.Networks {
		if err := validSSID(n.SSID); err != nil {
			return fmt.Errorf("%w: networks[%d]: %v", ErrRadioFile, i, err)
		}
		switch n.Security {
		case SecurityOpen:
			if n.Passphrase != "" {
				return fmt.Errorf("%w: networks[%d] %q: an open network has no passphrase", ErrRadioFile, i, n.SSID)
			}
		case SecurityWPA2, SecurityWPA3:
			if err := validPassphrase(n.Passphrase); err != nil {
				return fmt.Errorf("%w: networks[%d] %q: %v", ErrRadioFile, i, n.SSID, err)
			}
		default:
			return fmt.Errorf("%w: networks[%d] %q: security must be open, wpa2 or wpa3", ErrRadioFile, i, n.SSID)
		}
		if n.RSSI < -100 || n.RSSI > 0 {
			return fmt.Errorf("%w: networks[%d] %q: rssi must be -100 to 0", ErrRadioFile, i, n.SSID)
		}
		if n.Channel < 1 || n.Channel > 14 {
			return fmt.Errorf("%w: networks[%d] %q: channel must be 1-14", ErrRadioFile, i, n.SSID)
		}
	}
	return nil
}

// Find returns the strongest network in range named ssid.
func (r Radio) Find(ssid string) (RadioNetwork, bool) {
	var best RadioNetwork
	found := false
	for _, n := range r.Networks {
		if n.SSID == ssid && (!found || n.RSSI > best.RSSI) {
			best, found = n, true
		}
	}
	return best, found
}

// byStrength returns the networks, strongest first (ties by SSID).
func (r Radio) byStrength() []RadioNetwork {
	out := append([]RadioNetwork(nil), r.Networks...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].RSSI != out[j].RSSI {
			return out[i].RSSI > out[j].RSSI
		}
		return out[i].SSID < out[j].SSID
	})
	return out
}

// DecodeRadio parses and validates a radio file. Unknown fields are
// refused so a typo does not silently change the environment.
func DecodeRadio(b []byte) (Radio, error) {
	var r Radio
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Radio{}, fmt.Errorf("%w: %v", ErrRadioFile, err)
	}
	if dec.More() {
		return Radio{}, fmt.Errorf("%w: trailing data", ErrRadioFile)
	}
	if err := r.Validate(); err != nil {
		return Radio{}, err
	}
	return r, nil
}

// radioFile reads the radio file and notices when it changes, by its
// modification time and size (no file-system notifications: the board
// polls it on its clock).
type radioFile struct {
	path  string
	mtime time.Time
	size  int64
}

// load reads the file, writing DefaultRadio first when it does not exist.
func (f *radioFile) load() (Radio, error) {
	if _, err := os.Stat(f.path); errors.Is(err, os.ErrNotExist) {
		b, err := json.MarshalIndent(DefaultRadio(), "", "  ")
		if err != nil {
			return Radio{}, err
		}
		if err := os.WriteFile(f.path, append(b, '\n'), 0o644); err != nil {
			return Radio{}, fmt.Errorf("%w: %v", ErrRadioFile, err)
		}
	}
	return f.read()
}

func (f *radioFile) read() (Radio, error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return Radio{}, fmt.Errorf("%w: %v", ErrRadioFile, err)
	}
	f.mtime, f.size = st.ModTime(), st.Size()
	b, err := os.ReadFile(f.path)
	if err != nil {
		return Radio{}, fmt.Errorf("%w: %v", ErrRadioFile, err)
	}
	return DecodeRadio(b)
}

// changed reports whether the file looks different from the last read.
// A file that has gone missing counts as unchanged (the last environment
// stays).
func (f *radioFile) changed() bool {
	st, err := os.Stat(f.path)
	if err != nil {
		return false
	}
	return !st.ModTime().Equal(f.mtime) || st.Size() != f.size
}
