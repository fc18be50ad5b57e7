package fs

import "strings"

// The path rules of the volume (CleanPath, MaxName, MaxPath, PartSuffix)
// are the board API's: they live in bus/boardapi, so the gateway checks a
// screen path as the board does.

// volumePath turns a relative path from boardapi.CleanPath back into a volume path.
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
