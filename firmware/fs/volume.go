package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/firmware/api"
)

// Sizes of the volume's accounting.
const (
	// DefaultCapacity is the size of the storage partition.
	DefaultCapacity = 12 << 20
	// BlockSize is the unit of allocation: every file takes its size
	// rounded up to whole blocks (at least one), every directory but the
	// root one block, as on a flash file system.
	BlockSize = 4096
	// Margin is kept free: a write that would leave less fails with 507.
	Margin = 32 << 10
)

// ScreenGuard stops the screen showing a file before the file changes.
// Release is called with the volume path of a file about to be moved,
// replaced or deleted, or of a directory about to be moved or deleted
// (meaning every file under it).
type ScreenGuard interface {
	Release(path string)
}

// Usage is the reply of GET /fs.
type Usage struct {
	Root  string `json:"root"`
	Total int64  `json:"total" doc:"capacity in bytes"`
	Used  int64  `json:"used" doc:"bytes taken, counting whole 4 KiB blocks per file and directory"`
	Free  int64  `json:"free"`
}

// Entry describes a file or directory.
type Entry struct {
	Name  string `json:"name" doc:"last segment; / for the root"`
	Path  string `json:"path"`
	Type  string `json:"type" doc:"file or dir"`
	Size  int64  `json:"size" doc:"bytes; 0 for a directory"`
	MTime string `json:"mtime" doc:"last change, RFC 3339 UTC to the second"`
	// SHA256 is the hex SHA-256 of a file's bytes, only when asked.
	SHA256 string `json:"sha256,omitempty"`
}

// Listing is the reply of GET /fs/list.
type Listing struct {
	Path    string  `json:"path"`
	Entries []Entry `json:"entries" doc:"sorted by name"`
}

// Entry types.
const (
	TypeFile = "file"
	TypeDir  = "dir"
)

// Volume is the storage volume: a directory of the host standing for the
// board's storage partition, with a fixed capacity. Every path is checked
// by Clean, every operation goes through an os.Root so nothing escapes
// the directory, and symbolic links (which the API never makes) are
// refused rather than followed. Usage is measured by walking the
// directory, so several Volumes over one directory agree.
type Volume struct {
	dir      string
	root     *os.Root
	capacity int64
	guard    atomic.Pointer[ScreenGuard]
}

// OpenVolume opens (creating it if needed) the volume in dir with the
// given capacity (DefaultCapacity when 0), and removes any *.part file a
// power cut left behind. guard may be nil.
func OpenVolume(dir string, capacity int64, guard ScreenGuard) (*Volume, error) {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("fs: volume: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("fs: volume: %w", err)
	}
	v := &Volume{dir: dir, root: root, capacity: capacity}
	v.SetGuard(guard)
	if err := v.removeParts(); err != nil {
		root.Close()
		return nil, err
	}
	return v, nil
}

// Close releases the volume's directory.
func (v *Volume) Close() error { return v.root.Close() }

// Dir is the host directory holding the volume.
func (v *Volume) Dir() string { return v.dir }

func (v *Volume) removeParts() error {
	var parts []string
	err := iofs.WalkDir(v.root.FS(), ".", func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), boardapi.PartSuffix) {
			parts = append(parts, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fs: scanning volume: %w", err)
	}
	for _, p := range parts {
		if err := v.root.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("fs: removing leftover %s: %w", p, err)
		}
	}
	return nil
}

func blocks(size int64) int64 {
	if size <= 0 {
		return BlockSize
	}
	return (size + BlockSize - 1) / BlockSize * BlockSize
}

// Usage measures the volume.
func (v *Volume) Usage() Usage {
	used := int64(0)
	_ = iofs.WalkDir(v.root.FS(), ".", func(p string, d iofs.DirEntry, err error) error {
		if err != nil || p == "." {
			return nil
		}
		switch {
		case d.IsDir():
			used += BlockSize
		case d.Type().IsRegular():
			if fi, err := d.Info(); err == nil {
				used += blocks(fi.Size())
			}
		}
		return nil
	})
	free := max(v.capacity-used, 0)
	return Usage{Root: "/", Total: v.capacity, Used: used, Free: free}
}

