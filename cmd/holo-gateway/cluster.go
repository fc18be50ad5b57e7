package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/cluster"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// clusterFlags join the gateway to a cluster of gateways (gateway/cluster,
// docs/cluster.md).
type clusterFlags struct {
	name, url, listen, ca string
	// file holds the engine URLs with their credential (--cluster-file);
	// joinFile is where an embedded engine's join URL is written.
	file, joinFile string
	// argvSecret: --cluster itself held a credential (warned).
	argvSecret           bool
	replicas             int
	heartbeat, deadAfter time.Duration
	lease                time.Duration
	join                 time.Duration
}

func addClusterFlags(fs *flag.FlagSet, f *clusterFlags) {
	fs.StringVar(&f.name, "name", "", "this gateway's name in the cluster (letters, digits, '-', '_'); required with --cluster")
	fs.StringVar(&f.url, "cluster", "", "join a cluster of gateways: \"embedded\" runs a single-node engine here and writes the URL others join with to --cluster-join-file; "+
		"else the engine's URLs (nats://host:port,...; a URL with a credential goes in --cluster-file or $HOLO_CLUSTER). Without it the gateway runs alone")
	fs.StringVar(&f.file, "cluster-file", "", "file (mode 0600) holding the engine's URLs with their credential (nats://token@host:port,...), as an embedded engine writes them; or $HOLO_CLUSTER")
	fs.StringVar(&f.joinFile, "cluster-join-file", "", "where an embedded engine writes the URL others join with (mode 0600; default DATA/"+ClusterJoinFile+"); never printed")
	fs.StringVar(&f.listen, "cluster-listen", cluster.DefaultListen, "the embedded engine's client address (host:port; port 0 picks one)")
	fs.StringVar(&f.ca, "cluster-ca", "", "CA certificate (PEM) of the engine's servers (tls:// URLs)")
	fs.IntVar(&f.replicas, "cluster-replicas", 0, "copies of each bucket and stream the engine keeps (0: 3 on a clustered engine, else 1)")
	fs.DurationVar(&f.heartbeat, "cluster-heartbeat", cluster.DefaultHeartbeat, "how often this gateway tells the cluster it is alive")
	fs.DurationVar(&f.deadAfter, "cluster-dead-after", cluster.DefaultDeadAfter, "a gateway not heard for this long is taken for dead (its LAN boards move)")
	fs.DurationVar(&f.lease, "cluster-lease", cluster.DefaultLease, "the rollout coordinator's lease: another gateway takes over this long after it stops renewing")
	fs.DurationVar(&f.join, "cluster-join-timeout", 30*time.Second, "how long to wait for the engine at start")
}

// ClusterJoinFile is the default name, in the data directory, of the file
// an embedded engine's join URL is written to.
const ClusterJoinFile = "cluster-join"

