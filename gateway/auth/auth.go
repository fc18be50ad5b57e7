// Package auth guards the gateway's fleet API with bearer tokens and roles.
//
// A token is a random secret handed out once ("holo_" followed by 43
// base64url characters: 32 random bytes). The gateway keeps only its
// SHA-256, in the "tokens" bucket of the gateway's bbolt store, keyed by
// the token's name:
//
//	tokens/<name> = {"name": ..., "role": "viewer|operator|admin",
//	                 "sha256": "<64 hex>", "created": RFC 3339}
//
// Roles are ordered: a viewer reads and watches, an operator also runs
// commands (calls, actions, labels), an admin also manages tokens and
// firmware. What each request needs is decided in one place, Authorize
// (authorize.go), from the request's Attributes; every surface (gRPC,
// REST through grpc-gateway, the REST upload, MQTT, OSC, the console)
// goes through a Guard (guard.go): Identify the caller, Check the
// attributes, and the Guard's Auditor records every refusal and every
// change let in.
//
// Calls need no token when the gateway runs with Insecure (a lab) or, with
// LoopbackFree (demo mode), when they come from the loopback interface
// (never through a proxy).
//
// Revoking a token ends what it holds open: Bind ties a request's context
// to its token, and Revoke cancels those contexts at once.
//
// Limits (limit.go) bound what one token may hold or do: watch streams
// per token and in total, and a rate of changing requests.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/holofleet/holofleet/gateway/fault"
	"github.com/holofleet/holofleet/store"
)

// Errors of token handling and checks.
var (
	// ErrNoToken: the call carried no bearer token.
	ErrNoToken = fault.New(fault.Unauthenticated, "auth: bearer token required")
	// ErrBadToken: the token is unknown (never made, or revoked).
	ErrBadToken = fault.New(fault.Unauthenticated, "auth: invalid or revoked token")
	// ErrForbidden: the token's role does not allow the call.
	ErrForbidden = fault.New(fault.Denied, "auth: role does not allow this call")
	// ErrBadRole: a role name other than viewer, operator or admin.
	ErrBadRole = fault.New(fault.Invalid, "auth: unknown role")
	// ErrBadName: a token name that is empty, too long or has characters
	// other than letters, digits, '-', '_' and '.'.
	ErrBadName = fault.New(fault.Invalid, "auth: bad token name")
	// ErrExists: a token with that name exists.
	ErrExists = fault.New(fault.Exists, "auth: token name taken")
	// ErrUnknownToken: no token has that name.
	ErrUnknownToken = fault.New(fault.NotFound, "auth: no such token")
	// ErrBadPath: a raw board call's path is not in its canonical form
	// (percent-escapes that decode to something else, dot segments,
	// doubled or trailing slashes, encoded '%', fragments): what would be
	// authorised and what a board would route could differ, so it is
	// refused (see CanonicalBoardPath).
	ErrBadPath = fault.New(fault.Invalid, "auth: board path not canonical")
)

// Role is what a token may do; a higher role includes the lower ones.
type Role int

// Roles in increasing power.
const (
	RoleNone Role = iota
	RoleViewer
	RoleOperator
	RoleAdmin
)

var roleNames = [...]string{"none", "viewer", "operator", "admin"}

func (r Role) String() string {
	if r < 0 || int(r) >= len(roleNames) {
		return fmt.Sprintf("role(%d)", int(r))
	}
	return roleNames[r]
}

// ParseRole returns the role named s (viewer, operator or admin).
func ParseRole(s string) (Role, error) {
	for i, n := range roleNames {
		if i > 0 && n == s {
			return Role(i), nil
		}
	}
	return RoleNone, fmt.Errorf("%w %q (viewer, operator or admin)", ErrBadRole, s)
}

// Allows reports whether r may do what need requires.
func (r Role) Allows(need Role) bool { return r >= need }

// Token is a token's record, without its secret.
type Token struct {
	Name    string    `json:"name"`
	Role    Role      `json:"-"`
	SHA256  string    `json:"sha256"`
	Created time.Time `json:"created"`
}

// record is the stored form (the role by name, so the file reads well).
type record struct {
	Name    string    `json:"name"`
	Role    string    `json:"role"`
	SHA256  string    `json:"sha256"`
	Created time.Time `json:"created"`
}

