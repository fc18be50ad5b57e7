package network

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/holofleet/holofleet/bus/clock"
	"github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/firmware/board"
	"github.com/holofleet/holofleet/firmware/longop"
)

// Store keeps the saved network document (the board passes a
// store.Bucket).
type Store interface {
	Get(key string, v any) (bool, error)
	Put(key string, v any) error
}

// Publisher receives state changes (the board's event hub).
type Publisher interface{ SetState(kind string, state any) }

// EventKind is the event kind of the network state.
const EventKind = "network"

// Announcer announces the board on the LAN (mDNS) while it is joined.
type Announcer interface {
	// Announce starts announcing host.local at ip with the HTTP service on
	// port, or updates what is announced.
	Announce(host string, ip net.IP, port int) error
	// Withdraw stops announcing.
	Withdraw()
}

// APServer is the access point's own listener.
type APServer interface {
	// Open starts serving and returns the address clients use.
	Open() (net.Addr, error)
	// Close stops serving and drops its clients.
	Close()
}

// Options configure a Network.
type Options struct {
	Clock clock.Clock
	Store Store
	// RadioPath is the radio file (written with DefaultRadio when absent).
	RadioPath string
	Publisher Publisher
	Logger    *slog.Logger
	// DefaultAPName and DefaultAPPassphrase are the access point's name
	// and passphrase until changed (and after null).
	DefaultAPName       string
	DefaultAPPassphrase string
	// Hostname returns the board's .local name for mDNS.
	Hostname func() string
	// Addr is the board's HTTP listener: its IP is the station address
	// and its port the one announced.
	Addr net.Addr
	// Long is the board-wide lock of long operations (scans take it).
	Long *longop.Lock
	// AP serves the API on the access point; nil keeps only the state.
	AP APServer
	// Announcer announces the board over mDNS; nil announces nothing.
	Announcer Announcer
}

// State is what GET /network returns and the network event carries.
type State struct {
	STAEnabled bool `json:"sta_enabled"`
	// Joined is the network the station is on, null when none.
	Joined *Joined `json:"joined"`
	// Known lists the saved networks, oldest first.
	Known []Known `json:"known"`
	AP    AP      `json:"ap"`
}

// Joined is the network the station joined.
type Joined struct {
	SSID     string `json:"ssid"`
	Security string `json:"security"`
	RSSI     int    `json:"rssi"`
	Channel  int    `json:"channel"`
	IP       string `json:"ip"`
	Internet bool   `json:"internet"`
}

// Known is a saved network; its passphrase is never shown.
type Known struct {
	SSID string `json:"ssid"`
	// Open is true when it was saved without a passphrase.
	Open bool `json:"open"`
	// InRange is true when the radio hears it now.
	InRange bool `json:"in_range"`
}

// AP is the access point's state.
type AP struct {
	On       bool   `json:"on"`
	Name     string `json:"name"`
	Security string `json:"security"`
	// OffInS counts down the seconds left of a timed access point; null
	// when it is off or stays on.
	OffInS *int `json:"off_in_s"`
	// IP and Port are where the access point serves the API (in the
	// simulator, its own listener); empty and 0 when off.
	IP   string `json:"ip"`
	Port int    `json:"port"`
}

// saved is the stored document.
type saved struct {
	STAEnabled bool         `json:"sta_enabled"`
	Known      []savedKnown `json:"known"`
	APName     string       `json:"ap_name,omitempty"`
	APPass     string       `json:"ap_passphrase,omitempty"`
}

type savedKnown struct {
	SSID       string `json:"ssid"`
	Passphrase string `json:"passphrase,omitempty"`
}

const storeKey = "network"

// model is everything the state is made of; actions change a copy and
// the copy replaces it when they succeed.
type model struct {
	saved      saved
	joined     *RadioNetwork
	joinedPass string
	apOn       bool
	apTimed    bool
	apOffAt    time.Time
	apGen      int
}

func (m model) clone() model {
	c := m
	c.saved.Known = append([]savedKnown(nil), m.saved.Known...)
	if m.joined != nil {
		j := *m.joined
		c.joined = &j
	}
	return c
}

func (m *model) known(ssid string) (savedKnown, int) {
	for i, k := range m.saved.Known {
		if k.SSID == ssid {
			return k, i
		}
	}
	return savedKnown{}, -1
}

