package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
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
	replicas              int
	heartbeat, deadAfter  time.Duration
	lease                 time.Duration
	join                  time.Duration
}

func addClusterFlags(fs *flag.FlagSet, f *clusterFlags) {
	fs.StringVar(&f.name, "name", "", "this gateway's name in the cluster (letters, digits, '-', '_'); required with --cluster")
	fs.StringVar(&f.url, "cluster", "", "join a cluster of gateways: \"embedded\" runs a single-node engine here and prints the URL others join with; "+
		"else the engine's URLs (nats://[token@]host:port,...). Without it the gateway runs alone")
	fs.StringVar(&f.listen, "cluster-listen", cluster.DefaultListen, "the embedded engine's client address (host:port; port 0 picks one)")
	fs.StringVar(&f.ca, "cluster-ca", "", "CA certificate (PEM) of the engine's servers (tls:// URLs)")
	fs.IntVar(&f.replicas, "cluster-replicas", 0, "copies of each bucket and stream the engine keeps (0: 3 on a clustered engine, else 1)")
	fs.DurationVar(&f.heartbeat, "cluster-heartbeat", cluster.DefaultHeartbeat, "how often this gateway tells the cluster it is alive")
	fs.DurationVar(&f.deadAfter, "cluster-dead-after", cluster.DefaultDeadAfter, "a gateway not heard for this long is taken for dead (its LAN boards move)")
	fs.DurationVar(&f.lease, "cluster-lease", cluster.DefaultLease, "the rollout coordinator's lease: another gateway takes over this long after it stops renewing")
	fs.DurationVar(&f.join, "cluster-join-timeout", 30*time.Second, "how long to wait for the engine at start")
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
	if j := eng.JoinURL(); j != "" {
		lines = append(lines, "cluster:  others join with --cluster "+j+"  (the URL holds the engine's token: keep it secret)")
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
