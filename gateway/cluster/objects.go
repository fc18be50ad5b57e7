package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// objects is one of the cluster's object stores of files named by their
// SHA-256 (the firmware images, the installation's content). Each
// gateway keeps its own copy of a file in a local store; the object
// store is how the others get it. The store is made on first use and
// refused while this gateway is cut off from the engine.
type objects struct {
	c *Cluster
	// bucket and desc name the JetStream object store and describe it.
	bucket, desc string
	// what names one file in errors ("image", "content"); keeps says
	// what the cluster keeps there, for ErrPartitioned.
	what, keeps string
	// notFound is the local store's error for a file no gateway has.
	notFound error

	mu  sync.Mutex
	obj jetstream.ObjectStore
	// fetching serialises fetches: two callers wanting one file fetch
	// it once.
	fetching sync.Mutex
}

// store returns the object store, making it on first use.
func (o *objects) store(ctx context.Context) (jetstream.ObjectStore, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.obj != nil {
		return o.obj, nil
	}
	if o.c.cutOff() {
		return nil, fmt.Errorf("%w: the cluster keeps %s", ErrPartitioned, o.keeps)
	}
	obj, err := o.c.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: o.bucket,
		Description: o.desc, Replicas: o.c.eng.Replicas(), Storage: jetstream.FileStorage})
	if err != nil {
		return nil, fmt.Errorf("cluster: object store %s: %w", o.bucket, err)
	}
	o.obj = obj
	return obj, nil
}

// share puts file sha, read from what open returns, in the object store
// unless it is there already; desc is kept as the object's description.
func (o *objects) share(ctx context.Context, sha, desc string, open func() (*os.File, error)) error {
	obj, err := o.store(ctx)
	if err != nil {
		return err
	}
	if _, err := obj.GetInfo(ctx, sha); err == nil {
		return nil
	}
	f, err := open()
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := obj.Put(ctx, jetstream.ObjectMeta{Name: sha, Description: desc}, f); err != nil {
		return fmt.Errorf("cluster: sharing %s %s: %w", o.what, sha, err)
	}
	return nil
}

// fetch brings file sha from the object store into the local store:
// unless have says it is there, keep is given the object's bytes and
// description and checks them against sha as it stores them. A file in
// no gateway of the cluster is notFound.
func (o *objects) fetch(ctx context.Context, sha string, have func() bool, keep func(r io.Reader, desc string) error) error {
	o.fetching.Lock()
	defer o.fetching.Unlock()
	if have() {
		return nil
	}
	obj, err := o.store(ctx)
	if err != nil {
		return err
	}
	res, err := obj.Get(ctx, sha)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("%w: %s %s (in no gateway of the cluster)", o.notFound, o.what, sha)
	}
	if err != nil {
		return fmt.Errorf("cluster: fetching %s %s: %w", o.what, sha, err)
	}
	defer res.Close()
	desc := ""
	if info, _ := res.Info(); info != nil {
		desc = info.Description
	}
	if err := keep(res, desc); err != nil {
		return fmt.Errorf("cluster: fetching %s %s: %w", o.what, sha, err)
	}
	return nil
}