// reserve checks that need more bytes leave the margin free.
func (v *Volume) reserve(need int64) error {
	u := v.Usage()
	if u.Used+need > v.capacity-Margin {
		return api.Errorf(api.ErrNoSpace, "needs %d bytes, %d free, %d kept in reserve", need, u.Free, Margin)
	}
	return nil
}

// found is what look learns of a path.
type found struct {
	rel  string
	info os.FileInfo // nil when nothing is there
	// missingDir is set when a directory on the way does not exist.
	missingDir string
}

// look checks p and walks it one segment at a time without following
// links: a link or special file on the way is bad_path, a file on the
// way not_a_directory.
func (v *Volume) look(p string) (found, error) {
	rel, err := boardapi.CleanPath(p)
	if err != nil {
		return found{}, err
	}
	f := found{rel: rel}
	if rel == "." {
		fi, err := v.root.Lstat(".")
		if err != nil {
			return f, fmt.Errorf("fs: volume root: %w", err)
		}
		f.info = fi
		return f, nil
	}
	segs := strings.Split(rel, "/")
	for i := range segs {
		cur := strings.Join(segs[:i+1], "/")
		fi, err := v.root.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) {
			if i < len(segs)-1 {
				f.missingDir = volumePath(cur)
			}
			return f, nil
		}
		if err != nil {
			return f, fmt.Errorf("fs: %s: %w", volumePath(cur), err)
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			return f, api.Errorf(api.ErrBadPath, "%s is a link or special file", volumePath(cur))
		}
		if i < len(segs)-1 && !fi.IsDir() {
			return f, api.Errorf(api.ErrNotADirectory, "%s is a file", volumePath(cur))
		}
		if i == len(segs)-1 {
			f.info = fi
		}
	}
	return f, nil
}

// existing is look for a path that must exist.
func (v *Volume) existing(p string) (found, error) {
	f, err := v.look(p)
	if err != nil {
		return f, err
	}
	if f.info == nil {
		return f, api.Errorf(api.ErrNotFound, "%s does not exist", p)
	}
	return f, nil
}

func entryOf(rel string, fi os.FileInfo) Entry {
	e := Entry{Name: baseOf(rel), Path: volumePath(rel), Type: TypeFile, Size: fi.Size(),
		MTime: fi.ModTime().UTC().Format(time.RFC3339)}
	if rel == "." {
		e.Name = "/"
	}
	if fi.IsDir() {
		e.Type, e.Size = TypeDir, 0
	}
	return e
}

// Resolve checks p and returns the host path of what is there (for
// readers such as the media checks); not_found when nothing is.
func (v *Volume) Resolve(p string) (string, error) {
	f, err := v.existing(p)
	if err != nil {
		return "", err
	}
	return filepath.Join(v.dir, filepath.FromSlash(f.rel)), nil
}

// Stat describes p; with hash, a file's SHA-256 is computed (ctx ends it).
func (v *Volume) Stat(ctx context.Context, p string, hash bool) (Entry, error) {
	f, err := v.existing(p)
	if err != nil {
		return Entry{}, err
	}
	e := entryOf(f.rel, f.info)
	if hash && e.Type == TypeFile {
		sum, err := v.hashFile(ctx, f.rel)
		if err != nil {
			return Entry{}, err
		}
		e.SHA256 = sum
	}
	return e, nil
}