// resolve takes the engine URLs from --cluster-file or $HOLO_CLUSTER when
// --cluster does not give them (one of the three), and fills defaults.
func (f *clusterFlags) resolve(data string) error {
	env := os.Getenv("HOLO_CLUSTER")
	if f.url != "" && (f.file != "" || env != "") || f.file != "" && env != "" {
		return fmt.Errorf("%w: give the cluster once: --cluster, --cluster-file or $HOLO_CLUSTER", errUsage)
	}
	switch {
	case f.file != "":
		st, err := os.Stat(f.file)
		if err != nil {
			return fmt.Errorf("%w: --cluster-file: %v", errUsage, err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			return fmt.Errorf("%w: --cluster-file %s is readable by others (mode %v): chmod 0600 it", errUsage, f.file, st.Mode().Perm())
		}
		raw, err := os.ReadFile(f.file)
		if err != nil {
			return fmt.Errorf("%w: --cluster-file: %v", errUsage, err)
		}
		f.url = strings.TrimSpace(string(raw))
		if f.url == "" || strings.ContainsAny(f.url, "\r\n") {
			return fmt.Errorf("%w: --cluster-file %s: want one line holding the engine's URLs", errUsage, f.file)
		}
	case env != "":
		f.url = strings.TrimSpace(env)
	case f.url != "":
		f.argvSecret = hasCredential(f.url)
	}
	if f.joinFile == "" {
		f.joinFile = filepath.Join(data, ClusterJoinFile)
	}
	return nil
}

// hasCredential reports whether engine URLs carry a user or token.
func hasCredential(urls string) bool {
	for _, u := range strings.Split(urls, ",") {
		if p, err := url.Parse(strings.TrimSpace(u)); err == nil && p.User != nil {
			return true
		}
	}
	return false
}

// check refuses bad cluster flags before anything starts.
func (f clusterFlags) check() error {
	if f.url == "" {
		if f.name != "" {
			return fmt.Errorf("%w: --name is for a gateway of a cluster: give --cluster too", errUsage)
		}
		return nil
	}
	if f.name == "" {
		return fmt.Errorf("%w: --cluster needs --name (this gateway's name in the cluster)", errUsage)
	}
	if err := cluster.Check(f.name, f.url); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if f.heartbeat <= 0 || f.deadAfter <= 2*f.heartbeat {
		return fmt.Errorf("%w: --cluster-dead-after must be more than twice --cluster-heartbeat", errUsage)
	}
	if f.lease <= 0 {
		return fmt.Errorf("%w: --cluster-lease must be positive", errUsage)
	}
	return nil
}

// newCluster joins the cluster given --cluster: it opens (or runs) the
// engine and puts the cluster in env, so the API answers for the whole
// installation. Without --cluster it does nothing.
func newCluster(ctx context.Context, e *env) (component, error) {
	f := e.opts.cluster
	if f.url == "" {
		return component{name: "cluster"}, nil
	}
	jctx, cancel := context.WithTimeout(ctx, f.join)
	defer cancel()
	eng, err := cluster.OpenEngine(jctx, cluster.EngineOptions{Name: f.name, URL: f.url, Listen: f.listen,
		Dir: filepath.Join(e.opts.data, "engine"), Replicas: f.replicas, CA: f.ca, Log: e.log.With("component", "cluster")})
	if err != nil {
		if errors.Is(err, cluster.ErrConfig) {
			return component{}, fmt.Errorf("%w: %w", errUsage, err)
		}
		return component{}, err
	}
	cl, err := cluster.New(cluster.Options{Engine: eng, Local: e.fleet, Log: e.log.With("component", "cluster"), Lines: len(e.wiring.lines),
		Heartbeat: f.heartbeat, DeadAfter: f.deadAfter, Lease: f.lease})
	if err != nil {
		eng.Close()
		return component{}, err
	}
	e.cluster = cl
	if e.tokens != nil {
		cl.ShareTokens(e.tokens)
	}
	// Every series the gateway's components export carries its name.
	e.registerer = prometheus.WrapRegistererWith(prometheus.Labels{"gateway": f.name}, e.registerer)
	lines := []string{fmt.Sprintf("cluster:  gateway %q on the %s (%d replicas)", f.name, eng.Where(), eng.Replicas())}
	if f.argvSecret {
		e.log.Warn("cluster: --cluster holds a credential, which ps and shell history show; give it in --cluster-file or $HOLO_CLUSTER (the argv form will be refused)")
	}
	if j := eng.JoinURL(); j != "" {
		// The URL holds the engine's token: a file only the gateway's
		// user reads, never stdout (the journal, docker logs).
		if err := writeSecretFile(f.joinFile, j); err != nil {
			eng.Close()
			return component{}, fmt.Errorf("cluster: join URL: %w", err)
		}
		lines = append(lines, "cluster:  others join with --cluster-file "+f.joinFile+"  (a copy of it, mode 0600: it holds the engine's token)")
	}
	run := func(ctx context.Context) error {
		defer eng.Close()
		return cl.Run(ctx)
	}
	ready := api.ReadyFunc(func(context.Context) error {
		if st := cl.Status(); st.Partitioned {
			return errors.New("partitioned: " + st.Reason + " (this gateway serves its own boards only)")
		}
		return nil
	})
	if err := e.registerer.Register(cl.Collector()); err != nil {
		return component{}, err
	}
	return component{name: "cluster", run: run, banner: lines, ready: ready}, nil
}

// service is what the API serves: the whole installation through the
// cluster, or this gateway's fleet when it runs alone.
func (e *env) service() fleet.Service {
	if e.cluster != nil {
		return e.cluster
	}
	return e.fleet
}

// clusterAPI is what the API's cluster calls serve: nil when the gateway
// runs alone.
func (e *env) clusterAPI() api.Cluster {
	if e.cluster == nil {
		return nil
	}
	return e.cluster
}
