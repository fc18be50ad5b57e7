package boardapi

import (
	"strings"
	"unicode/utf8"
)

// Limits of names and paths on a board's storage volume (/fs, the screen's
// clips and images).
const (
	// MaxName is the longest name of one file or directory, in bytes.
	MaxName = 63
	// MaxPath is the longest path, in bytes, including the leading slash.
	MaxPath = 159
	// PartSuffix marks an upload or copy in progress: the file is written
	// as <name>.part beside its destination and renamed when complete.
	// Users cannot name a file so.
	PartSuffix = ".part"
)

// CleanPath checks a volume path against the path rules and returns it
// relative to the volume root, as os.Root wants it: "." for "/", else
// the segments joined by "/". The rules: absolute; no empty, "." or ".."
// segment (so no "//" and no trailing "/" except the root itself); names
// at most MaxName bytes of valid UTF-8 without control characters, not
// ending in PartSuffix; the whole path at most MaxPath bytes. A break
// gives 400 bad_path naming the rule.
func CleanPath(p string) (string, error) {
	if p == "" {
		return "", Errorf(ErrBadPath, "path is empty")
	}
	if p[0] != '/' {
		return "", Errorf(ErrBadPath, "path %q must start with /", p)
	}
	if len(p) > MaxPath {
		return "", Errorf(ErrBadPath, "path is %d bytes; at most %d", len(p), MaxPath)
	}
	if p == "/" {
		return ".", nil
	}
	if !utf8.ValidString(p) {
		return "", Errorf(ErrBadPath, "path is not valid UTF-8")
	}
	rel := p[1:]
	for seg := range strings.SplitSeq(rel, "/") {
		switch {
		case seg == "":
			return "", Errorf(ErrBadPath, "path %q has an empty segment", p)
		case seg == "." || seg == "..":
			return "", Errorf(ErrBadPath, "path %q has a %q segment", p, seg)
		case len(seg) > MaxName:
			return "", Errorf(ErrBadPath, "name %q is %d bytes; at most %d", seg, len(seg), MaxName)
		case strings.HasSuffix(seg, PartSuffix):
			return "", Errorf(ErrBadPath, "names ending in %s are reserved for uploads in progress", PartSuffix)
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7F {
				return "", Errorf(ErrBadPath, "path %q has a control character", p)
			}
		}
	}
	return rel, nil
}
