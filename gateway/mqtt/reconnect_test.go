package mqtt

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/logtest"
	"github.com/holofleet/holofleet/gateway/mqtt/broker"
)

// lateClient is a paho client whose Disconnect takes effect only after
// the next look at the connection (IsConnectionOpen or Connect) has been
// answered: the window in which paho's own Disconnect(0) has returned but
// the client still says "connected", made certain. Its first subscribe
// fails, which makes the bridge give up on its first connection.
type lateClient struct {
	paho.Client
	mu       sync.Mutex
	failSubs int  // subscribes still to refuse
	subs     int  // subscribes passed through
	pending  bool // a Disconnect not yet applied
}

func (c *lateClient) SubscribeMultiple(f map[string]byte, cb paho.MessageHandler) paho.Token {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failSubs > 0 {
		c.failSubs--
		return failedToken{errors.New("subscription refused")}
	}
	c.subs++
	return c.Client.SubscribeMultiple(f, cb)
}

func (c *lateClient) Disconnect(uint) {
	c.mu.Lock()
	c.pending = true
	c.mu.Unlock()
}

func (c *lateClient) IsConnectionOpen() bool {
	open := c.Client.IsConnectionOpen()
	c.apply()
	return open
}

func (c *lateClient) Connect() paho.Token {
	tok := c.Client.Connect()
	c.apply()
	return tok
}

// apply carries out a pending Disconnect and waits until the client says
// it is disconnected.
func (c *lateClient) apply() {
	c.mu.Lock()
	pending := c.pending
	c.pending = false
	c.mu.Unlock()
	if !pending {
		return
	}
	c.Client.Disconnect(250)
	for deadline := time.Now().Add(10 * time.Second); c.Client.IsConnectionOpen() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

func (c *lateClient) subscribed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subs
}

// failedToken is a finished token carrying an error.
type failedToken struct{ err error }

func (t failedToken) Wait() bool                     { return true }
func (t failedToken) WaitTimeout(time.Duration) bool { return true }
func (t failedToken) Done() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
func (t failedToken) Error() error { return t.err }

// TestReconnectAfterDrop: when the bridge gives up on a connection (the
// broker did not acknowledge), it connects again even though the client
// still says "connected" for a while after Disconnect returns. Before the
// fix the connect loop believed that answer and waited for a loss that
// never came: the bridge stayed offline with its spool growing until a
// restart (issue 26, TestBrokerOutage/embedded under load).
func TestReconnectAfterDrop(t *testing.T) {
	br, err := broker.Start(broker.Options{Addr: "127.0.0.1:0", Anonymous: auth.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = br.Close() })
	logs, log := logtest.New()
	b, err := New(Options{Fleet: fleet.New(fleet.Options{}), Broker: "tcp://" + br.Addr(), Log: log,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	lc := &lateClient{Client: b.client, failSubs: 1}
	b.client = lc
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = b.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	deadline := time.Now().Add(20 * time.Second) // generous: it never comes without the fix
	for st := b.Stats(); !(st.Connected && st.Connects >= 2 && lc.subscribed() >= 1); st = b.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("the bridge did not connect again after dropping its connection: %+v\nbridge log:\n%s", st, logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if logs.Find(t, "mqtt: dropping the connection: the broker did not acknowledge") == nil {
		t.Errorf("the bridge never dropped a connection; log:\n%s", logs.String())
	}
}