// remember saves ssid as the newest known network, forgetting the oldest
// beyond MaxKnown.
func (m *model) remember(ssid, pass string) {
	if _, i := m.known(ssid); i >= 0 {
		m.saved.Known = append(m.saved.Known[:i], m.saved.Known[i+1:]...)
	}
	m.saved.Known = append(m.saved.Known, savedKnown{SSID: ssid, Passphrase: pass})
	if len(m.saved.Known) > MaxKnown {
		m.saved.Known = append([]savedKnown(nil), m.saved.Known[len(m.saved.Known)-MaxKnown:]...)
	}
}

func credentialsMatch(n RadioNetwork, pass string) bool {
	if n.Security == SecurityOpen {
		return pass == ""
	}
	return pass == n.Passphrase
}

// autoJoin joins the strongest known network in range whose saved
// passphrase is right, when the station may and is not joined.
func (m *model) autoJoin(r Radio) {
	if !m.saved.STAEnabled || m.joined != nil {
		return
	}
	for _, n := range r.byStrength() {
		if k, i := m.known(n.SSID); i >= 0 && credentialsMatch(n, k.Passphrase) {
			j := n
			m.joined, m.joinedPass = &j, k.Passphrase
			return
		}
	}
}

// radioChanged follows the joined network in a new environment: it drops
// it when gone or when its passphrase no longer works, then joins again.
func (m *model) radioChanged(r Radio) {
	if m.joined != nil {
		n, ok := r.Find(m.joined.SSID)
		if ok && credentialsMatch(n, m.joinedPass) {
			m.joined = &n
		} else {
			m.joined, m.joinedPass = nil, ""
		}
	}
	m.autoJoin(r)
}

// action changes m; cutoff reports that the change drops clients and so
// happens after the reply.
type action func(m *model, r Radio, now time.Time) (cutoff bool, err error)

// Network is the board's simulated Wi-Fi.
type Network struct {
	opts  Options
	log   *slog.Logger
	clk   clock.Clock
	radio radioFile

	mu      sync.Mutex
	env     Radio
	m       model
	closed  bool
	pending map[clock.Timer]bool

	apOpen    bool
	apOpenGen int
	apAddr    net.Addr
	apTimer   clock.Timer
	apTimerAt time.Time

	announcing bool
	announced  string
}

// New loads the saved networks and the radio file, joins a known network
// (or turns the access point on for APTimeout when none can be joined),
// and opens what the state needs. Close undoes it.
func New(o Options) (*Network, error) {
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Hostname == nil {
		o.Hostname = func() string { return "" }
	}
	if o.Long == nil {
		o.Long = &longop.Lock{}
	}
	if o.Publisher == nil {
		o.Publisher = nopPublisher{}
	}
	if err := validAPName(o.DefaultAPName); err != nil {
		return nil, fmt.Errorf("network: default access point name: %w", err)
	}
	if err := validPassphrase(o.DefaultAPPassphrase); err != nil {
		return nil, fmt.Errorf("network: default access point passphrase: %w", err)
	}
	n := &Network{opts: o, log: o.Logger, clk: o.Clock, radio: radioFile{path: o.RadioPath}, pending: map[clock.Timer]bool{}}
	env, err := n.radio.load()
	if err != nil {
		n.log.Error("radio file unusable; nothing in range until it is fixed", "path", o.RadioPath, "err", err)
		env = Radio{}
	}
	n.env = env
	ok, err := o.Store.Get(storeKey, &n.m.saved)
	if err != nil {
		return nil, fmt.Errorf("network: load: %w", err)
	}
	if !ok {
		// First start: the station may join, and knows the provisioned
		// networks of the radio file.
		n.m.saved = saved{STAEnabled: true}
		for _, ssid := range env.Provision {
			if rn, found := env.Find(ssid); found {
				n.m.remember(ssid, rn.Passphrase)
			}
		}
		if err := o.Store.Put(storeKey, n.m.saved); err != nil {
			return nil, fmt.Errorf("network: save: %w", err)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.m.autoJoin(env)
	if n.m.joined == nil {
		n.m.apOn, n.m.apTimed, n.m.apOffAt = true, true, n.clk.Now().Add(APTimeout)
	}
	n.commitLocked()
	return n, nil
}

type nopPublisher struct{}

func (nopPublisher) SetState(string, any) {}

// Run polls the radio file every RadioPoll until ctx ends.
func (n *Network) Run(ctx context.Context) error {
	t := n.clk.NewTicker(RadioPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
			n.CheckRadio()
		}
	}
}

// CheckRadio re-reads the radio file when it changed and follows the new
// environment. It reports whether a new environment was taken.
func (n *Network) CheckRadio() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || !n.radio.changed() {
		return false
	}
	env, err := n.radio.read()
	if err != nil {
		n.log.Warn("radio file changed but is unusable; keeping the last one", "err", err)
		return false
	}
	n.env = env
	n.m.radioChanged(env)
	n.commitLocked()
	n.log.Info("radio environment changed", "networks", len(env.Networks))
	return true
}