func (v *Volume) hashFile(ctx context.Context, rel string) (string, error) {
	file, err := v.root.Open(rel)
	if err != nil {
		return "", fmt.Errorf("fs: %w", err)
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, file}); err != nil {
		return "", fmt.Errorf("fs: hashing %s: %w", volumePath(rel), err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// List lists the directory p, sorted by name; upload temporaries, links
// and special files are left out.
func (v *Volume) List(p string) (Listing, error) {
	f, err := v.existing(p)
	if err != nil {
		return Listing{}, err
	}
	if !f.info.IsDir() {
		return Listing{}, api.Errorf(api.ErrNotADirectory, "%s is a file", p)
	}
	des, err := v.root.FS().(iofs.ReadDirFS).ReadDir(f.rel)
	if err != nil {
		return Listing{}, fmt.Errorf("fs: listing %s: %w", p, err)
	}
	out := Listing{Path: volumePath(f.rel), Entries: []Entry{}}
	for _, d := range des {
		if strings.HasSuffix(d.Name(), boardapi.PartSuffix) || (!d.IsDir() && !d.Type().IsRegular()) {
			continue
		}
		fi, err := d.Info()
		if err != nil {
			continue
		}
		out.Entries = append(out.Entries, entryOf(joinRel(f.rel, d.Name()), fi))
	}
	sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].Name < out.Entries[j].Name })
	return out, nil
}

func joinRel(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// SetGuard replaces the screen guard (nil: none), for a screen feature
// installed after the volume.
func (v *Volume) SetGuard(g ScreenGuard) {
	if g == nil {
		v.guard.Store(nil)
		return
	}
	v.guard.Store(&g)
}

func (v *Volume) release(p string) {
	if g := v.guard.Load(); g != nil {
		(*g).Release(p)
	}
}

// Remove deletes p; a non-empty directory needs recursive. The root
// cannot be removed.
func (v *Volume) Remove(p string, recursive bool) error {
	f, err := v.existing(p)
	if err != nil {
		return err
	}
	if f.rel == "." {
		return api.Errorf(api.ErrBadPath, "the root cannot be deleted")
	}
	if f.info.IsDir() && !recursive {
		des, err := v.root.FS().(iofs.ReadDirFS).ReadDir(f.rel)
		if err != nil {
			return fmt.Errorf("fs: %w", err)
		}
		if len(des) > 0 {
			return api.Errorf(api.ErrNotEmpty, "%s holds %d entries; delete with recursive=true", p, len(des))
		}
	}
	v.release(volumePath(f.rel))
	if err := v.root.RemoveAll(f.rel); err != nil {
		return fmt.Errorf("fs: deleting %s: %w", p, err)
	}
	return nil
}

// parentReady checks the parent directory of a destination, creating the
// missing ones when parents is set.
func (v *Volume) parentReady(f found, parents bool) error {
	if f.missingDir == "" {
		return nil
	}
	if !parents {
		return api.Errorf(api.ErrNotFound, "directory %s does not exist (parents=true creates it)", f.missingDir)
	}
	dir := parentOf(f.rel)
	missing := int64(strings.Count(f.rel, "/") - strings.Count(strings.TrimPrefix(f.missingDir, "/"), "/"))
	if err := v.reserve(missing * BlockSize); err != nil {
		return err
	}
	if err := v.root.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fs: creating %s: %w", volumePath(dir), err)
	}
	return nil
}

// Mkdir creates the directory p (and missing parents with parents).
func (v *Volume) Mkdir(p string, parents bool) (Entry, error) {
	f, err := v.look(p)
	if err != nil {
		return Entry{}, err
	}
	if f.info != nil {
		return Entry{}, api.Errorf(api.ErrExists, "%s already exists", p)
	}
	if f.missingDir != "" && !parents {
		return Entry{}, api.Errorf(api.ErrNotFound, "directory %s does not exist (parents=true creates it)", f.missingDir)
	}
	if err := v.reserve(BlockSize); err != nil {
		return Entry{}, err
	}
	if err := v.parentReady(f, parents); err != nil {
		return Entry{}, err
	}
	if err := v.root.Mkdir(f.rel, 0o755); err != nil {
		return Entry{}, fmt.Errorf("fs: mkdir %s: %w", p, err)
	}
	return v.Stat(context.Background(), p, false)
}

