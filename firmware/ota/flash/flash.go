// Package flash is the simulated board's flash: each partition of the
// partition table is a file of fixed size under <data>/flash/, named by
// its label. It implements hal.Flash and hal.Partition.
//
// The partition table of a simulated board:
//
//	label    address     size
//	otadata  0x0000d000  0x2000 (two 4 KiB sectors, see package otadata)
//	ota_0    0x00010000  SlotSize (48 MiB)
//	ota_1    0x03010000  SlotSize
//
// A slot holds a host executable of holo-board (about 15 MB with the race
// detector) inside an application image, so 48 MiB leaves room to grow.
// Slot files are sparse: they take disk space only where written. A new
// otadata file reads as erased flash (0xFF); a new slot reads as zeros,
// which no image check accepts. Partition files are opened per use and
// written with WriteAt and Sync, so a process killed mid-write leaves the
// bytes it wrote and no more, as flash would.
package flash

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/hal"
)

// Partition geometry.
const (
	SlotSize     = image.SlotSize // the image format's slot size
	OTADataSize  = 0x2000
	OTADataAddr  = 0xd000
	FirstSlot    = 0x10000
	EraseSector  = 4096
	OTAData      = "otadata"
	Dir          = "flash"
	erasedByte   = 0xFF
	partFileMode = 0o644
)

// Slots lists the application slots in order: slot i is Slots[i].
var Slots = [2]string{"ota_0", "ota_1"}

// Errors of the flash.
var (
	// ErrNoPartition means the label is not in the partition table.
	ErrNoPartition = errors.New("flash: no such partition")
	// ErrRange means an access falls outside the partition.
	ErrRange = errors.New("flash: access outside the partition")
)

// Entry is one row of the partition table.
type Entry struct {
	Label   string
	Address int64
	Size    int64
}

// Table is the partition table of a simulated board.
func Table() []Entry {
	return []Entry{
		{OTAData, OTADataAddr, OTADataSize},
		{Slots[0], FirstSlot, SlotSize},
		{Slots[1], FirstSlot + SlotSize, SlotSize},
	}
}

// Lookup returns the table entry of label.
func Lookup(label string) (Entry, error) {
	for _, e := range Table() {
		if e.Label == label {
			return e, nil
		}
	}
	return Entry{}, fmt.Errorf("%w: %q", ErrNoPartition, label)
}

// Flash is the partitions under one data directory.
type Flash struct {
	dir string
	mu  sync.Mutex
}

// Open returns the flash of the board whose data directory is dataDir,
// creating <dataDir>/flash when needed.
func Open(dataDir string) (*Flash, error) {
	dir := filepath.Join(dataDir, Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("flash: %w", err)
	}
	return &Flash{dir: dir}, nil
}

// Dir is the directory holding the partition files.
func (f *Flash) Dir() string { return f.dir }

// Partition opens the partition named label, creating its file on first
// use. The caller closes it.
func (f *Flash) Partition(label string) (hal.Partition, error) { return f.Open(label) }

// Open is Partition returning the concrete type.
func (f *Flash) Open(label string) (*Part, error) {
	e, err := Lookup(label)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	path := filepath.Join(f.dir, label)
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, partFileMode)
	if err != nil {
		return nil, fmt.Errorf("flash: %w", err)
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("flash: %w", err)
	}
	p := &Part{f: fh, e: e}
	if st.Size() < e.Size {
		if label == OTAData {
			// Fresh otadata reads as erased flash.
			if err := p.fill(st.Size(), e.Size-st.Size(), erasedByte); err != nil {
				fh.Close()
				return nil, err
			}
		} else if err := fh.Truncate(e.Size); err != nil {
			fh.Close()
			return nil, fmt.Errorf("flash: %w", err)
		}
	}
	return p, nil
}

// Part is one open partition.
type Part struct {
	f *os.File
	e Entry
}

var _ hal.Partition = (*Part)(nil)

func (p *Part) Label() string  { return p.e.Label }
func (p *Part) Size() int64    { return p.e.Size }
func (p *Part) Address() int64 { return p.e.Address }
func (p *Part) Close() error   { return p.f.Close() }
func (p *Part) Sync() error    { return p.f.Sync() }
func (p *Part) check(off, n int64) error {
	if off < 0 || n < 0 || off+n > p.e.Size {
		return fmt.Errorf("%w: %s [%d, %d) of %d", ErrRange, p.e.Label, off, off+n, p.e.Size)
	}
	return nil
}

// ReadAt reads within the partition.
func (p *Part) ReadAt(b []byte, off int64) (int, error) {
	if err := p.check(off, int64(len(b))); err != nil {
		return 0, err
	}
	return p.f.ReadAt(b, off)
}

// WriteAt writes within the partition.
func (p *Part) WriteAt(b []byte, off int64) (int, error) {
	if err := p.check(off, int64(len(b))); err != nil {
		return 0, err
	}
	return p.f.WriteAt(b, off)
}

// Erase sets [off, off+n) to 0xFF.
func (p *Part) Erase(off, n int64) error {
	if err := p.check(off, n); err != nil {
		return err
	}
	return p.fill(off, n, erasedByte)
}