// Close turns the access point and mDNS off and stops every timer.
func (n *Network) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.closed = true
	for t := range n.pending {
		t.Stop()
	}
	n.pending = nil
	if n.apTimer != nil {
		n.apTimer.Stop()
	}
	if n.apOpen && n.opts.AP != nil {
		n.opts.AP.Close()
	}
	n.apOpen = false
	if n.announcing {
		n.opts.Announcer.Withdraw()
		n.announcing = false
	}
}

// do runs an action. A change that cuts nobody off is made at once and
// later is nil; a cutting change is only checked on a copy, its resulting
// state returned, and later schedules the change itself CutoffDelay from
// when it is called (the HTTP handler calls it after writing the reply).
func (n *Network) do(f action) (st State, later func(), err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return State{}, nil, api.Errorf(api.ErrInternal, "the network is shutting down")
	}
	now := n.clk.Now()
	next := n.m.clone()
	cut, err := f(&next, n.env, now)
	if err != nil {
		return State{}, nil, err
	}
	if !cut {
		if err := n.saveIfChanged(next.saved); err != nil {
			return State{}, nil, err
		}
		n.m = next
		n.commitLocked()
		return n.stateLocked(now), nil, nil
	}
	return n.viewOf(next, now), func() { n.schedule(f) }, nil
}

func (n *Network) schedule(f action) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	var t clock.Timer
	t = n.clk.AfterFunc(CutoffDelay, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.closed {
			return
		}
		delete(n.pending, t)
		next := n.m.clone()
		if _, err := f(&next, n.env, n.clk.Now()); err != nil {
			n.log.Warn("network change no longer applies", "err", err)
			return
		}
		if err := n.saveIfChanged(next.saved); err != nil {
			n.log.Error("network change not saved", "err", err)
			return
		}
		n.m = next
		n.commitLocked()
	})
	n.pending[t] = true
}

// now runs an action from a Go caller: a cutting change is scheduled at
// once, as there is no reply to wait for.
func (n *Network) now(f action) (State, error) {
	st, later, err := n.do(f)
	if later != nil {
		later()
	}
	return st, err
}

func (n *Network) saveIfChanged(s saved) error {
	if reflect.DeepEqual(s, n.m.saved) {
		return nil
	}
	if err := n.opts.Store.Put(storeKey, s); err != nil {
		return api.Errorf(api.ErrInternal, "saving the network settings: %v", err)
	}
	return nil
}

// commitLocked makes the world match the model (listener, timer, mDNS)
// and publishes the state.
func (n *Network) commitLocked() {
	now := n.clk.Now()
	m := &n.m
	// The access point's listener.
	if n.apOpen && (!m.apOn || n.apOpenGen != m.apGen) {
		if n.opts.AP != nil {
			n.opts.AP.Close()
		}
		n.apOpen, n.apAddr = false, nil
	}
	if m.apOn && !n.apOpen {
		if n.opts.AP != nil {
			addr, err := n.opts.AP.Open()
			if err != nil {
				n.log.Error("access point cannot serve; turned off", "err", fmt.Errorf("%w: %v", ErrAPListen, err))
				m.apOn, m.apTimed = false, false
			} else {
				n.apAddr = addr
				n.apOpen, n.apOpenGen = true, m.apGen
			}
		} else {
			n.apOpen, n.apOpenGen = true, m.apGen
		}
	}
	// The timed access point's countdown.
	if m.apOn && m.apTimed {
		if n.apTimer == nil || !n.apTimerAt.Equal(m.apOffAt) {
			if n.apTimer != nil {
				n.apTimer.Stop()
			}
			n.apTimerAt = m.apOffAt
			n.apTimer = n.clk.AfterFunc(m.apOffAt.Sub(now), n.expireAP)
		}
	} else if n.apTimer != nil {
		n.apTimer.Stop()
		n.apTimer = nil
	}
	// mDNS while joined.
	if n.opts.Announcer != nil {
		if m.joined != nil {
			host := n.opts.Hostname()
			if !n.announcing || host != n.announced {
				if err := n.opts.Announcer.Announce(host, n.staIP(), n.staPort()); err != nil {
					n.log.Warn("mDNS announcement failed", "err", err)
				} else {
					n.announcing, n.announced = true, host
				}
			}
		} else if n.announcing {
			n.opts.Announcer.Withdraw()
			n.announcing, n.announced = false, ""
		}
	}
	n.opts.Publisher.SetState(EventKind, n.stateLocked(now))
}

