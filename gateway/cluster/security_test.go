package cluster_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/cluster"
)

// rawClient connects to an engine as a bare NATS client with the
// credentials file at path (no cluster secret used), retrying while the
// engine has not loaded the user yet.
func rawClient(t *testing.T, joinURL, path, name string) *nats.Conn {
	t.Helper()
	c, err := cluster.ReadCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	var nc *nats.Conn
	eventually(t, 20*time.Second, "raw engine client connects", func() error {
		nc, err = nats.Connect(joinURL, nats.UserInfo(c.User, c.Password), nats.CustomInboxPrefix(cluster.InboxPrefix(name)))
		return err
	})
	t.Cleanup(nc.Close)
	return nc
}

// auditHas waits until g's audit log holds a record with every one of
// parts.
func auditHas(t *testing.T, g *gwProc, parts ...string) {
	t.Helper()
	eventually(t, 20*time.Second, g.name+" audits "+strings.Join(parts, ", "), func() error {
		code, b := g.rest(t, "GET", "/v1/audit?limit=1000", nil)
		if code != 200 {
			return fmt.Errorf("audit: %d %s", code, b)
		}
		var entries []json.RawMessage
		if err := json.Unmarshal(b, &entries); err != nil {
			return err
		}
		for _, e := range entries {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(string(e), p)
			}
			if ok {
				return nil
			}
		}
		return fmt.Errorf("no record with %q in %d records", parts, len(entries))
	})
}

// TestEngineClientIsNotAGateway: a bare NATS client holding a gateway's
// engine login (not the cluster secret) can neither make a token the
// gateways honour nor run a board call through the routing subject; both
// are refused and audited.
func TestEngineClientIsNotAGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a gateway process")
	}
	t.Parallel()
	s := startSite(t, 0, 1)
	gw1 := startGatewayAuth(t, "gw1", "embedded", s, true)
	gw1.token = gw1.admin
	var board string
	eventually(t, 30*time.Second, "gw1 lists its board", func() error {
		bs := gw1.boards(t, "")
		if len(bs) != 1 || !bs[0].Online {
			return fmt.Errorf("boards %+v", bs)
		}
		board = bs[0].ID
		return nil
	})
	creds, err := cluster.MintCredentials(filepath.Join(gw1.data, "engine"), "gw2", filepath.Join(t.TempDir(), "gw2.creds"))
	if err != nil {
		t.Fatal(err)
	}
	nc := rawClient(t, gw1.join, creds, "gw2")

	// A token record made up by the engine client: an admin token whose
	// secret it knows.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var kv jetstream.KeyValue
	eventually(t, 20*time.Second, "tokens bucket", func() error {
		kv, err = js.KeyValue(ctx, cluster.BucketTokens)
		return err
	})
	secret := auth.SecretPrefix + "forged-by-an-engine-client"
	rec, _ := json.Marshal(map[string]any{"name": "intruder", "role": "admin", "sha256": auth.Hash(secret), "created": time.Now()})
	if _, err := kv.Put(ctx, "intruder", rec); err != nil {
		t.Fatal(err)
	}
	auditHas(t, gw1, `"intruder"`, `"cluster"`, "not signed")
	gw1.token = secret
	if code, b := gw1.rest(t, "GET", "/v1/whoami", nil); code != 401 {
		t.Errorf("the forged token is honoured: %d %s", code, b)
	}
	gw1.token = gw1.admin

	// A board call through the routing subject, claiming an admin.
	req, _ := json.Marshal(map[string]any{"op": "call", "id": board, "method": "GET", "path": "/api/v1/info",
		"from": "gw2", "boot": "x", "to": "gw1", "at": time.Now(),
		"caller": map[string]any{"name": "admin-gw1", "role": "admin", "token": true, "via": "gw2"}})
	m, err := nc.RequestWithContext(ctx, "holo.gw.gw1.rpc", req)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Err *struct{ Kind, Message string } `json:"err"`
	}
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Err == nil || rep.Err.Kind != "unauthenticated" {
		t.Errorf("an unsigned routed call ran: %s", m.Data)
	}
	auditHas(t, gw1, `"cluster"`, "routed call", "came in on gateway gw2", "not signed", board)

	// Another gateway's routed requests are out of the client's reach.
	if _, err := nc.SubscribeSync("holo.gw.gw1.rpc"); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	eventually(t, 10*time.Second, "the engine refuses gw2's login gw1's requests", func() error {
		if le := nc.LastError(); le == nil || !strings.Contains(le.Error(), "Permissions Violation") {
			return fmt.Errorf("last error %v", le)
		}
		return nil
	})
}