// Move renames from to to. A directory moves with its contents; with
// overwrite a file replaces a file at to, never a directory.
func (v *Volume) Move(from, to string, overwrite bool) (Entry, error) {
	src, err := v.existing(from)
	if err != nil {
		return Entry{}, err
	}
	if src.rel == "." {
		return Entry{}, api.Errorf(api.ErrBadPath, "the root cannot be moved")
	}
	dst, err := v.look(to)
	if err != nil {
		return Entry{}, err
	}
	if dst.rel == "." || dst.rel == src.rel || strings.HasPrefix(dst.rel, src.rel+"/") {
		if dst.rel == src.rel {
			return entryOf(src.rel, src.info), nil
		}
		return Entry{}, api.Errorf(api.ErrBadPath, "cannot move %s into itself", from)
	}
	if dst.missingDir != "" {
		return Entry{}, api.Errorf(api.ErrNotFound, "directory %s does not exist", dst.missingDir)
	}
	if dst.info != nil {
		switch {
		case dst.info.IsDir():
			return Entry{}, api.Errorf(api.ErrExists, "%s is a directory; it is never replaced", to)
		case src.info.IsDir():
			return Entry{}, api.Errorf(api.ErrExists, "%s is a file; a directory does not replace it", to)
		case !overwrite:
			return Entry{}, api.Errorf(api.ErrExists, "%s already exists (overwrite=true replaces it)", to)
		}
		v.release(volumePath(dst.rel))
	}
	v.release(volumePath(src.rel))
	if err := v.root.Rename(src.rel, dst.rel); err != nil {
		return Entry{}, fmt.Errorf("fs: moving %s: %w", from, err)
	}
	v.syncDir(parentOf(dst.rel))
	return v.Stat(context.Background(), to, false)
}

// PutOptions are the choices of an upload or copy.
type PutOptions struct {
	Overwrite bool
	Parents   bool
	// SHA256, when set, must match the bytes written.
	SHA256 []byte
}

// destination checks where a new file will go.
func (v *Volume) destination(p string, opt PutOptions) (found, error) {
	dst, err := v.look(p)
	if err != nil {
		return dst, err
	}
	if dst.rel == "." {
		return dst, api.Errorf(api.ErrIsADirectory, "/ is a directory")
	}
	if dst.info != nil {
		if dst.info.IsDir() {
			return dst, api.Errorf(api.ErrIsADirectory, "%s is a directory", p)
		}
		if !opt.Overwrite {
			return dst, api.Errorf(api.ErrExists, "%s already exists (overwrite=true replaces it)", p)
		}
	}
	if dst.missingDir != "" && !opt.Parents {
		return dst, api.Errorf(api.ErrNotFound, "directory %s does not exist (parents=true creates it)", dst.missingDir)
	}
	return dst, nil
}

// Put writes length bytes from r to p: into <name>.part beside it, synced,
// then renamed over p once every byte arrived and the SHA-256 (if given)
// matched. On any failure the .part file is removed and p is untouched.
// created reports a new file (false: replaced).
func (v *Volume) Put(ctx context.Context, p string, r io.Reader, length int64, opt PutOptions) (e Entry, created bool, err error) {
	if length < 0 {
		return Entry{}, false, api.Errorf(api.ErrLengthRequired, "the upload's length must be known")
	}
	dst, err := v.destination(p, opt)
	if err != nil {
		return Entry{}, false, err
	}
	if err := v.reserve(blocks(length)); err != nil {
		return Entry{}, false, err
	}
	if err := v.parentReady(dst, opt.Parents); err != nil {
		return Entry{}, false, err
	}
	if err := v.writePart(ctx, dst.rel, r, length, opt.SHA256); err != nil {
		return Entry{}, false, err
	}
	created = dst.info == nil
	if !created {
		v.release(volumePath(dst.rel))
	}
	if err := v.root.Rename(dst.rel+boardapi.PartSuffix, dst.rel); err != nil {
		_ = v.root.Remove(dst.rel + boardapi.PartSuffix)
		return Entry{}, false, fmt.Errorf("fs: placing %s: %w", p, err)
	}
	v.syncDir(parentOf(dst.rel))
	e, err = v.Stat(ctx, p, false)
	return e, created, err
}

