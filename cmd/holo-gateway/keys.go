package main

import (
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/holofleet/holofleet/bus/image"
)

// DemoKeyFile is the public half of the development signing key `make
// image` signs with (created on first use, by make image or make run).
// holo-gateway demo trusts it when no --trusted-key is given and it
// exists in the working directory, and its boards burn it: an image made
// by `make image` then uploads and rolls out with nothing more to do.
const DemoKeyFile = ".keys/dev-signing.pem.pub"

// noKeys, as --trusted-key's value in demo mode, turns the default off.
const noKeys = "none"

// keyFlags are --trusted-key and --revoked-key.
type keyFlags struct {
	trusted, revoked listFlag
}

func addKeyFlags(fs *flag.FlagSet, k *keyFlags, isDemo bool) {
	usage := "public key (PEM) of a key firmware must be signed by: uploads without a valid block of one are refused; repeatable"
	if isDemo {
		usage += " (demo: default " + DemoKeyFile + " when it exists; " + noKeys + " for none)"
	}
	fs.Var(&k.trusted, "trusted-key", usage)
	fs.Var(&k.revoked, "revoked-key", "public key (PEM) never trusted again, even if --trusted-key names it; repeatable")
}

// trustKeys are the gateway's keys, read from their files.
type trustKeys struct {
	trusted, revoked []image.KeyDigest
	// files name the trusted keys' files, in order.
	files []string
	// note says where the keys came from when the gateway chose them.
	note string
}

// boardKeys are the keys the demo's boards burn: the trusted ones that
// are not revoked.
func (k trustKeys) boardKeys() []image.KeyDigest {
	return slices.DeleteFunc(slices.Clone(k.trusted), func(d image.KeyDigest) bool { return slices.Contains(k.revoked, d) })
}

// banner is the firmware trust line of the start-up banner.
func (k trustKeys) banner() string {
	if len(k.trusted) == 0 {
		return "firmware: no --trusted-key: unsigned images are accepted and marked \"unsigned\""
	}
	var names []string
	for i, d := range k.trusted {
		n := d.Short() + " (" + k.files[i] + ")"
		if slices.Contains(k.revoked, d) {
			n += " revoked"
		}
		names = append(names, n)
	}
	s := "firmware: uploads must be signed by " + strings.Join(names, ", ")
	if k.note != "" {
		s += "; " + k.note
	}
	return s
}

// resolve reads the key files; in demo mode without --trusted-key it
// takes DemoKeyFile when it exists.
func (k keyFlags) resolve(isDemo bool) (trustKeys, error) {
	var out trustKeys
	files := []string(k.trusted)
	switch {
	case isDemo && len(files) == 1 && files[0] == noKeys:
		files = nil
	case isDemo && len(files) == 0:
		if _, err := os.Stat(DemoKeyFile); err == nil {
			files = []string{DemoKeyFile}
			out.note = "the development key (make image signs with it); the demo's boards trust it"
		}
	case slices.Contains(files, noKeys):
		return out, fmt.Errorf("--trusted-key %s is for demo mode, alone", noKeys)
	}
	if len(k.revoked) > 0 && len(files) == 0 {
		return out, errors.New("--revoked-key needs --trusted-key")
	}
	var err error
	if out.trusted, err = readKeys("--trusted-key", files); err != nil {
		return out, err
	}
	if out.revoked, err = readKeys("--revoked-key", k.revoked); err != nil {
		return out, err
	}
	out.files = files
	if len(out.boardKeys()) == 0 && len(out.trusted) > 0 {
		return out, errors.New("every --trusted-key is revoked: no image could be uploaded")
	}
	return out, nil
}

// readKeys reads public keys from PEM files and returns their digests. A
// private key is refused: it has no business on the gateway.
func readKeys(flagName string, files []string) ([]image.KeyDigest, error) {
	var out []image.KeyDigest
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", flagName, f, err)
		}
		if blk, _ := pem.Decode(b); blk != nil && blk.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("%s %s: a %s, not a public key: give the gateway the .pub file holoctl image keygen writes beside it", flagName, f, blk.Type)
		}
		pub, err := image.ParsePublicKey(b)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", flagName, f, err)
		}
		d, err := image.DigestOf(pub)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", flagName, f, err)
		}
		if slices.Contains(out, d) {
			return nil, fmt.Errorf("%s %s: key %s given twice", flagName, f, d.Short())
		}
		out = append(out, d)
	}
	return out, nil
}