// Bucket is the store bucket holding tokens.
const Bucket = "tokens"

// SecretPrefix starts every token secret.
const SecretPrefix = "holo_"

const maxName = 64

// Tokens is the set of tokens: kept in the store, looked up from memory.
// It is safe for concurrent use.
type Tokens struct {
	bucket *store.Bucket
	now    func() time.Time

	mu      sync.RWMutex
	replica Replica          // nil: tokens of this gateway only
	byHash  map[string]Token // hex SHA-256 -> token
	// bound are the contexts tied to each token's name (Bind); Revoke
	// cancels them.
	bound  map[string]map[uint64]context.CancelCauseFunc
	nextID uint64
}

// Open loads the tokens kept in db.
func Open(db *store.DB) (*Tokens, error) {
	t := &Tokens{bucket: db.Bucket(Bucket), now: time.Now, byHash: map[string]Token{},
		bound: map[string]map[uint64]context.CancelCauseFunc{}}
	err := store.Each(t.bucket, func(n string, r record) error {
		role, err := ParseRole(r.Role)
		if err != nil {
			return fmt.Errorf("token %q: %w", n, err)
		}
		t.byHash[r.SHA256] = Token{Name: r.Name, Role: role, SHA256: r.SHA256, Created: r.Created}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("auth: load tokens: %w", err)
	}
	return t, nil
}

// Hash returns the hex SHA-256 of a secret, as stored.
func Hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func validName(n string) bool {
	if n == "" || len(n) > maxName {
		return false
	}
	for _, c := range n {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

// Create makes a token with a new random secret, stores its hash and
// returns the secret (the only time it is seen) and the record.
func (t *Tokens) Create(name string, role Role) (string, Token, error) {
	if !validName(name) {
		return "", Token{}, fmt.Errorf("%w %q", ErrBadName, name)
	}
	if role < RoleViewer || role > RoleAdmin {
		return "", Token{}, fmt.Errorf("%w %v", ErrBadRole, role)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Token{}, fmt.Errorf("auth: random: %w", err)
	}
	secret := SecretPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	tok := Token{Name: name, Role: role, SHA256: Hash(secret), Created: t.now().UTC().Truncate(time.Second)}

	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.byHash {
		if o.Name == name {
			return "", Token{}, fmt.Errorf("%w: %q", ErrExists, name)
		}
	}
	if t.replica != nil {
		if err := t.replica.Created(tok); err != nil {
			return "", Token{}, err
		}
	}
	rec := record{Name: name, Role: role.String(), SHA256: tok.SHA256, Created: tok.Created}
	if err := t.bucket.Put(name, rec); err != nil {
		return "", Token{}, fmt.Errorf("auth: save token: %w", err)
	}
	t.byHash[tok.SHA256] = tok
	return secret, tok, nil
}

// List returns the tokens by name.
func (t *Tokens) List() []Token {
	t.mu.RLock()
	out := make([]Token, 0, len(t.byHash))
	for _, tok := range t.byHash {
		out = append(out, tok)
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b Token) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Len returns how many tokens there are.
func (t *Tokens) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byHash)
}

// Revoke deletes the token named name and ends every context bound to
// it (Bind): open streams and calls made with it stop at once.
func (t *Tokens) Revoke(name string) error {
	return t.removeAndEnd(name, true)
}

// removeAndEnd deletes the token named name (tell: the replica is asked
// first, see remove) and then, outside the lock, ends every context bound
// to it (Bind) with a cause wrapping ErrBadToken.
func (t *Tokens) removeAndEnd(name string, tell bool) error {
	cancels, err := t.remove(name, tell)
	if err != nil {
		return err
	}
	cause := fmt.Errorf("%w: token %q was revoked", ErrBadToken, name)
	for _, c := range cancels {
		c(cause)
	}
	return nil
}

// remove deletes token name and returns the cancels of its bound
// contexts; tell asks the replica first.
func (t *Tokens) remove(name string, tell bool) ([]context.CancelCauseFunc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for h, tok := range t.byHash {
		if tok.Name != name {
			continue
		}
		if tell && t.replica != nil {
			if err := t.replica.Revoked(name); err != nil {
				return nil, err
			}
		}
		if err := t.bucket.Delete(name); err != nil {
			return nil, fmt.Errorf("auth: delete token: %w", err)
		}
		delete(t.byHash, h)
		var cancels []context.CancelCauseFunc
		for _, c := range t.bound[name] {
			cancels = append(cancels, c)
		}
		delete(t.bound, name)
		return cancels, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownToken, name)
}

// Bind returns a context derived from ctx that ends when the token named
// name is revoked (at once when no such token exists any more), with a
// cause wrapping ErrBadToken (context.Cause). Call the CancelFunc when
// the request ends.
func (t *Tokens) Bind(ctx context.Context, name string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t.mu.Lock()
	exists := false
	for _, tok := range t.byHash {
		if tok.Name == name {
			exists = true
			break
		}
	}
	if !exists {
		t.mu.Unlock()
		cancel(fmt.Errorf("%w: token %q was revoked", ErrBadToken, name))
		return ctx, func() {}
	}
	t.nextID++
	id := t.nextID
	if t.bound[name] == nil {
		t.bound[name] = map[uint64]context.CancelCauseFunc{}
	}
	t.bound[name][id] = cancel
	t.mu.Unlock()
	return ctx, func() {
		t.mu.Lock()
		if m := t.bound[name]; m != nil {
			delete(m, id)
			if len(m) == 0 {
				delete(t.bound, name)
			}
		}
		t.mu.Unlock()
		cancel(context.Canceled)
	}
}

// Identify returns the identity whose secret is secret (see Lookup).
func (t *Tokens) Identify(secret string) (Identity, error) {
	tok, err := t.Lookup(secret)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Name: tok.Name, Role: tok.Role, Token: true}, nil
}

// Lookup returns the token whose secret is secret.
func (t *Tokens) Lookup(secret string) (Token, error) {
	if secret == "" {
		return Token{}, ErrNoToken
	}
	h := Hash(secret)
	t.mu.RLock()
	tok, ok := t.byHash[h]
	t.mu.RUnlock()
	// The map lookup already matched on the full hash; comparing again in
	// constant time keeps the check honest if the index changes.
	if !ok || subtle.ConstantTimeCompare([]byte(tok.SHA256), []byte(h)) != 1 {
		return Token{}, ErrBadToken
	}
	return tok, nil
}

// Replica keeps tokens the same on several gateways (gateway/cluster):
// it is told of each token made or revoked here before the change is
// kept, and its error refuses the change (ErrExists for a name taken
// elsewhere). It must not call back into Tokens.
type Replica interface {
	Created(tok Token) error
	Revoked(name string) error
}

// SetReplica makes r told of every token made or revoked from now on.
func (t *Tokens) SetReplica(r Replica) {
	t.mu.Lock()
	t.replica = r
	t.mu.Unlock()
}

// Put keeps a token made elsewhere (its hash, never a secret), replacing
// one of the same name; the replica is not told.
func (t *Tokens) Put(tok Token) error {
	if !validName(tok.Name) {
		return fmt.Errorf("%w %q", ErrBadName, tok.Name)
	}
	if tok.Role < RoleViewer || tok.Role > RoleAdmin {
		return fmt.Errorf("%w %v", ErrBadRole, tok.Role)
	}
	t.mu.Lock()
	for h, o := range t.byHash {
		if o.Name == tok.Name {
			if o == tok {
				t.mu.Unlock()
				return nil
			}
			delete(t.byHash, h)
		}
	}
	rec := record{Name: tok.Name, Role: tok.Role.String(), SHA256: tok.SHA256, Created: tok.Created}
	err := t.bucket.Put(tok.Name, rec)
	if err == nil {
		t.byHash[tok.SHA256] = tok
	}
	t.mu.Unlock()
	return err
}

// Drop revokes a token revoked elsewhere (its bound contexts end as with
// Revoke); the replica is not told. Dropping an unknown name is no error.
func (t *Tokens) Drop(name string) error {
	if err := t.removeAndEnd(name, false); !errors.Is(err, ErrUnknownToken) {
		return err
	}
	return nil
}