// writePart writes exactly length bytes of r to rel.part and syncs it.
func (v *Volume) writePart(ctx context.Context, rel string, r io.Reader, length int64, want []byte) (err error) {
	part := rel + boardapi.PartSuffix
	file, err := v.root.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("fs: creating %s: %w", volumePath(part), err)
	}
	defer func() {
		if err != nil {
			file.Close()
			_ = v.root.Remove(part)
		}
	}()
	h := sha256.New()
	w := &spaceWriter{w: io.MultiWriter(file, h), left: length}
	n, err := io.Copy(w, io.LimitReader(ctxReader{ctx, r}, length))
	if err != nil {
		var apiErr *api.Error
		if errors.As(err, &apiErr) {
			return err
		}
		return api.Errorf(api.ErrBadRequest, "upload cut off after %d of %d bytes: %v", n, length, err)
	}
	if n < length {
		return api.Errorf(api.ErrBadRequest, "upload cut off after %d of %d bytes", n, length)
	}
	if err := matchSHA(h, want); err != nil {
		return err
	}
	if err := file.Sync(); err != nil {
		return fmt.Errorf("fs: syncing %s: %w", volumePath(part), err)
	}
	return file.Close()
}

func matchSHA(h hash.Hash, want []byte) error {
	if want == nil {
		return nil
	}
	if got := h.Sum(nil); string(got) != string(want) {
		return api.Errorf(api.ErrSHA256Mismatch, "sha256 of the bytes received is %x, not %x", got, want)
	}
	return nil
}

// spaceWriter refuses bytes beyond the space reserved for them, so a
// source longer than announced cannot fill the volume.
type spaceWriter struct {
	w    io.Writer
	left int64
}

func (s *spaceWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > s.left {
		return 0, api.Errorf(api.ErrNoSpace, "more bytes than announced")
	}
	s.left -= int64(len(p))
	return s.w.Write(p)
}

// Copy copies the file from to to (files only), through a .part file as
// an upload.
func (v *Volume) Copy(ctx context.Context, from, to string, overwrite bool) (Entry, error) {
	src, err := v.existing(from)
	if err != nil {
		return Entry{}, err
	}
	if src.info.IsDir() {
		return Entry{}, api.Errorf(api.ErrIsADirectory, "%s is a directory; copy takes files only", from)
	}
	dst, err := v.destination(to, PutOptions{Overwrite: overwrite})
	if err != nil {
		return Entry{}, err
	}
	if dst.rel == src.rel {
		return entryOf(src.rel, src.info), nil
	}
	if err := v.reserve(blocks(src.info.Size())); err != nil {
		return Entry{}, err
	}
	in, err := v.root.Open(src.rel)
	if err != nil {
		return Entry{}, fmt.Errorf("fs: %w", err)
	}
	defer in.Close()
	if err := v.writePart(ctx, dst.rel, in, src.info.Size(), nil); err != nil {
		return Entry{}, err
	}
	if dst.info != nil {
		v.release(volumePath(dst.rel))
	}
	if err := v.root.Rename(dst.rel+boardapi.PartSuffix, dst.rel); err != nil {
		_ = v.root.Remove(dst.rel + boardapi.PartSuffix)
		return Entry{}, fmt.Errorf("fs: placing %s: %w", to, err)
	}
	v.syncDir(parentOf(dst.rel))
	return v.Stat(ctx, to, false)
}

// Open opens the file p for reading.
func (v *Volume) Open(p string) (*os.File, Entry, error) {
	f, err := v.existing(p)
	if err != nil {
		return nil, Entry{}, err
	}
	if f.info.IsDir() {
		return nil, Entry{}, api.Errorf(api.ErrIsADirectory, "%s is a directory", p)
	}
	file, err := v.root.Open(f.rel)
	if err != nil {
		return nil, Entry{}, fmt.Errorf("fs: %w", err)
	}
	return file, entryOf(f.rel, f.info), nil
}

func (v *Volume) syncDir(rel string) {
	if d, err := v.root.Open(rel); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// ctxReader stops reading once ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
