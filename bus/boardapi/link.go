package boardapi

// LinkCounters are the host link's counters in GET /link.
type LinkCounters struct {
	RxBytes     uint64 `json:"rx_bytes"`
	TxBytes     uint64 `json:"tx_bytes"`
	Frames      uint64 `json:"frames"`
	Lines       uint64 `json:"lines"`
	Replies     uint64 `json:"replies"`
	Errors      uint64 `json:"errors"`
	EventsSent  uint64 `json:"events_sent"`
	BadCRC      uint64 `json:"bad_crc"`
	BadFrames   uint64 `json:"bad_frames"`
	Garbage     uint64 `json:"garbage"`
	Overruns    uint64 `json:"overruns"`
	TooLong     uint64 `json:"too_long"`
	Ignored     uint64 `json:"ignored"`
	NotForUs    uint64 `json:"not_for_us"`
	UnknownType uint64 `json:"unknown_type"`
	Timeouts    uint64 `json:"timeouts"`
	TxDropped   uint64 `json:"tx_dropped"`
	I2CCommands uint64 `json:"i2c_commands"`
}

// LinkSettings are the saved host-link settings (GET/PATCH /link "saved"
// and "running").
type LinkSettings struct {
	Mode        string            `json:"mode"`
	Protocol    string            `json:"protocol"`
	Baud        int               `json:"baud"`
	Address     int               `json:"address"`
	Groups      []int             `json:"groups"`
	Events      LinkEventSettings `json:"events"`
	Attn        bool              `json:"attn"`
	GeneralCall bool              `json:"general_call"`
	Pins        LinkPins          `json:"pins"`
}

// LinkEventSettings say which happenings the host gets and whether they
// are pushed.
type LinkEventSettings struct {
	Kinds []string `json:"kinds"`
	Push  bool     `json:"push"`
}

// LinkPins are the GPIO numbers the link uses.
type LinkPins struct {
	TX   int `json:"tx"`
	RX   int `json:"rx"`
	DE   int `json:"de"`   // RS485 driver enable
	SDA  int `json:"sda"`  // I2C
	SCL  int `json:"scl"`  // I2C
	Attn int `json:"attn"` // ATTN output (open drain)
}

// LinkState is the reply of GET and PATCH /link.
type LinkState struct {
	Protocol        int          `json:"protocol"`
	Saved           LinkSettings `json:"saved"`
	Running         LinkSettings `json:"running"`
	RestartRequired bool         `json:"restart_required"`
	Transport       string       `json:"transport"`
	Counters        LinkCounters `json:"counters"`
}