// TestRoutedCallCarriesTheCaller: a board call made on one gateway for
// another's board is decided and audited again on the owner, with the
// caller, the gateway it came in on and the owner.
func TestRoutedCallCarriesTheCaller(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gateway processes")
	}
	t.Parallel()
	gw1, gw2, board := securePair(t, "gw2")
	var made struct {
		Secret string `json:"secret"`
	}
	gw1.restJSON(t, "POST", "/v1/tokens", map[string]string{"name": "show", "role": "operator"}, &made)
	gw1.token = made.Secret
	var res struct {
		Results []struct{ Board, Error string } `json:"results"`
	}
	gw1.restJSON(t, "POST", "/v1/actions", map[string]any{"kind": "leds", "selector": map[string]any{"boards": []string{board}},
		"body": map[string]any{"mode": "solid", "brightness": 12}}, &res)
	if len(res.Results) != 1 || res.Results[0].Error != "" {
		t.Fatalf("action: %+v", res.Results)
	}
	auditHas(t, gw2, `"show"`, `"operator"`, "routed do: came in on gateway gw1, owner gw2")

}

// TestRevokedGatewayRefused: a gateway's engine user revoked with
// holo-gateway cluster revoke is cut off and refused by the engine.
func TestRevokedGatewayRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gateway processes")
	}
	t.Parallel()
	gw1 := startGateway(t, "gw1", "embedded", nil)
	gw2 := startGateway(t, "gw2", gw1.join, nil)
	creds := gw2.args[slices.Index(gw2.args, "--cluster-credentials")+1]
	eventually(t, 30*time.Second, "gw1 sees gw2", func() error {
		var st struct {
			Gateways []struct {
				Name  string `json:"name"`
				Alive bool   `json:"alive"`
			} `json:"gateways"`
		}
		if err := httpJSON(gw1.base()+"/v1/cluster", &st); err != nil {
			return err
		}
		for _, g := range st.Gateways {
			if g.Name == "gw2" && g.Alive {
				return nil
			}
		}
		return fmt.Errorf("%+v", st)
	})
	out, err := exec.Command(gatewayBinary(t), "cluster", "revoke", "--data", gw1.data, "gw2").CombinedOutput()
	if err != nil {
		t.Fatalf("cluster revoke: %v %s", err, out)
	}
	c, err := cluster.ReadCredentials(creds)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the engine refuses gw2's login", func() error {
		nc, err := nats.Connect(gw1.join, nats.UserInfo(c.User, c.Password), nats.MaxReconnects(0))
		if err == nil {
			nc.Close()
			return fmt.Errorf("gw2's login still accepted")
		}
		if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			return fmt.Errorf("not an authorization error: %v", err)
		}
		return nil
	})
	eventually(t, 20*time.Second, "gw2 is cut off", func() error {
		code, b := gw2.rest(t, "GET", "/readyz", nil)
		if code == 200 {
			return fmt.Errorf("gw2 ready: %s", b)
		}
		return nil
	})
}

