package cluster_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holofleet/holofleet/bus/testbin"
)

// natsServerBin is the Debian nats-server the external-engine tests run
// (.ci/run installs it); tests needing it skip without it.
func natsServerBin(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("HOLO_NATS_SERVER"), "/usr/sbin/nats-server", "/usr/bin/nats-server"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	t.Skip("no nats-server binary (apt-get install nats-server)")
	return ""
}

// freePorts returns n loopback ports free now (the nodes of a cluster must
// know each other's route ports before they start).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// natsNode is one nats-server process of a test cluster.
type natsNode struct {
	name      string
	args      []string
	client    int
	mu        sync.Mutex
	cmd       *exec.Cmd
	exited    chan struct{}
	out       *testbin.Output
	bin, dir  string
	clusterOf *natsCluster
}

// natsCluster is a JetStream cluster of nats-server processes on loopback.
type natsCluster struct {
	nodes []*natsNode
}

// URL is every node's client URL, comma-separated.
func (c *natsCluster) URL() string {
	var us []string
	for _, n := range c.nodes {
		us = append(us, fmt.Sprintf("nats://127.0.0.1:%d", n.client))
	}
	return strings.Join(us, ",")
}

// startNATSCluster runs n nats-server processes with JetStream, routed to
// each other (n = 1: a single server), until the test ends.
func startNATSCluster(t testing.TB, n int) *natsCluster {
	t.Helper()
	bin := natsServerBin(t)
	ports := freePorts(t, 2*n)
	c := &natsCluster{}
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i]))
	}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		dir := filepath.Join(t.TempDir(), name)
		args := []string{"-n", name, "-a", "127.0.0.1", "-p", fmt.Sprint(ports[i]), "-js", "-sd", dir}
		if n > 1 {
			args = append(args, "--cluster_name", "holo-test", "--cluster", routes[i], "--routes", strings.Join(routes, ","),
				// Clients use the URLs they are given only, so a test can
				// cut one off through a proxy.
				"--no_advertise=true")
		}
		node := &natsNode{name: name, args: args, client: ports[i], bin: bin, dir: dir, out: &testbin.Output{}, clusterOf: c}
		c.nodes = append(c.nodes, node)
		node.start(t)
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, node := range c.nodes {
			wg.Go(node.stop)
		}
		wg.Wait()
	})
	for _, node := range c.nodes {
		node.waitListening(t)
	}
	registerExternal(c.URL(), externalCreds(t, t.TempDir()))
	return c
}

func (n *natsNode) start(t testing.TB) {
	t.Helper()
	cmd := exec.Command(n.bin, n.args...)
	cmd.Stdout, cmd.Stderr = n.out, n.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	n.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.mu.Unlock()
}

func (n *natsNode) waitListening(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n.client))
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server %s not listening: %s", n.name, n.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill stops the node with SIGKILL.
func (n *natsNode) kill() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

func (n *natsNode) stop() {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// proxy forwards TCP connections to target until cut: then it drops
// every connection and refuses new ones until healed. A gateway joined
// through it is partitioned from the engine by cut.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cutOff bool
	conns  []net.Conn
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	registerAlias(ln.Addr().String(), target)
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cutOff {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

// URL is the proxy's address as an engine URL.
func (p *proxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutOff = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// retarget sends new connections to target (a process restarted on
// another port), dropping the ones to the old.
func (p *proxy) retarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) heal() {
	p.mu.Lock()
	p.cutOff = false
	p.mu.Unlock()
}
