package cluster

// Tokens: the API tokens (their SHA-256 and role, never a secret) live in
// the holo_tokens bucket, and every gateway keeps a copy in its own store,
// so a token made on one gateway works on all, a revoked one stops
// everywhere (its open streams end), and a gateway cut off from the
// engine still knows the tokens it had. While cut off, tokens can be
// neither made nor revoked.
//
// A gateway joining the cluster adds its tokens to the bucket; a name the
// bucket holds already keeps the bucket's token, and a token the bucket
// says was revoked (a delete marker) is revoked here too.
//
// Every record carries an HMAC of its fields under the cluster secret
// (sign.go), which gateways hold and the engine does not: a record
// written by a bare engine client (say, an admin token it made up) has no
// good MAC, and the gateways neither honour it nor let it replace the
// token they know; each such record is audited and logged. Deleting a
// record (a revocation) needs no MAC: an engine client can revoke tokens,
// never make one.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/auth"
)

// tokenRecord is a token in the bucket.
type tokenRecord struct {
	Name    string    `json:"name"`
	Role    string    `json:"role"`
	SHA256  string    `json:"sha256"`
	Created time.Time `json:"created"`
	// MAC signs the fields above under the cluster secret.
	MAC string `json:"mac"`
}

// signed returns r with its MAC.
func (r tokenRecord) signed(secret []byte) tokenRecord {
	r.MAC = mac(secret, sigToken, r.macData())
	return r
}

func (r tokenRecord) macData() []byte {
	return []byte(strings.Join([]string{r.Name, r.Role, r.SHA256, r.Created.UTC().Format(time.RFC3339Nano)}, "\x00"))
}

// recordOf is tok's record, signed.
func recordOf(tok auth.Token, secret []byte) tokenRecord {
	return tokenRecord{Name: tok.Name, Role: tok.Role.String(), SHA256: tok.SHA256, Created: tok.Created}.signed(secret)
}

func (r tokenRecord) token() (auth.Token, error) {
	role, err := auth.ParseRole(r.Role)
	if err != nil {
		return auth.Token{}, err
	}
	return auth.Token{Name: r.Name, Role: role, SHA256: r.SHA256, Created: r.Created}, nil
}

// tokenReplica is auth.Replica over the bucket.
type tokenReplica struct {
	c  *Cluster
	kv jetstream.KeyValue
}

func (r *tokenReplica) Created(tok auth.Token) error {
	if reason := r.c.partitionReason(); reason != "" {
		return fmt.Errorf("%w: tokens are kept cluster-wide: %s", ErrPartitioned, reason)
	}
	data, _ := json.Marshal(recordOf(tok, r.c.eng.Secret()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := r.kv.Create(ctx, tok.Name, data)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("%w: %q (on another gateway of the cluster)", auth.ErrExists, tok.Name)
	}
	if err != nil {
		return fmt.Errorf("cluster: keeping token %q: %w", tok.Name, err)
	}
	return nil
}

func (r *tokenReplica) Revoked(name string) error {
	if reason := r.c.partitionReason(); reason != "" {
		return fmt.Errorf("%w: tokens are kept cluster-wide: %s", ErrPartitioned, reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.kv.Delete(ctx, name); err != nil {
		return fmt.Errorf("cluster: revoking token %q: %w", name, err)
	}
	return nil
}

// ShareTokens keeps tokens the same on every gateway of the cluster; call
// it before Run.
func (c *Cluster) ShareTokens(t *auth.Tokens) { c.tokens = t }

// shareTokens sets up the tokens bucket, joins this gateway's tokens to
// it and follows it, until ctx ends.
func (c *Cluster) shareTokens(ctx context.Context) {
	t := c.tokens
	kv, err := c.bucket(ctx, BucketTokens, "holo API tokens (hashed)")
	if err != nil {
		return
	}
	initial := map[string]jetstream.KeyValueEntry{}
	apply := func(e jetstream.KeyValueEntry) {
		if e.Operation() != jetstream.KeyValuePut {
			if err := t.Drop(e.Key()); err != nil {
				c.log.Warn("cluster: token revoked elsewhere", "token", e.Key(), "err", err)
			}
			return
		}
		var rec tokenRecord
		if !validRecord(c.eng.Secret(), e) || json.Unmarshal(e.Value(), &rec) != nil {
			err := fmt.Errorf("%w: token record %q in %s (kept the token this gateway knows, if any)", ErrUnsigned, e.Key(), BucketTokens)
			c.o.Guard.Refuse(auth.Attributes{Surface: SurfaceCluster, Verb: auth.VerbCreate, Resource: auth.ResTokens, Name: e.Key(),
				Who: auth.Identity{Name: "engine client"}, Operation: "token record written to the engine, not by a gateway"},
				fmt.Errorf("%w: %w", auth.ErrBadToken, err))
			c.log.Warn("cluster: token record refused", "token", e.Key(), "err", err)
			return
		}
		tok, err := rec.token()
		if err == nil {
			err = t.Put(tok)
		}
		if err != nil {
			c.log.Warn("cluster: token made elsewhere", "token", e.Key(), "err", err)
		}
	}
	joined := false
	c.watch(ctx, kv, func(e jetstream.KeyValueEntry, first bool) {
		if first && !joined {
			initial[e.Key()] = e
			return
		}
		apply(e)
	}, func() {
		if joined {
			return
		}
		joined = true
		// This gateway's tokens the bucket never had join it.
		// A record with no good MAC (written by an engine client, or
		// by a gateway before records were signed) gives way to this
		// gateway's token of that name.
		for _, tok := range t.List() {
			e, ok := initial[tok.Name]
			if ok && e.Operation() == jetstream.KeyValuePut && validRecord(c.eng.Secret(), e) {
				continue
			}
			if ok && e.Operation() != jetstream.KeyValuePut {
				continue // revoked elsewhere
			}
			data, _ := json.Marshal(recordOf(tok, c.eng.Secret()))
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var err error
			if ok {
				_, err = kv.Update(actx, tok.Name, data, e.Revision())
				delete(initial, tok.Name)
			} else {
				_, err = kv.Create(actx, tok.Name, data)
			}
			cancel()
			if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
				c.log.Warn("cluster: sharing token", "token", tok.Name, "err", err)
			}
		}
		for _, e := range initial {
			apply(e)
		}
		t.SetReplica(&tokenReplica{c: c, kv: kv})
		c.log.Info("cluster: tokens shared", "tokens", len(t.List()))
	}, watchStuck{})
}

// validRecord reports whether a put of the tokens bucket is a token
// record a gateway signed.
func validRecord(secret []byte, e jetstream.KeyValueEntry) bool {
	var rec tokenRecord
	if json.Unmarshal(e.Value(), &rec) != nil || rec.Name != e.Key() {
		return false
	}
	return goodMAC(secret, sigToken, rec.macData(), rec.MAC)
}