func (n *Network) expireAP() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || !n.m.apOn || !n.m.apTimed || n.clk.Now().Before(n.m.apOffAt) {
		return
	}
	n.m.apOn, n.m.apTimed = false, false
	n.apTimer = nil
	n.log.Info("timed access point off")
	n.commitLocked()
}

// HostnameChanged re-announces the board under its new name (the web
// settings call it).
func (n *Network) HostnameChanged(string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	n.commitLocked()
}

func (n *Network) staIP() net.IP {
	if ta, ok := n.opts.Addr.(*net.TCPAddr); ok && ta.IP != nil && !ta.IP.IsUnspecified() {
		return ta.IP
	}
	return net.IPv4(127, 0, 0, 1)
}

func (n *Network) staPort() int {
	if ta, ok := n.opts.Addr.(*net.TCPAddr); ok {
		return ta.Port
	}
	return 80
}

// State returns the network state now.
func (n *Network) State() State {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stateLocked(n.clk.Now())
}

func (n *Network) stateLocked(now time.Time) State { return n.viewOf(n.m, now) }

func (n *Network) viewOf(m model, now time.Time) State {
	st := State{STAEnabled: m.saved.STAEnabled, Known: []Known{}}
	if j := m.joined; j != nil {
		st.Joined = &Joined{SSID: j.SSID, Security: j.Security, RSSI: j.RSSI, Channel: j.Channel,
			IP: n.staIP().String(), Internet: j.Internet}
	}
	for _, k := range m.saved.Known {
		_, in := n.env.Find(k.SSID)
		st.Known = append(st.Known, Known{SSID: k.SSID, Open: k.Passphrase == "", InRange: in})
	}
	st.AP = AP{On: m.apOn, Name: m.apName(n.opts.DefaultAPName), Security: SecurityWPA2}
	if m.apOn {
		if m.apTimed {
			left := int((m.apOffAt.Sub(now) + time.Second - 1) / time.Second)
			st.AP.OffInS = &left
		}
		if ta, ok := n.apAddr.(*net.TCPAddr); ok {
			st.AP.IP, st.AP.Port = ta.IP.String(), ta.Port
		}
	}
	return st
}

func (m *model) apName(def string) string {
	if m.saved.APName != "" {
		return m.saved.APName
	}
	return def
}

func (m *model) apPass(def string) string {
	if m.saved.APPass != "" {
		return m.saved.APPass
	}
	return def
}

// Station is the sta object of /info.
func (n *Network) Station() board.Station {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := board.Station{Enabled: n.m.saved.STAEnabled, IPv6: []string{}}
	if j := n.m.joined; j != nil {
		st.Connected, st.SSID, st.IP, st.RSSI, st.Channel = true, j.SSID, n.staIP().String(), j.RSSI, j.Channel
	}
	return st
}

// AccessPoint is the ap object of /info.
func (n *Network) AccessPoint() board.APInfo {
	ap := n.State().AP
	return board.APInfo{On: ap.On, Name: ap.Name, OffInS: ap.OffInS, IP: ap.IP}
}

// ViaAP reports whether r came in on the access point.
func (n *Network) ViaAP(r *http.Request) bool { return ViaAP(r) }

