package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// errNotHealthy is a probe that got an answer other than 200.
var errNotHealthy = errors.New("not healthy")

// runHealth is `holo-gateway health`: it asks a running gateway's
// /healthz (or /readyz with --ready), prints the answer and succeeds only
// on 200. The container image's HEALTHCHECK and the compose file use it
// (the image has no shell and no curl).
func runHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("holo-gateway health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	base := fs.String("url", "http://127.0.0.1:8480", "the gateway's API base URL (https:// with --tls-cert)")
	ready := fs.Bool("ready", false, "ask /readyz (store, drivers, MQTT broker) instead of /healthz (alive)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	ca := fs.String("ca", "", "CA certificate (PEM) that signed the gateway's TLS certificate")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	client := &http.Client{Timeout: *timeout}
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%w: --ca %s holds no PEM certificate", errUsage, *ca)
		}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	path := "/healthz"
	if *ready {
		path = "/readyz"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(*base, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("%w: --url: %v", errUsage, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	fmt.Fprint(stdout, string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: %s %s", errNotHealthy, path, resp.Status)
	}
	return nil
}
