package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
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
	credentials           string
	cert, key             string
	replicas              int
	heartbeat, deadAfter  time.Duration
	lease                 time.Duration
	join                  time.Duration
	queueMax              int
}

func addClusterFlags(fs *flag.FlagSet, f *clusterFlags) {
	fs.StringVar(&f.name, "name", "", "this gateway's name in the cluster (letters, digits, '-', '_'); required with --cluster")
	fs.StringVar(&f.url, "cluster", "", "join a cluster of gateways: \"embedded\" runs a single-node engine here and prints the URL others join with; "+
		"else the engine's URLs (nats://host:port,... or tls://), without credentials (see --cluster-credentials). Without it the gateway runs alone")
	fs.StringVar(&f.credentials, "cluster-credentials", os.Getenv(cluster.CredentialsEnv), "file (mode 0600) with this gateway's engine login (user=, password= or token=) and the cluster secret (secret=); "+
		"default $"+cluster.CredentialsEnv+". Made for each gateway by `holo-gateway cluster credentials` on the gateway running the embedded engine")
	fs.StringVar(&f.listen, "cluster-listen", cluster.DefaultListen, "the embedded engine's client address (host:port; port 0 picks one); loopback unless told otherwise: "+
		"for gateways on other hosts give a reachable address and --cluster-cert/--cluster-key")
	fs.StringVar(&f.cert, "cluster-cert", "", "the embedded engine's TLS certificate (PEM); with --cluster-key it takes TLS clients only (others verify it with --cluster-ca)")
	fs.StringVar(&f.key, "cluster-key", "", "the embedded engine's TLS private key (PEM)")
	fs.StringVar(&f.ca, "cluster-ca", "", "CA certificate (PEM) of the engine's servers (tls:// URLs, or an embedded engine with --cluster-cert)")
	fs.IntVar(&f.replicas, "cluster-replicas", 0, "copies of each bucket and stream the engine keeps (0: 3 on a clustered engine, else 1)")
	fs.DurationVar(&f.heartbeat, "cluster-heartbeat", cluster.DefaultHeartbeat, "how often this gateway tells the cluster it is alive")
	fs.DurationVar(&f.deadAfter, "cluster-dead-after", cluster.DefaultDeadAfter, "a gateway not heard for this long is taken for dead (its LAN boards move)")
	fs.DurationVar(&f.lease, "cluster-lease", cluster.DefaultLease, "the rollout coordinator's lease: another gateway takes over this long after it stops renewing")
	fs.DurationVar(&f.join, "cluster-join-timeout", 30*time.Second, "how long to wait for the engine at start")
	fs.IntVar(&f.queueMax, "cluster-queue-max", cluster.DefaultQueueMax, "events of this gateway's boards kept in memory while the engine cannot be reached; beyond it the oldest are dropped (and counted)")
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
	if f.url == cluster.Embedded {
		if f.credentials != "" {
			return fmt.Errorf("%w: --cluster-credentials (or $%s) is for joining an engine; the embedded engine makes its own", errUsage, cluster.CredentialsEnv)
		}
		if (f.cert == "") != (f.key == "") {
			return fmt.Errorf("%w: --cluster-cert and --cluster-key go together", errUsage)
		}
	} else {
		if f.cert != "" || f.key != "" {
			return fmt.Errorf("%w: --cluster-cert and --cluster-key are the embedded engine's (--cluster embedded)", errUsage)
		}
		if f.credentials == "" {
			return fmt.Errorf("%w: --cluster needs --cluster-credentials FILE (or $%s): this gateway's engine login and the cluster secret",
				errUsage, cluster.CredentialsEnv)
		}
	}
	if f.heartbeat <= 0 || f.deadAfter <= 2*f.heartbeat {
		return fmt.Errorf("%w: --cluster-dead-after must be more than twice --cluster-heartbeat", errUsage)
	}
	if f.lease <= 0 {
		return fmt.Errorf("%w: --cluster-lease must be positive", errUsage)
	}
	if f.queueMax <= 0 {
		return fmt.Errorf("%w: --cluster-queue-max must be positive", errUsage)
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
	var creds cluster.Credentials
	if f.credentials != "" {
		var err error
		if creds, err = cluster.ReadCredentials(f.credentials); err != nil {
			return component{}, fmt.Errorf("%w: --cluster-credentials: %w", errUsage, err)
		}
	}
	engineDir := filepath.Join(e.opts.data, "engine")
	eng, err := cluster.OpenEngine(jctx, cluster.EngineOptions{Name: f.name, URL: f.url, Credentials: creds, Listen: f.listen,
		Cert: f.cert, Key: f.key, Dir: engineDir, Replicas: f.replicas, CA: f.ca, Log: e.log.With("component", "cluster")})
	if err != nil {
		if errors.Is(err, cluster.ErrConfig) {
			return component{}, fmt.Errorf("%w: %w", errUsage, err)
		}
		return component{}, err
	}
	cl, err := cluster.New(cluster.Options{Engine: eng, Local: e.fleet, Guard: e.guard, Log: e.log.With("component", "cluster"), Lines: len(e.wiring.lines),
		Heartbeat: f.heartbeat, DeadAfter: f.deadAfter, Lease: f.lease, QueueMax: f.queueMax})
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
		// The hint names where each gateway's credentials file is made,
		// never a secret.
		lines = append(lines, fmt.Sprintf("cluster:  others join with --cluster %s --cluster-credentials %s", j, cluster.CredentialsPath(engineDir, "NAME")),
			fmt.Sprintf("cluster:  (make NAME's file, one per gateway, with: holo-gateway cluster credentials --data %s NAME; copy it to that gateway, mode 0600)", e.opts.data))
		if !loopbackListen(f.listen) && f.cert == "" {
			lines = append(lines, "cluster:  WARNING: the engine listens beyond loopback without TLS (--cluster-cert, --cluster-key): logins and traffic cross the network in clear text")
		}
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

// loopbackListen reports whether an engine listen address is on loopback
// only.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// runCluster manages the engine users of the embedded engine kept under
// --data: one per gateway, each with its credentials file. It works while
// the gateway runs (the engine reloads its users).
//
//	holo-gateway cluster credentials --data DIR [--out FILE] NAME
//	holo-gateway cluster revoke --data DIR NAME
//	holo-gateway cluster users --data DIR
func runCluster(args []string, stdout, stderr io.Writer) error {
	sub, fs, err := subcommand("cluster", "credentials|revoke|users --data DIR [NAME]", []string{"credentials", "revoke", "users"}, args, stderr)
	if err != nil {
		return err
	}
	data := fs.String("data", "", "directory of the gateway running the embedded engine")
	out := fs.String("out", "", "where to write the credentials file (credentials; default DATA/engine/creds/NAME.creds)")
	if err := parseSubcommand(fs, args[1:]); err != nil {
		return err
	}
	dir := filepath.Join(*data, "engine")
	if sub == "users" {
		names, err := cluster.EngineUsers(dir)
		if err != nil {
			return err
		}
		for _, n := range names {
			fmt.Fprintln(stdout, n)
		}
		return nil
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: cluster %s --data DIR NAME", errUsage, sub)
	}
	name := fs.Arg(0)
	switch sub {
	case "credentials":
		path, err := cluster.MintCredentials(dir, name, *out)
		if err != nil {
			if errors.Is(err, cluster.ErrConfig) {
				return fmt.Errorf("%w: %w", errUsage, err)
			}
			return err
		}
		fmt.Fprintf(stderr, "engine user %q made (a running engine lets it in within a second); its credentials file, mode 0600:\n", name)
		fmt.Fprintln(stdout, path)
	case "revoke":
		if err := cluster.RevokeCredentials(dir, name); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "engine user %q revoked: a running engine closes its connection within a second\n", name)
	}
	return nil
}
