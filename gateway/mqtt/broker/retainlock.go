package broker

import (
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Retained messages and the scans for them
//
// mochi v2.7.9 stores a retained message under its topic index's locks,
// but a wildcard subscription looks for the retained messages it matches
// without them: a client that subscribes to holo/# while another
// publishes a retained message is a data race in mochi (the race detector
// shows it; mochi-mqtt/server#200). Until a release fixes it, the hook
// serialises the two itself, with retainLock, through mochi's own hook
// points (no copy of mochi is patched):
//
//   - a SUBSCRIBE holds the lock for reading from OnSubscribe until
//     OnPacketProcessed: the retained messages are looked up in between;
//   - a retained PUBLISH holds it for writing from the end of OnPublish
//     (once the publication is allowed) until OnRetainMessage, which mochi
//     calls right after storing it, or OnPacketProcessed if it stored
//     nothing;
//   - a retained will does the same from OnWill to OnRetainMessage (or
//     OnWillSent). A will with a delay is stored later by mochi's own loop
//     without any hook: the broker turns its retain flag off when the
//     client connects (onConnectWill).
//
// mochi processes one client's packets one at a time, so "this client's
// publication holds the write lock" is kept per client (retainHeld). A
// SUBSCRIBE holds the read lock while its SUBACK is written: the
// listener's write deadline (WriteTimeout) bounds how long a client that
// stops reading can hold it.

// OnSubscribe takes the read lock for the SUBSCRIBE mochi now processes,
// then applies the subscription limits.
func (h *hook) OnSubscribe(cl *mochi.Client, pk packets.Packet) packets.Packet {
	h.retainLock.RLock()
	return h.subscribeLimits(cl, pk)
}

// holdRetain takes the write lock for cl's retained publication or will.
func (h *hook) holdRetain(cl *mochi.Client) {
	h.retainLock.Lock()
	h.retainHeld.Store(cl, struct{}{})
}

// releaseRetain lets go of the write lock if cl holds it.
func (h *hook) releaseRetain(cl *mochi.Client) {
	if _, ok := h.retainHeld.LoadAndDelete(cl); ok {
		h.retainLock.Unlock()
	}
}

// OnPacketProcessed ends what OnSubscribe and OnPublish began.
func (h *hook) OnPacketProcessed(cl *mochi.Client, pk packets.Packet, _ error) {
	switch pk.FixedHeader.Type {
	case packets.Subscribe:
		h.retainLock.RUnlock()
	case packets.Publish:
		h.releaseRetain(cl)
	}
}

// OnWill takes the write lock for a retained will sent now.
func (h *hook) OnWill(cl *mochi.Client, will mochi.Will) (mochi.Will, error) {
	if will.Retain && will.WillDelayInterval == 0 {
		h.holdRetain(cl)
	}
	return will, nil
}

// OnWillSent lets go of the lock if storing the will did not.
func (h *hook) OnWillSent(cl *mochi.Client, _ packets.Packet) {
	h.releaseRetain(cl)
}
