// Package store keeps saved state in a bbolt file: the board's settings,
// scenes, calibration and networks, and the gateway's registry.
//
// Values are JSON documents in named buckets. Every write is one bbolt
// transaction, so a process killed at any moment (even with SIGKILL) leaves
// each document either as it was or as it was written, never torn; the
// crash test in this package kills a writer mid-stream to prove it.
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Errors returned by the store.
var (
	// ErrLocked means another process holds the database file open.
	ErrLocked = errors.New("store: database is locked by another process")
	// ErrClosed means the store was used after Close.
	ErrClosed = errors.New("store: closed")
)

// DB is an open store file.
type DB struct {
	bolt *bolt.DB
}

// Open opens or creates the store at path. It waits at most a second for a
// lock held by another process, then fails with ErrLocked.
func Open(path string) (*DB, error) {
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, path)
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return &DB{bolt: b}, nil
}

// Close closes the file.
func (db *DB) Close() error { return db.bolt.Close() }

// Path returns the file's path.
func (db *DB) Path() string { return db.bolt.Path() }

// Bucket returns a handle on the named bucket; it is created on first write.
func (db *DB) Bucket(name string) *Bucket { return &Bucket{db: db, name: []byte(name)} }

// Bucket is a named set of JSON documents.
type Bucket struct {
	db   *DB
	name []byte
}

// Get decodes the document at key into v and reports whether it exists.
func (b *Bucket) Get(key string, v any) (bool, error) {
	var raw []byte
	err := b.db.bolt.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(b.name)
		if bk == nil {
			return nil
		}
		if d := bk.Get([]byte(key)); d != nil {
			raw = append([]byte(nil), d...)
		}
		return nil
	})
	if err != nil {
		return false, wrapClosed(err)
	}
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("store: decode %s/%s: %w", b.name, key, err)
	}
	return true, nil
}

// Put stores v as JSON at key, durably, in one transaction.
func (b *Bucket) Put(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("store: encode %s/%s: %w", b.name, key, err)
	}
	return wrapClosed(b.db.bolt.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(b.name)
		if err != nil {
			return err
		}
		return bk.Put([]byte(key), raw)
	}))
}

// Delete removes key; a missing key is not an error.
func (b *Bucket) Delete(key string) error {
	return wrapClosed(b.db.bolt.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(b.name)
		if bk == nil {
			return nil
		}
		return bk.Delete([]byte(key))
	}))
}

// Keys returns the bucket's keys in byte order.
func (b *Bucket) Keys() ([]string, error) {
	var keys []string
	err := b.db.bolt.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(b.name)
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	})
	return keys, wrapClosed(err)
}

// Batch writes several documents of the bucket in one transaction; puts
// with a nil value delete the key. Either all of them land or none.
func (b *Bucket) Batch(puts map[string]any) error {
	raws := make(map[string][]byte, len(puts))
	for k, v := range puts {
		if v == nil {
			raws[k] = nil
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("store: encode %s/%s: %w", b.name, k, err)
		}
		raws[k] = raw
	}
	return wrapClosed(b.db.bolt.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(b.name)
		if err != nil {
			return err
		}
		for k, raw := range raws {
			if raw == nil {
				err = bk.Delete([]byte(k))
			} else {
				err = bk.Put([]byte(k), raw)
			}
			if err != nil {
				return err
			}
		}
		return nil
	}))
}

// Scan calls fn with each key in [from, to) and its raw JSON, in byte
// order of the keys, or from the last down with reverse; "" leaves a bound
// open. It stops when fn returns false or an error (returned). raw is
// valid only during the call.
func (b *Bucket) Scan(from, to string, reverse bool, fn func(key string, raw []byte) (bool, error)) error {
	return wrapClosed(b.db.bolt.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(b.name)
		if bk == nil {
			return nil
		}
		c := bk.Cursor()
		var k, v []byte
		inRange := func(k []byte) bool {
			return k != nil && (from == "" || string(k) >= from) && (to == "" || string(k) < to)
		}
		if !reverse {
			if from == "" {
				k, v = c.First()
			} else {
				k, v = c.Seek([]byte(from))
			}
			for ; inRange(k); k, v = c.Next() {
				if more, err := fn(string(k), v); err != nil || !more {
					return err
				}
			}
			return nil
		}
		if to == "" {
			k, v = c.Last()
		} else if k, _ = c.Seek([]byte(to)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; inRange(k); k, v = c.Prev() {
			if more, err := fn(string(k), v); err != nil || !more {
				return err
			}
		}
		return nil
	}))
}

// Each decodes every document of b into a T and calls fn with its key
// and value, in byte order of the keys: the load of a component's
// records at start, or a listing. The documents are read in one
// transaction (one consistent view) and fn runs after it, so fn may use
// the store. A document that does not decode stops Each with an error
// naming it, before fn sees any; so does fn's first error, returned as
// it is.
func Each[T any](b *Bucket, fn func(key string, v T) error) error {
	type doc struct {
		key string
		raw []byte
	}
	var docs []doc
	err := b.Scan("", "", false, func(k string, raw []byte) (bool, error) {
		docs = append(docs, doc{k, append([]byte(nil), raw...)})
		return true, nil
	})
	if err != nil {
		return err
	}
	vs := make([]T, len(docs))
	for i, d := range docs {
		if err := json.Unmarshal(d.raw, &vs[i]); err != nil {
			return fmt.Errorf("store: decode %s/%s: %w", b.name, d.key, err)
		}
	}
	for i, d := range docs {
		if err := fn(d.key, vs[i]); err != nil {
			return err
		}
	}
	return nil
}

// DeleteFirst deletes, in one transaction, up to n of the bucket's first
// keys (in byte order) that sort before before ("" for any), and returns
// how many went.
func (b *Bucket) DeleteFirst(n int, before string) (int, error) {
	deleted := 0
	err := b.db.bolt.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(b.name)
		if bk == nil {
			return nil
		}
		c := bk.Cursor()
		for k, _ := c.First(); k != nil && deleted < n && (before == "" || string(k) < before); k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
			deleted++
		}
		return nil
	})
	if err != nil {
		return 0, wrapClosed(err)
	}
	return deleted, nil
}

// Len returns how many keys the bucket holds.
func (b *Bucket) Len() (int, error) {
	n := 0
	err := b.db.bolt.View(func(tx *bolt.Tx) error {
		if bk := tx.Bucket(b.name); bk != nil {
			n = bk.Stats().KeyN
		}
		return nil
	})
	return n, wrapClosed(err)
}

// Clear removes every key of the bucket.
func (b *Bucket) Clear() error {
	return wrapClosed(b.db.bolt.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(b.name) == nil {
			return nil
		}
		return tx.DeleteBucket(b.name)
	}))
}

// Check runs bbolt's consistency check over the whole file.
func (db *DB) Check() error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return fmt.Errorf("store: consistency: %w", err)
		}
		return nil
	})
}

func wrapClosed(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}