// TestBannerKeepsSecrets: the banner's join hint names a file, and
// neither the first gateway's nor a joining one's banner holds a secret.
func TestBannerKeepsSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gateway processes")
	}
	t.Parallel()
	gw1 := startGateway(t, "gw1", "embedded", nil)
	secret, err := os.ReadFile(filepath.Join(gw1.data, "engine", cluster.SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(gw1.out.String(), "--cluster-credentials "+filepath.Join(gw1.data, "engine", "creds")) {
		t.Errorf("the join hint names no credentials file:\n%s", gw1.out.String())
	}
	if strings.Contains(gw1.join, "@") {
		t.Fatalf("the join URL holds credentials: %s", gw1.join)
	}
	gw2 := startGateway(t, "gw2", gw1.join, nil)
	c, err := cluster.ReadCredentials(gw2.args[slices.Index(gw2.args, "--cluster-credentials")+1])
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []*gwProc{gw1, gw2} {
		for _, s := range []string{strings.TrimSpace(string(secret)), c.Password} {
			if strings.Contains(g.out.String(), s) || strings.Contains(g.log.String(), s) {
				t.Errorf("%s's output holds a secret:\n%s", g.name, g.out.String())
			}
		}
	}
}

// TestEngineTLS: an embedded engine with a certificate of a CA made here
// takes TLS clients that verify it, and refuses clear text.
func TestEngineTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, cert, key := makeCA(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	edir := filepath.Join(dir, "engine")
	e, err := cluster.OpenEngine(ctx, cluster.EngineOptions{Name: "gw1", URL: cluster.Embedded, Listen: "127.0.0.1:0",
		Dir: edir, Cert: cert, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !strings.HasPrefix(e.JoinURL(), "tls://") {
		t.Fatalf("join URL %s", e.JoinURL())
	}
	path, err := cluster.MintCredentials(edir, "gw2", "")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cluster.ReadCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	o, err := cluster.OpenEngine(ctx, cluster.EngineOptions{Name: "gw2", URL: e.JoinURL(), Credentials: creds, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if !o.Conn().TLSRequired() {
		t.Error("gw2 is not on TLS")
	}
	if _, err := o.JetStream().CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "t_tls"}); err != nil {
		t.Fatal(err)
	}

	// Clear text: the engine asks for TLS and drops a client that
	// logs in without it.
	host := strings.TrimPrefix(e.JoinURL(), "tls://")
	conn, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(conn)
	info, err := rd.ReadString('\n')
	if err != nil || !strings.Contains(info, `"tls_required":true`) {
		t.Fatalf("INFO %q %v", info, err)
	}
	fmt.Fprintf(conn, "CONNECT {\"user\":%q,\"pass\":%q,\"verbose\":false}\r\nPING\r\n", creds.User, creds.Password)
	for {
		l, err := rd.ReadString('\n')
		if err != nil {
			break // dropped
		}
		if strings.HasPrefix(l, "PONG") {
			t.Fatal("a clear-text client was let in")
		}
	}
	// A client that does not know the CA does not trust the engine.
	if nc, err := nats.Connect(e.JoinURL(), nats.UserInfo(creds.User, creds.Password), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Error("connected without the CA")
	}
}

// makeCA writes a CA and a certificate for 127.0.0.1 it signed, in dir.
func makeCA(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "holo test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "engine"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("engine.pem", "CERTIFICATE", der), write("engine.key", "EC PRIVATE KEY", kder)
}

// TestRoutedInstallationCarriesTheCaller: what an installation request
// made on one gateway asks of another (an export of its boards, the run
// of a new revision on them) is decided and audited on that gateway for
// the caller who made it, with the request id the caller's gateway gave
// it, not as the routing gateway's own work; and a routed export for a
// viewer is refused by the owner itself and audited with the viewer.
func TestRoutedInstallationCarriesTheCaller(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gateway processes")
	}
	gw1, gw2, board := securePair(t, "gw1")
	tokens := map[string]string{}
	for name, role := range map[string]string{"ada": "admin", "vera": "viewer"} {
		var made struct {
			Secret string `json:"secret"`
		}
		gw2.restJSON(t, "POST", "/v1/tokens", map[string]string{"name": name, "role": role}, &made)
		tokens[name] = made.Secret
	}
	desc := map[string]any{"version": 1,
		"profiles":    map[string]any{"p": map[string]any{"settings": map[string]any{"screen": map[string]any{"backlight": 33}}}},
		"assignments": []map[string]any{{"profile": "p", "board": board}}}

	// A viewer's apply is refused where it came in; no revision exists.
	gw2.token, gw2.requestID = tokens["vera"], "vera-apply-1"
	eventually(t, 20*time.Second, "gw2 knows vera's token", func() error {
		if code, b := gw2.rest(t, "POST", "/v1/installation/apply", desc); code != 403 {
			return fmt.Errorf("vera's apply: %d %s", code, b)
		}
		return nil
	})
	gw2.token = gw2.admin // reading the audit log is an admin's
	auditHas(t, gw2, `"token":"vera"`, `"code":"PermissionDenied"`, `"request_id":"vera-apply-1"`)

	// An admin's apply on gw2 runs on gw1's board, audited there for
	// her, with her request id.
	gw2.token, gw2.requestID = tokens["ada"], "ada-apply-1"
	gw2.restJSON(t, "POST", "/v1/installation/apply", desc, nil)
	auditHas(t, gw1, `"token":"ada"`, `"role":"admin"`, `"request_id":"ada-apply-1"`,
		"installation.apply_board (applied on gateway gw2)", board)

	// Her export on gw2 reads gw1's board through gw1, audited there
	// for her (before the fix: as "gateway gw2", without the id).
	gw2.requestID = "ada-export-1"
	gw2.restJSON(t, "POST", "/v1/installation/export", map[string]any{}, nil)
	auditHas(t, gw1, `"token":"ada"`, `"role":"admin"`, `"request_id":"ada-export-1"`,
		"routed install_export: came in on gateway gw2, owner gw1", `"code":"OK"`)

	// A routed export signed as gw2 signs one, for the viewer: gw1
	// decides it again and refuses it.
	creds, err := cluster.ReadCredentials(gw2.args[slices.Index(gw2.args, "--cluster-credentials")+1])
	if err != nil {
		t.Fatal(err)
	}
	nc := rawClient(t, gw1.join, gw2.args[slices.Index(gw2.args, "--cluster-credentials")+1], "gw2")
	m, err := nc.RequestMsg(cluster.SignedInstallExport(creds.Secret, "gw1", "gw2", "vera", "viewer", "vera-export-1"), 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Install json.RawMessage `json:"install"`
		Err     *struct {
			Kind string `json:"kind"`
		} `json:"err"`
	}
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Err == nil || rep.Err.Kind != "forbidden" || len(rep.Install) != 0 {
		t.Fatalf("a viewer's routed export: %s", m.Data)
	}
	auditHas(t, gw1, `"token":"vera"`, `"role":"viewer"`, `"request_id":"vera-export-1"`,
		"routed install_export: came in on gateway gw2, owner gw1", `"code":"PermissionDenied"`)
}

// securePair runs two gateways with tokens required (gw1 with the
// embedded engine, gw2 joining it), one board on a line of owner's ("gw1"
// or "gw2"), each gateway's token its first admin's, and waits until the
// other gateway lists the board, online and owned by owner.
func securePair(t *testing.T, owner string) (gw1, gw2 *gwProc, board string) {
	t.Helper()
	s := startSite(t, 0, 1)
	sites := map[string]*site{owner: s}
	gw1 = startGatewayAuth(t, "gw1", "embedded", sites["gw1"], true)
	gw2 = startGatewayAuth(t, "gw2", gw1.join, sites["gw2"], true)
	gw1.token, gw2.token = gw1.admin, gw2.admin
	other := map[string]*gwProc{"gw1": gw2, "gw2": gw1}[owner]
	eventually(t, 30*time.Second, other.name+" lists "+owner+"'s board", func() error {
		bs := other.boards(t, "")
		if len(bs) != 1 || !bs[0].Online || bs[0].Gateway != owner {
			return fmt.Errorf("boards %+v", bs)
		}
		board = bs[0].ID
		return nil
	})
	return gw1, gw2, board
}
