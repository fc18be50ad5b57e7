package installation

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Contents is the gateway's content store: files kept once per content,
// named by their SHA-256, written whole before they appear:
//
//	<dir>/<sha256 hex>     the file, read-only once in place
//	<dir>/put-*.tmp        a file being added (removed by OpenContents)
//
// Adding bytes already present costs a hash and no second copy.
type Contents struct {
	dir string
}

// OpenContents opens (creating) the store in dir and removes unfinished
// additions.
func OpenContents(dir string) (*Contents, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrContent, err)
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, "put-*.tmp"))
	for _, t := range tmps {
		_ = os.Remove(t)
	}
	return &Contents{dir: dir}, nil
}

// Dir is the store's directory.
func (c *Contents) Dir() string { return c.dir }

func (c *Contents) file(sha string) (string, error) {
	if !shaRE.MatchString(sha) {
		return "", fmt.Errorf("%w: %q is not a SHA-256", ErrNotFound, sha)
	}
	return filepath.Join(c.dir, sha), nil
}

// Add copies r into the store and returns its SHA-256 and size. When want
// is not empty the bytes must hash to it (ErrContent otherwise; nothing
// is kept).
func (c *Contents) Add(r io.Reader, want string) (string, int64, error) {
	tmp, err := os.CreateTemp(c.dir, "put-*.tmp")
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrContent, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrContent, err)
	}
	sha := hex.EncodeToString(h.Sum(nil))
	if want != "" && !strings.EqualFold(want, sha) {
		return "", 0, fmt.Errorf("%w: the bytes hash to %s, not %s", ErrContent, sha, want)
	}
	dst := filepath.Join(c.dir, sha)
	if fi, err := os.Stat(dst); err == nil && fi.Size() == n {
		return sha, n, nil // already kept
	}
	if err := os.Chmod(tmp.Name(), 0o440); err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrContent, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrContent, err)
	}
	return sha, n, nil
}

// AddFile adds a local file.
func (c *Contents) AddFile(name, want string) (string, int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrContent, err)
	}
	defer f.Close()
	return c.Add(f, want)
}

// Has reports whether the store keeps sha, and its size.
func (c *Contents) Has(sha string) (int64, bool) {
	p, err := c.file(sha)
	if err != nil {
		return 0, false
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	return fi.Size(), true
}

// Open opens the content sha for reading.
func (c *Contents) Open(sha string) (*os.File, int64, error) {
	p, err := c.file(sha)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: content %s", ErrNotFound, sha)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("%w: %v", ErrContent, err)
	}
	return f, fi.Size(), nil
}

// Load adds every content file of d to the store (paths relative to
// base, the description's folder) and fills in each content's SHA-256 and
// size; content given by sha256 alone must already be in the store.
func (c *Contents) Load(d *Description, base string) error {
	var ps []Problem
	for name, ct := range d.Content {
		p := join("content", name)
		if ct.File != "" {
			fn := ct.File
			if !filepath.IsAbs(fn) {
				fn = filepath.Join(base, fn)
			}
			sha, n, err := c.AddFile(fn, ct.SHA256)
			if err != nil {
				ps = append(ps, Problem{d.at(join(p, "file")), fmt.Sprintf("content %s: %v", name, err)})
				continue
			}
			ct.SHA256, ct.Size = sha, n
		} else {
			n, ok := c.Has(ct.SHA256)
			if !ok {
				ps = append(ps, Problem{d.at(join(p, "sha256")), fmt.Sprintf("content %s: the gateway keeps no content %s; give file", name, ct.SHA256)})
				continue
			}
			ct.Size = n
		}
		d.Content[name] = ct
	}
	if len(ps) > 0 {
		sortProblems(ps)
		return &ParseError{File: d.file, Problems: ps}
	}
	return nil
}
