package fs

import (
	"strings"
	"unicode/utf8"

	"github.com/holofleet/holofleet/firmware/api"
)

// Limits of names and paths on the volume.
const (
	// MaxName is the longest name of one file or directory, in bytes.
	MaxName = 63
	// MaxPath is the longest path, in bytes, including the leading slash.
	MaxPath = 159
	// PartSuffix marks an upload or copy in progress: the file is written
	// as <name>.part beside its destination and renamed when complete.
	// Users cannot name a file so; leftovers are removed at start.
	PartSuffix = ".part"
)

// Clean checks a volume path against the path rules and returns it
// relative to the volume root, as os.Root wants it: "." for "/", else
// the segments joined by "/". The rules: absolute; no empty, "." or ".."
// segment (so no "//" and no trailing "/" except the root itself); names
// at most MaxName bytes of valid UTF-8 without control characters, not
// ending in PartSuffix; the whole path at most MaxPath bytes. A break
// gives 400 bad_path naming the rule.
func Clean(p string) (string, error) {
	if p == "" {
		return "", api.Errorf(api.ErrBadPath, "path is empty")
	}
	if p[0] != '/' {
		return "", api.Errorf(api.ErrBadPath, "path %q must start with /", p)
	}
	if len(p) > MaxPath {
		return "", api.Errorf(api.ErrBadPath, "path is %d bytes; at most %d", len(p), MaxPath)
	}
	if p == "/" {
		return ".", nil
	}
	if !utf8.ValidString(p) {
		return "", api.Errorf(api.ErrBadPath, "path is not valid UTF-8")
	}
	rel := p[1:]
	for seg := range strings.SplitSeq(rel, "/") {
		switch {
		case seg == "":
			return "", api.Errorf(api.ErrBadPath, "path %q has an empty segment", p)
		case seg == "." || seg == "..":
			return "", api.Errorf(api.ErrBadPath, "path %q has a %q segment", p, seg)
		case len(seg) > MaxName:
			return "", api.Errorf(api.ErrBadPath, "name %q is %d bytes; at most %d", seg, len(seg), MaxName)
		case strings.HasSuffix(seg, PartSuffix):
			return "", api.Errorf(api.ErrBadPath, "names ending in %s are reserved for uploads in progress", PartSuffix)
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7F {
				return "", api.Errorf(api.ErrBadPath, "path %q has a control character", p)
			}
		}
	}
	return rel, nil
}

// volumePath turns a relative path from Clean back into a volume path.
func volumePath(rel string) string {
	if rel == "." || rel == "" {
		return "/"
	}
	return "/" + rel
}

// parentOf returns the relative parent of rel ("." at the top).
func parentOf(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return "."
}

// baseOf returns the last segment of rel.
func baseOf(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[i+1:]
	}
	return rel
}