// Scan lists the networks in range, strongest first. It is a long
// operation: it takes ScanTime and answers 409 busy while another long
// operation runs.
func (n *Network) Scan(ctx context.Context) (ScanResult, error) {
	release, err := n.opts.Long.TryAcquire("a Wi-Fi scan")
	if err != nil {
		return ScanResult{}, err
	}
	defer release()
	t := n.clk.NewTimer(ScanTime)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ScanResult{}, ctx.Err()
	case <-t.C():
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	res := ScanResult{Networks: []Scanned{}}
	for _, rn := range n.env.byStrength() {
		_, i := n.m.known(rn.SSID)
		res.Networks = append(res.Networks, Scanned{SSID: rn.SSID, RSSI: rn.RSSI, Channel: rn.Channel, Security: rn.Security, Known: i >= 0})
	}
	return res, nil
}

// ScanResult is the reply of GET /network/scan.
type ScanResult struct {
	Networks []Scanned `json:"networks"`
}

// Scanned is one network in range.
type Scanned struct {
	SSID     string `json:"ssid"`
	RSSI     int    `json:"rssi"`
	Channel  int    `json:"channel"`
	Security string `json:"security"`
	Known    bool   `json:"known"`
}

// Actions. Each validates before changing anything.

func setSTA(enabled bool) action {
	return func(m *model, r Radio, _ time.Time) (bool, error) {
		cut := !enabled && m.joined != nil
		m.saved.STAEnabled = enabled
		if !enabled {
			m.joined, m.joinedPass = nil, ""
		}
		m.autoJoin(r)
		return cut, nil
	}
}

func saveKnown(ssid, pass string) action {
	return func(m *model, r Radio, _ time.Time) (bool, error) {
		if err := validSSID(ssid); err != nil {
			return false, api.Errorf(api.ErrBadRequest, "ssid: %v", err)
		}
		if pass != "" {
			if err := validPassphrase(pass); err != nil {
				return false, api.Errorf(api.ErrBadRequest, "passphrase: %v (leave it out for an open network)", err)
			}
		}
		m.remember(ssid, pass)
		m.autoJoin(r)
		return false, nil
	}
}

func forget(ssid string) action {
	return func(m *model, r Radio, _ time.Time) (bool, error) {
		_, i := m.known(ssid)
		if i < 0 {
			return false, api.Errorf(api.ErrNotFound, "no known network %q", ssid)
		}
		m.saved.Known = append(m.saved.Known[:i], m.saved.Known[i+1:]...)
		cut := m.joined != nil && m.joined.SSID == ssid
		if cut {
			m.joined, m.joinedPass = nil, ""
			m.autoJoin(r)
		}
		return cut, nil
	}
}

func join(ssid string, pass *string) action {
	return func(m *model, r Radio, _ time.Time) (bool, error) {
		if err := validSSID(ssid); err != nil {
			return false, api.Errorf(api.ErrBadRequest, "ssid: %v", err)
		}
		if pass != nil && *pass != "" {
			if err := validPassphrase(*pass); err != nil {
				return false, api.Errorf(api.ErrBadRequest, "passphrase: %v", err)
			}
		}
		rn, ok := r.Find(ssid)
		if !ok {
			return false, api.Errorf(api.ErrNotFound, "network %q is not in range", ssid)
		}
		var p string
		switch {
		case pass != nil:
			p = *pass
		default:
			if k, i := m.known(ssid); i >= 0 {
				p = k.Passphrase
			}
		}
		if !credentialsMatch(rn, p) {
			switch {
			case rn.Security == SecurityOpen:
				return false, api.Errorf(api.ErrBadRequest, "network %q is open: give no passphrase", ssid)
			case p == "" && pass == nil:
				return false, api.Errorf(api.ErrBadRequest, "network %q needs a passphrase (%s) and none is saved", ssid, rn.Security)
			case p == "":
				return false, api.Errorf(api.ErrBadRequest, "network %q needs a passphrase (%s)", ssid, rn.Security)
			case pass == nil:
				return false, api.Errorf(api.ErrBadRequest, "the saved passphrase of %q is wrong", ssid)
			default:
				return false, api.Errorf(api.ErrBadRequest, "wrong passphrase for %q", ssid)
			}
		}
		cut := m.joined != nil && m.joined.SSID != ssid
		m.remember(ssid, p)
		m.saved.STAEnabled = true
		m.joined, m.joinedPass = &rn, p
		return cut, nil
	}
}

