package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/cluster"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		ok        bool
	}{
		{"gw-hall", "embedded", true},
		{"gw_1", "nats://10.0.0.1:4222", true},
		{"gw", "nats://a:4222,nats://b:4222, tls://c:4222", true},
		{"gw", "nats://tok@a:4222", false},
		{"gw", "nats://a:4222,nats://u:p@b:4222", false},
		{"", "embedded", false},
		{"gw.hall", "embedded", false},
		{"gw hall", "embedded", false},
		{"gw*", "embedded", false},
		{strings.Repeat("g", 65), "embedded", false},
		{"gw", "http://a:4222", false},
		{"gw", "a:4222", false},
		{"gw", "", false},
	} {
		err := cluster.Check(tc.name, tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q, %q) = %v, want ok %v", tc.name, tc.url, err, tc.ok)
		}
		if err != nil && !errors.Is(err, cluster.ErrConfig) {
			t.Errorf("Check(%q, %q) = %v, not ErrConfig", tc.name, tc.url, err)
		}
	}
}

// TestEngines opens the embedded engine and a three-node cluster of the
// external nats-server, and uses on each what the cluster relies on: a
// KV bucket with watch and compare-and-set, and a stream read back by
// sequence.
func TestEngines(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	t.Run("embedded", func(t *testing.T) {
		dir := t.TempDir()
		e, err := cluster.OpenEngine(ctx, cluster.EngineOptions{Name: "gw1", URL: cluster.Embedded, Listen: "127.0.0.1:0", Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if !strings.HasPrefix(e.JoinURL(), "nats://") || e.Replicas() != 1 {
			t.Fatalf("join URL %q, replicas %d", e.JoinURL(), e.Replicas())
		}
		useEngine(ctx, t, e)
		// Another gateway joins with the URL the first printed and the
		// credentials made for it; with a wrong password it is refused.
		path, err := cluster.MintCredentials(dir, "gw2", "")
		if err != nil {
			t.Fatal(err)
		}
		creds, err := cluster.ReadCredentials(path)
		if err != nil {
			t.Fatal(err)
		}
		o, err := cluster.OpenEngine(ctx, cluster.EngineOptions{Name: "gw2", URL: e.JoinURL(), Credentials: creds})
		if err != nil {
			t.Fatal(err)
		}
		o.Close()
		creds.Password += "x"
		short, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		if o, err := cluster.OpenEngine(short, cluster.EngineOptions{Name: "gw2", URL: e.JoinURL(), Credentials: creds}); err == nil {
			o.Close()
			t.Fatal("joined with a wrong password")
		}
	})
	t.Run("three-nodes", func(t *testing.T) {
		c := startNATSCluster(t, 3)
		e, err := cluster.OpenEngine(ctx, cluster.EngineOptions{Name: "gw1", URL: c.URL(), Credentials: cluster.Credentials{Secret: "s"}})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		if e.Replicas() != 3 {
			t.Fatalf("replicas %d on a three-node cluster", e.Replicas())
		}
		useEngine(ctx, t, e)
	})
}

func useEngine(ctx context.Context, t *testing.T, e *cluster.Engine) {
	t.Helper()
	js := e.JetStream()
	var kv jetstream.KeyValue
	var err error
	// A new cluster elects its meta leader first: retry until it has one.
	deadline := time.Now().Add(20 * time.Second)
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		kv, err = js.CreateOrUpdateKeyValue(actx, jetstream.KeyValueConfig{Bucket: "t_kv", Replicas: e.Replicas(), Storage: jetstream.FileStorage})
		acancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rev, err := kv.Create(ctx, "a", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "a", []byte("2")); err == nil {
		t.Fatal("Create of an existing key succeeded")
	}
	if _, err := kv.Update(ctx, "a", []byte("2"), rev); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, "a", []byte("3"), rev); err == nil {
		t.Fatal("Update with a stale revision succeeded")
	}
	// The watch hands out the key's values in order up to the latest;
	// one superseded while the watch's consumer was reset (a missed
	// heartbeat under load: it starts again from each key's last value)
	// may be left out, as the cluster's watchers expect.
	var seen []string
	for u := range w.Updates() {
		if u == nil {
			continue
		}
		seen = append(seen, string(u.Value()))
		if string(u.Value()) == "2" {
			break
		}
	}
	if got := strings.Join(seen, ","); got != "1,2" && got != "2" {
		t.Fatalf("watch saw %v", seen)
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "T_EV", Subjects: []string{"t.ev.>"}, Replicas: e.Replicas(), Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"x", "y", "z"} {
		if _, err := js.Publish(ctx, "t.ev.gw."+m, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 2})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		md, _ := m.Metadata()
		got = append(got, string(m.Data())+":"+strings.TrimSpace(string(rune('0'+md.Sequence.Stream))))
	}
	if strings.Join(got, ",") != "y:2,z:3" {
		t.Fatalf("read back %v", got)
	}
}
