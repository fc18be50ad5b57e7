package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

func connect(url, user, pass string) (paho.Client, error) {
	o := paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprint("t", time.Now().UnixNano())).
		SetUsername(user).SetPassword(pass).SetConnectTimeout(2 * time.Second)
	c := paho.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(3 * time.Second) {
		return nil, errors.New("timeout")
	}
	return c, tok.Error()
}

// TestBroker: a free port, credentials required when set, retained
// messages kept, a taken port refused with ErrListen.
func TestBroker(t *testing.T) {
	b, err := Start(Options{Addr: "127.0.0.1:0", Username: "gw", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := connect(b.URL(), "gw", "wrong"); err == nil {
		t.Error("a wrong password was accepted")
	}
	c, err := connect(b.URL(), "gw", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(50)
	c.Publish("a/b", 1, true, "kept").Wait()
	got := make(chan string, 1)
	c2, err := connect(b.URL(), "gw", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Disconnect(50)
	c2.Subscribe("a/#", 1, func(_ paho.Client, m paho.Message) { got <- string(m.Payload()) })
	select {
	case p := <-got:
		if p != "kept" {
			t.Errorf("retained %q", p)
		}
	case <-time.After(5 * time.Second):
		t.Error("retained message not delivered")
	}
	if n := b.Clients(); n != 2 {
		t.Errorf("clients %d", n)
	}
	if _, err := Start(Options{Addr: b.Addr()}); !errors.Is(err, ErrListen) {
		t.Errorf("second broker on %s: %v", b.Addr(), err)
	}
}

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{"": "127.0.0.1:1884", "1999": "127.0.0.1:1999", "0": "127.0.0.1:0",
		"0.0.0.0:1884": "0.0.0.0:1884", ":1884": ":1884"} {
		if got := ListenAddr(in); got != want {
			t.Errorf("ListenAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
