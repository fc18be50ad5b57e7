package broker_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"
)

// raw is a minimal MQTT client over a real socket, written packet by
// packet with mochi's codec, for what paho hides: MQTT 5 reason codes,
// wills, and packets of any size.
type raw struct {
	t       *testing.T
	c       net.Conn
	r       *bufio.Reader
	version byte
}

// login describes a CONNECT.
type login struct {
	version         byte // 4 (3.1.1) or 5
	id, user, pass  string
	willTopic, will string
	willRetain      bool
}

func dialRaw(t *testing.T, addr string) *raw {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &raw{t: t, c: c, r: bufio.NewReader(c), version: 4}
}

// connect sends CONNECT and returns CONNACK's code.
func (r *raw) connect(l login) byte {
	r.t.Helper()
	if l.version == 0 {
		l.version = 4
	}
	r.version = l.version
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: l.version,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), Clean: true, Keepalive: 30, ClientIdentifier: l.id}}
	if l.user != "" {
		pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte(l.user)
	}
	if l.pass != "" {
		pk.Connect.PasswordFlag, pk.Connect.Password = true, []byte(l.pass)
	}
	if l.willTopic != "" {
		pk.Connect.WillFlag, pk.Connect.WillTopic, pk.Connect.WillPayload = true, l.willTopic, []byte(l.will)
		pk.Connect.WillRetain, pk.Connect.WillQos = l.willRetain, 1
	}
	var buf bytes.Buffer
	if err := pk.ConnectEncode(&buf); err != nil {
		r.t.Fatal(err)
	}
	r.write(buf.Bytes())
	ack, err := r.read()
	if err != nil {
		r.t.Fatalf("CONNACK: %v", err)
	}
	if ack.FixedHeader.Type != packets.Connack {
		r.t.Fatalf("got packet type %d, want CONNACK", ack.FixedHeader.Type)
	}
	return ack.ReasonCode
}

// publish sends PUBLISH at QoS 1 and returns PUBACK's reason code.
func (r *raw) publish(topic, payload string, retain bool) (byte, error) {
	r.t.Helper()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1, Retain: retain},
		ProtocolVersion: r.version, TopicName: topic, Payload: []byte(payload), PacketID: 7}
	var buf bytes.Buffer
	if err := pk.PublishEncode(&buf); err != nil {
		r.t.Fatal(err)
	}
	r.write(buf.Bytes())
	ack, err := r.read()
	if err != nil {
		return 0, err
	}
	if ack.FixedHeader.Type != packets.Puback {
		return 0, fmt.Errorf("got packet type %d, want PUBACK", ack.FixedHeader.Type)
	}
	return ack.ReasonCode, nil
}

func (r *raw) write(b []byte) {
	r.t.Helper()
	_ = r.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// read reads one packet (CONNACK, PUBACK or DISCONNECT are decoded).
func (r *raw) read() (packets.Packet, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var pk packets.Packet
	b, err := r.r.ReadByte()
	if err != nil {
		return pk, err
	}
	if err := pk.FixedHeader.Decode(b); err != nil {
		return pk, err
	}
	n, _, err := packets.DecodeLength(r.r)
	if err != nil {
		return pk, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r.r, body); err != nil {
		return pk, err
	}
	pk.FixedHeader.Remaining = n
	pk.ProtocolVersion = r.version
	switch pk.FixedHeader.Type {
	case packets.Connack:
		err = pk.ConnackDecode(body)
	case packets.Puback:
		if r.version < 5 || len(body) < 3 {
			pk.PacketID = uint16(body[0])<<8 | uint16(body[1])
			return pk, nil
		}
		err = pk.PubackDecode(body)
	case packets.Disconnect:
		err = pk.DisconnectDecode(body)
	}
	return pk, err
}

// closed reports whether the broker closed the connection within d.
func (r *raw) closed(d time.Duration) bool {
	_ = r.c.SetReadDeadline(time.Now().Add(d))
	for {
		if _, err := r.r.ReadByte(); err != nil {
			ne, ok := err.(net.Error)
			return !ok || !ne.Timeout()
		}
	}
}

// subscribe sends SUBSCRIBE (QoS 0) without waiting for SUBACK.
func (r *raw) subscribe(id uint16, filter string) {
	r.t.Helper()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, ProtocolVersion: r.version,
		PacketID: id, Filters: packets.Subscriptions{{Filter: filter}}}
	var buf bytes.Buffer
	if err := pk.SubscribeEncode(&buf); err != nil {
		r.t.Fatal(err)
	}
	r.write(buf.Bytes())
}

// subscribed waits for the SUBACK of packet id, skipping other packets:
// the subscription is then in place (tests subscribe before anything is
// published to them).
func (r *raw) subscribed(id uint16) error {
	for {
		_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var fh packets.FixedHeader
		b, err := r.r.ReadByte()
		if err != nil {
			return err
		}
		if err := fh.Decode(b); err != nil {
			return err
		}
		n, _, err := packets.DecodeLength(r.r)
		if err != nil {
			return err
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r.r, body); err != nil {
			return err
		}
		if fh.Type == packets.Suback && n >= 2 && uint16(body[0])<<8|uint16(body[1]) == id {
			return nil
		}
	}
}

// nextPublish returns the topic of the next PUBLISH the broker sends,
// skipping other packets.
func (r *raw) nextPublish() (string, error) {
	for {
		_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var fh packets.FixedHeader
		b, err := r.r.ReadByte()
		if err != nil {
			return "", err
		}
		if err := fh.Decode(b); err != nil {
			return "", err
		}
		n, _, err := packets.DecodeLength(r.r)
		if err != nil {
			return "", err
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r.r, body); err != nil {
			return "", err
		}
		if fh.Type != packets.Publish {
			continue
		}
		fh.Remaining = n
		pk := packets.Packet{FixedHeader: fh, ProtocolVersion: r.version}
		if err := pk.PublishDecode(body); err != nil {
			return "", err
		}
		return pk.TopicName, nil
	}
}
