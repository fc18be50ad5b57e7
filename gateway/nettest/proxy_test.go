package nettest

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves lines back until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(l)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("hi\n")); err != nil {
		return err
	}
	_, err = bufio.NewReader(c).ReadString('\n')
	return err
}

// TestCutRestore: traffic passes, a cut ends open connections and
// refuses new ones, and a restore on the same address lets them in.
func TestCutRestore(t *testing.T) {
	p := NewProxy(t, echo(t))
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.Cut()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("an open connection survived the cut")
	}
	if err := roundTrip(p.Addr()); err == nil {
		t.Fatal("a new connection passed while cut")
	}
	p.Restore()
	p.Restore() // twice is once
	if err := roundTrip(p.Addr()); err != nil {
		t.Fatalf("after restore: %v", err)
	}
}