func (p *Part) fill(off, n int64, v byte) error {
	buf := make([]byte, min(n, 64<<10))
	for i := range buf {
		buf[i] = v
	}
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := p.f.WriteAt(buf[:k], off); err != nil {
			return fmt.Errorf("flash: %w", err)
		}
		off += k
		n -= k
	}
	return nil
}

// Lock takes an exclusive advisory lock on the partition file, waiting
// for other processes to let go; unlock releases it. Writers of otadata
// use it so a bootloader and an application never interleave.
func (p *Part) Lock() (unlock func(), err error) {
	for {
		err = unix.Flock(int(p.f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("flash: lock %s: %w", p.e.Label, err)
	}
	return func() { _ = unix.Flock(int(p.f.Fd()), unix.LOCK_UN) }, nil
}

// Staged is a slot being rewritten out of place: its bytes go into a file
// beside the slot's (<label>.incoming) and replace the slot in one atomic
// rename when committed, so the slot holds its old image until then, and
// after a cut or an abort. It stands for a staging area a real board would
// not have: it lets an update be refused after its last byte (a bad
// signature) without having overwritten the slot.
//
// Commit exchanges the two files (renameat2 RENAME_EXCHANGE), so the
// slot's previous file becomes the next staging file and its pages are
// written over in place by the next update instead of being freed and
// allocated again. Whatever an update does not write of that file keeps
// old bytes, except the 8 KiB after the last byte written, which Commit
// zeroes: where a reader of the slot looks for a signature sector after
// an image (image.VerifyAt), only bytes of this update or zeros lie.
type Staged struct {
	f     *os.File
	e     Entry
	path  string
	final string
	dir   string
	end   int64 // past the last byte written
}

// StageSuffix ends the name of a staged slot's file.
const StageSuffix = ".incoming"

// Stage starts rewriting slot label; any earlier staged file of it is
// discarded. The caller commits or aborts.
func (f *Flash) Stage(label string) (*Staged, error) {
	e, err := Lookup(label)
	if err != nil {
		return nil, err
	}
	if label == OTAData {
		return nil, fmt.Errorf("%w: %s is not staged", ErrNoPartition, label)
	}
	path := filepath.Join(f.dir, label+StageSuffix)
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, partFileMode)
	if err != nil {
		return nil, fmt.Errorf("flash: %w", err)
	}
	return &Staged{f: fh, e: e, path: path, final: filepath.Join(f.dir, label), dir: f.dir}, nil
}

// DropStaged removes staged files left by a cut; call it when no update
// runs (at start).
func (f *Flash) DropStaged() {
	for _, l := range Slots {
		_ = os.Remove(filepath.Join(f.dir, l+StageSuffix))
	}
}

func (s *Staged) check(off, n int64) error {
	if off < 0 || n < 0 || off+n > s.e.Size {
		return fmt.Errorf("%w: %s [%d, %d) of %d", ErrRange, s.e.Label, off, off+n, s.e.Size)
	}
	return nil
}

// WriteAt writes within the slot being staged.
func (s *Staged) WriteAt(b []byte, off int64) (int, error) {
	if err := s.check(off, int64(len(b))); err != nil {
		return 0, err
	}
	s.end = max(s.end, off+int64(len(b)))
	return s.f.WriteAt(b, off)
}

// ReadAt reads back what was staged.
func (s *Staged) ReadAt(b []byte, off int64) (int, error) {
	if err := s.check(off, int64(len(b))); err != nil {
		return 0, err
	}
	return s.f.ReadAt(b, off)
}

// Size is the slot's size.
func (s *Staged) Size() int64 { return s.e.Size }

// Sync flushes what was written.
func (s *Staged) Sync() error { return s.f.Sync() }

// Commit makes the staged bytes the slot: the file is sized to the slot
// (the rest reads as zeros) and renamed over the slot's file. A cut
// before the rename leaves the old slot. Commit does not wait for the
// disk: call Durable before anything points at the slot (otadata
// selecting it), so that a cut never leaves a selected slot whose bytes
// did not reach the disk. Until then a cut may leave the slot with the
// old bytes, the new ones, or a mix; an unselected slot is never booted.
func (s *Staged) Commit() error {
	err := s.f.Truncate(s.e.Size)
	if err == nil && s.end < s.e.Size {
		_, err = s.f.WriteAt(make([]byte, min(tailClear, s.e.Size-s.end)), s.end)
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat2(unix.AT_FDCWD, s.path, unix.AT_FDCWD, s.final, unix.RENAME_EXCHANGE)
		if err != nil { // no slot file yet, or a file system without exchange
			err = os.Rename(s.path, s.final)
		}
	}
	if err != nil {
		_ = os.Remove(s.path)
		return fmt.Errorf("flash: committing %s: %w", s.e.Label, err)
	}
	return nil
}

// tailClear is what Commit zeroes after the last byte written: room for
// the padding and signature sector a reader looks for after an image.
const tailClear = 8 << 10

// Durable waits until the slot's bytes and its name are on the disk.
func (f *Flash) Durable(label string) error {
	p, err := f.Open(label)
	if err != nil {
		return err
	}
	err = p.Sync()
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(f.dir)
	}
	if err != nil {
		return fmt.Errorf("flash: syncing %s: %w", label, err)
	}
	return nil
}

// Abort drops the staged bytes; the slot keeps its old image. The
// staging file stays for the next update.
func (s *Staged) Abort() {
	_ = s.f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
