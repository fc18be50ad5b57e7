package cluster

// Firmware images in a cluster: each gateway keeps its own artifact
// store, and every image added on any gateway is also put in the
// cluster's object store (holo_artifacts, named by SHA-256). A gateway
// that needs an image it lacks (to list it, for the rollout coordinator,
// to send it to one of its boards) fetches it from there into its own
// store, which checks it as an upload.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holofleet/holofleet/gateway/artifact"
)

// Artifacts is a gateway's firmware store in a cluster; it serves the
// API (api.Artifacts) and the rollout coordinator (rollout.Artifacts).
type Artifacts struct {
	c     *Cluster
	local *artifact.Store
	objs  *objects
}

// Artifacts returns the cluster's firmware store over this gateway's.
func (c *Cluster) Artifacts(local *artifact.Store) *Artifacts {
	a := &Artifacts{c: c, local: local, objs: &objects{c: c, bucket: ObjectImages,
		desc: "holo firmware images by sha256", what: "image", keeps: "the firmware images",
		notFound: artifact.ErrNotFound}}
	c.arts = a
	return a
}

// Add keeps an image here and in the cluster.
func (a *Artifacts) Add(ctx context.Context, r io.Reader, name, wantSHA string) (artifact.Artifact, bool, error) {
	art, existed, err := a.local.Add(ctx, r, name, wantSHA)
	if err != nil {
		return art, existed, err
	}
	if err := a.share(ctx, art); err != nil {
		return art, existed, err
	}
	return art, existed, nil
}

// share puts a local image in the object store unless it is there.
func (a *Artifacts) share(ctx context.Context, art artifact.Artifact) error {
	return a.objs.share(ctx, art.SHA256, art.Name, func() (*os.File, error) {
		f, _, err := a.local.Open(art.SHA256)
		return f, err
	})
}

// fetch brings image sha from the object store into the local store,
// under the name it was added with.
func (a *Artifacts) fetch(ctx context.Context, sha string) error {
	have := func() bool { _, err := a.local.Get(sha); return err == nil }
	return a.objs.fetch(ctx, sha, have, func(r io.Reader, name string) error {
		if name == "" {
			name = sha + ".bin"
		}
		_, _, err := a.local.Add(ctx, r, name, sha)
		return err
	})
}

// ensure makes image sha local, fetching it when this gateway lacks it.
func (a *Artifacts) ensure(sha string) error {
	if _, err := a.local.Get(sha); !errors.Is(err, artifact.ErrNotFound) {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return a.fetch(ctx, sha)
}

// Get returns an image's record, fetching the image when needed.
func (a *Artifacts) Get(sha string) (artifact.Artifact, error) {
	if err := a.ensure(sha); err != nil {
		return artifact.Artifact{}, err
	}
	return a.local.Get(sha)
}

// Open opens an image, fetching it when needed.
func (a *Artifacts) Open(sha string) (*os.File, artifact.Artifact, error) {
	if err := a.ensure(sha); err != nil {
		return nil, artifact.Artifact{}, err
	}
	return a.local.Open(sha)
}

// Admit tells whether this gateway's keys allow installing art.
func (a *Artifacts) Admit(art artifact.Artifact) error { return a.local.Admit(art) }

// List lists every image of the cluster (fetching those this gateway
// lacks); cut off from the engine, it lists this gateway's.
func (a *Artifacts) List() ([]artifact.Artifact, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if obj, err := a.objs.store(ctx); err == nil {
		if infos, err := obj.List(ctx); err == nil {
			for _, in := range infos {
				if in.Deleted {
					continue
				}
				if err := a.fetch(ctx, in.Name); err != nil {
					a.c.log.Warn("cluster: image of the cluster", "sha256", in.Name, "err", err)
				}
			}
		}
	}
	return a.local.List()
}

// Delete deletes an image here and from the cluster (another gateway
// keeps its copy until it deletes it too).
func (a *Artifacts) Delete(sha string) error {
	if err := a.local.Delete(sha); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obj, err := a.objs.store(ctx)
	if err != nil {
		return err
	}
	if err := obj.Delete(ctx, sha); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("cluster: deleting image %s: %w", sha, err)
	}
	return nil
}

// SetChannel sets a release channel of this gateway.
func (a *Artifacts) SetChannel(name, sha, releaseURL string) (artifact.Channel, error) {
	if err := a.ensure(sha); err != nil {
		return artifact.Channel{}, err
	}
	return a.local.SetChannel(name, sha, releaseURL)
}

// DeleteChannel deletes a release channel of this gateway.
func (a *Artifacts) DeleteChannel(name string) error { return a.local.DeleteChannel(name) }

// Channels lists this gateway's release channels.
func (a *Artifacts) Channels() ([]artifact.Channel, error) { return a.local.Channels() }