// APPatch is the body of PATCH /network/ap. name and passphrase may be
// null to return to the defaults.
type APPatch struct {
	On         *bool           `json:"on,omitempty"`
	Name       json.RawMessage `json:"name,omitempty"`
	Passphrase json.RawMessage `json:"passphrase,omitempty"`
}

func patchAP(p APPatch, defName, defPass string) action {
	return func(m *model, _ Radio, now time.Time) (bool, error) {
		wasOn := m.apOn
		oldName, oldPass := m.apName(defName), m.apPass(defPass)
		if p.Name != nil {
			s, null, err := stringOrNull(p.Name, "name")
			if err != nil {
				return false, err
			}
			if !null {
				if err := validAPName(s); err != nil {
					return false, api.Errorf(api.ErrBadRequest, "name: %v", err)
				}
			}
			m.saved.APName = s
		}
		if p.Passphrase != nil {
			s, null, err := stringOrNull(p.Passphrase, "passphrase")
			if err != nil {
				return false, err
			}
			if !null {
				if err := validPassphrase(s); err != nil {
					return false, api.Errorf(api.ErrBadRequest, "passphrase: %v (the access point is WPA2)", err)
				}
			}
			m.saved.APPass = s
		}
		if m.saved.APName == defName {
			m.saved.APName = ""
		}
		if m.saved.APPass == defPass {
			m.saved.APPass = ""
		}
		if p.On != nil {
			switch {
			case !*p.On:
				m.apOn, m.apTimed = false, false
			case !m.apOn:
				m.apOn, m.apTimed = true, false
			case m.apTimed:
				m.apOffAt = now.Add(APTimeout)
			}
		}
		restart := wasOn && m.apOn && (m.apName(defName) != oldName || m.apPass(defPass) != oldPass)
		if restart {
			m.apGen++
		}
		return wasOn && (!m.apOn || restart), nil
	}
}

func pressBoot(m *model, _ Radio, now time.Time) (bool, error) {
	switch {
	case !m.apOn:
		m.apOn, m.apTimed, m.apOffAt = true, true, now.Add(APTimeout)
	case m.apTimed:
		m.apOffAt = now.Add(APTimeout)
	}
	return false, nil
}

func stringOrNull(raw json.RawMessage, field string) (s string, null bool, err error) {
	if string(raw) == "null" {
		return "", true, nil
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, api.Errorf(api.ErrBadRequest, "%s must be a string or null", field)
	}
	return s, false, nil
}

// Go API (the console and the simulator's buttons use it). Cutting
// changes happen CutoffDelay after the call.

// SetSTAEnabled lets the station join networks or not.
func (n *Network) SetSTAEnabled(on bool) (State, error) { return n.now(setSTA(on)) }

// SaveKnown saves a network ("" passphrase: open).
func (n *Network) SaveKnown(ssid, passphrase string) (State, error) {
	return n.now(saveKnown(ssid, passphrase))
}

// Forget forgets a known network.
func (n *Network) Forget(ssid string) (State, error) { return n.now(forget(ssid)) }

// Join joins ssid; a nil passphrase uses the saved one or none.
func (n *Network) Join(ssid string, passphrase *string) (State, error) {
	return n.now(join(ssid, passphrase))
}

// PatchAP changes the access point as PATCH /network/ap does.
func (n *Network) PatchAP(p APPatch) (State, error) {
	return n.now(patchAP(p, n.opts.DefaultAPName, n.opts.DefaultAPPassphrase))
}

// PressBoot is the BOOT button: the access point comes on for APTimeout
// (a timed one starts its countdown again; one that stays on stays).
func (n *Network) PressBoot() State {
	st, _ := n.now(pressBoot)
	return st
}

// Validation of names and passphrases.

func validSSID(s string) error {
	if len(s) < 1 || len(s) > 32 {
		return fmt.Errorf("must be 1-32 bytes, not %d", len(s))
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("must be UTF-8")
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("must not hold control characters")
		}
	}
	return nil
}

func validAPName(s string) error { return validSSID(s) }

// validPassphrase checks a WPA passphrase: 8-63 printable ASCII
// characters.
func validPassphrase(s string) error {
	if len(s) < 8 || len(s) > 63 {
		return fmt.Errorf("must be 8-63 characters, not %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Errorf("must be printable ASCII")
		}
	}
	return nil
}
