package installation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Upload is the header of a content upload sent in parts (gRPC's
// UploadInstallationContent): the file's name (for errors and the audit
// log only), the SHA-256 its bytes must hash to (or empty), and its size
// in bytes, exactly.
type Upload struct {
	Name   string
	SHA256 string
	Size   int64
}

// Check refuses a header the store would never keep: a negative size, a
// size over MaxContent (before a byte is sent), a sha256 that is not one.
func (u Upload) Check() error {
	switch {
	case u.Size < 0:
		return fmt.Errorf("%w: %s: size %d: want the file's size in bytes", ErrContent, u.label(), u.Size)
	case u.Size > MaxContent:
		return fmt.Errorf("%w: %s: larger than %d bytes", ErrContent, u.label(), MaxContent)
	case u.SHA256 != "" && !shaRE.MatchString(strings.ToLower(u.SHA256)):
		return fmt.Errorf("%w: %s: sha256 %q is not 64 hex digits", ErrContent, u.label(), u.SHA256)
	}
	return nil
}

func (u Upload) label() string {
	if u.Name == "" {
		return "content"
	}
	return "content " + u.Name
}

// storeContent adds the bytes of r to the content store (ErrContent
// when they do not hash to want; nothing is kept) and, in a cluster,
// shares them with the other gateways. REST and gRPC uploads end here.
func (in *Installer) storeContent(ctx context.Context, r io.Reader, want string) (string, int64, error) {
	sha, n, err := in.o.Contents.Add(r, want)
	if err != nil {
		return "", 0, err
	}
	if err := in.AddContent(ctx, sha); err != nil {
		return "", 0, err
	}
	return sha, n, nil
}

// Part is one later message of an upload: its chunk, or (header true) a
// header where only chunks may come.
type Part struct {
	Chunk  []byte
	Header bool
}

// Chunks is the reader of an upload's bytes: the chunks next returns, in
// order, until it returns io.EOF. It ends with ErrContent when the parts
// carry more or fewer bytes than u.Size or when a part is a second
// header, so that the store keeps only a whole, well-formed upload. It
// never yields more than u.Size bytes.
func (u Upload) Chunks(next func() (Part, error)) io.Reader {
	return &chunks{u: u, next: next}
}

type chunks struct {
	u    Upload
	next func() (Part, error)
	buf  []byte
	got  int64
	err  error
}

func (c *chunks) Read(p []byte) (int, error) {
	for len(c.buf) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		c.err = c.fill()
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

// fill takes the next part into buf, or returns why the upload ends.
func (c *chunks) fill() error {
	part, err := c.next()
	switch {
	case errors.Is(err, io.EOF):
		if c.got != c.u.Size {
			return fmt.Errorf("%w: %s: the upload ended after %d of %d bytes", ErrContent, c.u.label(), c.got, c.u.Size)
		}
		return io.EOF
	case err != nil:
		return err
	case part.Header:
		return fmt.Errorf("%w: %s: a second header after %d bytes (only chunks may follow the header)", ErrContent, c.u.label(), c.got)
	case int64(len(part.Chunk)) > c.u.Size-c.got:
		return fmt.Errorf("%w: %s: more than the %d bytes declared", ErrContent, c.u.label(), c.u.Size)
	}
	c.got += int64(len(part.Chunk))
	c.buf = part.Chunk
	return nil
}
