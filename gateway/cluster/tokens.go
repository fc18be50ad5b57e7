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

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	data, _ := json.Marshal(tokenRecord{Name: tok.Name, Role: tok.Role.String(), SHA256: tok.SHA256, Created: tok.Created})
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
	var kv jetstream.KeyValue
	cfg := jetstream.KeyValueConfig{Bucket: BucketTokens, Description: "holo API tokens (hashed)", History: 1,
		Replicas: c.eng.Replicas(), Storage: jetstream.FileStorage}
	if err := retry(ctx, c.log, "bucket "+BucketTokens, func(ctx context.Context) error {
		var err error
		kv, err = c.js.CreateOrUpdateKeyValue(ctx, cfg)
		return err
	}); err != nil {
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
		if json.Unmarshal(e.Value(), &rec) != nil {
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
		for _, tok := range t.List() {
			if _, ok := initial[tok.Name]; ok {
				continue
			}
			data, _ := json.Marshal(tokenRecord{Name: tok.Name, Role: tok.Role.String(), SHA256: tok.SHA256, Created: tok.Created})
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := kv.Create(actx, tok.Name, data)
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
	})
}
