package cluster

// Engine credentials and the cluster secret.
//
// A gateway logs in to the engine with a credentials file (never a URL
// on the command line): a few "key=value" lines,
//
//	# holo-gateway cluster credentials of gateway "gw2" (keep it secret)
//	user=gw2
//	password=...
//	secret=...
//
// user and password (or token, for an engine that wants one) are the
// engine login; secret is the cluster secret: the key every gateway
// signs its routed requests and token records with (sign.go). The
// engine never sees the secret, so an engine login alone (read from a
// nats-server configuration, sniffed, or given to another program)
// neither routes a call to a gateway nor makes a token the gateways
// honour.
//
// The embedded engine keeps in its directory:
//
//	users.json      the gateways' engine users (bcrypt hashes of their
//	                passwords), one per gateway; the running engine
//	                reloads it when it changes
//	cluster.secret  the cluster secret, made on first start
//	creds/NAME.creds  credentials files minted by MintCredentials
//
// MintCredentials and RevokeCredentials edit users.json (holo-gateway
// cluster credentials|revoke); a revoked gateway's connection is closed
// at the reload and its login refused from then on.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// CredentialsEnv is the environment variable naming the credentials file
// when --cluster-credentials is not given.
const CredentialsEnv = "HOLO_CLUSTER_CREDENTIALS"

// Files under the embedded engine's directory.
const (
	UsersFile  = "users.json"
	SecretFile = "cluster.secret"
	CredsDir   = "creds"
)

// ErrCredentials: a credentials file that cannot be read or used.
var ErrCredentials = errors.New("cluster: bad credentials")

// Credentials are a gateway's engine login and the cluster secret.
type Credentials struct {
	User, Password string
	// Token is the engine's token (an engine with token login).
	Token string
	// Secret is the cluster secret (base64), the same on every gateway.
	Secret string
}

// ReadCredentials reads a credentials file.
func ReadCredentials(path string) (Credentials, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Credentials{}, fmt.Errorf("%w: %w", ErrCredentials, err)
	}
	return parseCredentials(path, raw)
}

func parseCredentials(path string, raw []byte) (Credentials, error) {
	var c Credentials
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || v == "" {
			return Credentials{}, fmt.Errorf("%w: %s line %d: want key=value", ErrCredentials, path, n)
		}
		switch k {
		case "user":
			c.User = v
		case "password":
			c.Password = v
		case "token":
			c.Token = v
		case "secret":
			c.Secret = v
		default:
			return Credentials{}, fmt.Errorf("%w: %s line %d: unknown key %q (user, password, token, secret)", ErrCredentials, path, n, k)
		}
	}
	if (c.User == "") != (c.Password == "") {
		return Credentials{}, fmt.Errorf("%w: %s: user and password go together", ErrCredentials, path)
	}
	if c.Token != "" && c.User != "" {
		return Credentials{}, fmt.Errorf("%w: %s: user/password or token, not both", ErrCredentials, path)
	}
	return c, nil
}

// Write writes the credentials file at path, mode 0600.
func (c Credentials) Write(path, comment string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n# keep it secret: it logs a gateway in to the cluster's engine and holds the cluster secret\n", comment)
	for _, kv := range [][2]string{{"user", c.User}, {"password", c.Password}, {"token", c.Token}, {"secret", c.Secret}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, "%s=%s\n", kv[0], kv[1])
		}
	}
	return writeFile0600(path, []byte(b.String()))
}

// writeFile0600 writes a file only its owner may read, replacing any
// file there at once (rename).
func writeFile0600(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// randomSecret returns n random bytes, base64 (URL alphabet, no padding).
func randomSecret(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// engineUser is a gateway's user of the embedded engine.
type engineUser struct {
	Name string `json:"name"`
	// Bcrypt is the bcrypt hash of the password.
	Bcrypt string `json:"bcrypt"`
}

type usersDoc struct {
	Users []engineUser `json:"users"`
}

func readUsers(dir string) ([]engineUser, []byte, error) {
	raw, err := os.ReadFile(filepath.Join(dir, UsersFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: %w", err)
	}
	var d usersDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, raw, fmt.Errorf("cluster: %s: %w", filepath.Join(dir, UsersFile), err)
	}
	return d.Users, raw, nil
}

func writeUsers(dir string, users []engineUser) error {
	slices.SortFunc(users, func(a, b engineUser) int { return strings.Compare(a.Name, b.Name) })
	data, err := json.MarshalIndent(usersDoc{Users: users}, "", "  ")
	if err != nil {
		return err
	}
	return writeFile0600(filepath.Join(dir, UsersFile), append(data, '\n'))
}

// loadSecret reads the cluster secret kept in dir, making it on first
// use.
func loadSecret(dir string) (string, error) {
	path := filepath.Join(dir, SecretFile)
	raw, err := os.ReadFile(path)
	if err == nil {
		if s := strings.TrimSpace(string(raw)); s != "" {
			return s, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("cluster: %w", err)
	}
	s, err := randomSecret(32)
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	if err := writeFile0600(path, []byte(s+"\n")); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	return s, nil
}

// CredentialsPath is where MintCredentials writes gateway name's file
// under the embedded engine's directory dir.
func CredentialsPath(dir, name string) string {
	return filepath.Join(dir, CredsDir, name+".creds")
}

// MintCredentials makes (or replaces) gateway name's user of the embedded
// engine kept in dir and writes its credentials file (with the cluster
// secret) to out ("" is CredentialsPath(dir, name)), mode 0600. A running
// engine lets the gateway in once it has reloaded its users (it watches
// the file). It returns the file's path.
func MintCredentials(dir, name, out string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	secret, err := loadSecret(dir)
	if err != nil {
		return "", err
	}
	users, _, err := readUsers(dir)
	if err != nil {
		return "", err
	}
	password, err := randomSecret(24)
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	hash, err := hashPassword(password)
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	users = slices.DeleteFunc(users, func(u engineUser) bool { return u.Name == name })
	users = append(users, engineUser{Name: name, Bcrypt: hash})
	if out == "" {
		out = CredentialsPath(dir, name)
	}
	c := Credentials{User: name, Password: password, Secret: secret}
	if err := c.Write(out, fmt.Sprintf("holo-gateway cluster credentials of gateway %q", name)); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	if err := writeUsers(dir, users); err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	return out, nil
}

// RevokeCredentials removes gateway name's user of the embedded engine
// kept in dir (and the credentials file minted for it there): a running
// engine closes its connection when it reloads its users.
func RevokeCredentials(dir, name string) error {
	users, _, err := readUsers(dir)
	if err != nil {
		return err
	}
	n := len(users)
	users = slices.DeleteFunc(users, func(u engineUser) bool { return u.Name == name })
	if len(users) == n {
		return fmt.Errorf("%w: %q has no engine user here", ErrUnknownGateway, name)
	}
	if err := writeUsers(dir, users); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	_ = os.Remove(CredentialsPath(dir, name))
	return nil
}

// EngineUsers lists the gateways that have a user of the embedded engine
// kept in dir.
func EngineUsers(dir string) ([]string, error) {
	users, _, err := readUsers(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range users {
		out = append(out, u.Name)
	}
	return out, nil
}

// hashPassword is the bcrypt hash the engine checks a password with. The
// passwords are 24 random bytes, beyond any guessing: the least cost
// keeps logins quick.
func hashPassword(password string) (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	return string(h), err
}
