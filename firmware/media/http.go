package media

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/holofleet/holofleet/firmware/api"
)

// Volume finds files on the storage volume. The files feature's volume
// implements it.
type Volume interface {
	// Resolve checks a volume path (such as /clips/a.mov) and returns the
	// host path of what is there, or an API error (bad_path, not_found,
	// not_a_directory).
	Resolve(p string) (string, error)
}

// Extensions lists the file name endings GET /media reports.
var Extensions = map[string]Kind{".mov": KindClip, ".png": KindImage, ".jpg": KindImage, ".jpeg": KindImage, ".gif": KindImage}

// FileInfo is the reply of GET /media/info: where the file is and what it is.
type FileInfo struct {
	Name string `json:"name"`
	Path string `json:"path"`
	Info
}

// Entry is one file of GET /media. A file named like media that the
// screen cannot show is listed with playable false and the reason.
type Entry struct {
	FileInfo
	Playable bool   `json:"playable"`
	Reason   string `json:"reason,omitempty" doc:"why the screen cannot show it"`
}

// List is the reply of GET /media.
type List struct {
	Path    string  `json:"path"`
	Entries []Entry `json:"entries" doc:"every .mov, .png, .jpg, .jpeg and .gif under path, sorted by path"`
}

// OpenPath checks the file at volume path p and opens it for playing.
// Errors are API errors: bad_path, not_found, is_a_directory, or
// not_playable with the reason.
func OpenPath(v Volume, p string) (Clip, error) {
	host, err := v.Resolve(p)
	if err != nil {
		return nil, err
	}
	c, err := OpenFile(host)
	if err != nil {
		return nil, apiError(p, err)
	}
	return c, nil
}

// Probe is OpenPath returning only the description.
func Probe(v Volume, p string) (Info, error) {
	c, err := OpenPath(v, p)
	if err != nil {
		return Info{}, err
	}
	defer c.Close()
	return c.Info(), nil
}

func apiError(p string, err error) error {
	switch {
	case errors.Is(err, ErrNotPlayable):
		return api.Errorf(api.ErrNotPlayable, "%s: %v", p, err)
	case errors.Is(err, errIsDir):
		return api.Errorf(api.ErrIsADirectory, "%s is a directory", p)
	case errors.Is(err, fs.ErrNotExist):
		return api.Errorf(api.ErrNotFound, "%s does not exist", p)
	}
	return err
}

// Routes returns GET /media and GET /media/info over v.
func Routes(v Volume) []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/media", Link: true, Summary: "Clips and images under a directory (default /), by path",
			Response: List{}, Query: []api.Param{{Name: "path", Type: "string", Description: "a directory; / when omitted"}},
			Errors: []*api.Error{api.ErrBadPath, api.ErrNotADirectory, api.ErrNotFound},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				p := "/"
				if r.URL.Query().Has("path") {
					p = r.URL.Query().Get("path")
				}
				l, err := ListDir(v, p)
				if err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusOK, l)
			})},
		{Method: http.MethodGet, Path: "/media/info", Link: true, Summary: "What a playable file is: kind, size, frames, frame rate, dimensions",
			Response: FileInfo{}, Query: []api.Param{{Name: "path", Type: "string", Required: true, Description: "a file"}},
			Errors: []*api.Error{api.ErrBadPath, api.ErrNotADirectory, api.ErrIsADirectory, api.ErrNotFound, api.ErrNotPlayable},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				p := r.URL.Query().Get("path")
				info, err := Probe(v, p)
				if err != nil {
					api.WriteError(w, err)
					return
				}
				api.WriteJSON(w, http.StatusOK, FileInfo{Name: path.Base(p), Path: p, Info: info})
			})},
	}
}

// maxWalkPath stops the walk of ListDir descending past the volume's
// longest path.
const maxWalkPath = 159

// ListDir lists the media files under the directory p, at any depth.
func ListDir(v Volume, p string) (List, error) {
	host, err := v.Resolve(p)
	if err != nil {
		return List{}, err
	}
	st, err := os.Stat(host)
	if err != nil {
		return List{}, apiError(p, err)
	}
	if !st.IsDir() {
		return List{}, api.Errorf(api.ErrNotADirectory, "%s is a file", p)
	}
	out := List{Path: p, Entries: []Entry{}}
	var walk func(hostDir, volDir string)
	walk = func(hostDir, volDir string) {
		des, err := os.ReadDir(hostDir)
		if err != nil {
			return
		}
		for _, d := range des {
			vp := strings.TrimSuffix(volDir, "/") + "/" + d.Name()
			if len(vp) > maxWalkPath {
				continue
			}
			hp := filepath.Join(hostDir, d.Name())
			switch {
			case d.IsDir():
				walk(hp, vp)
			case d.Type().IsRegular():
				kind, ok := Extensions[strings.ToLower(path.Ext(d.Name()))]
				if !ok {
					continue
				}
				e := Entry{FileInfo: FileInfo{Name: d.Name(), Path: vp}, Playable: true}
				info, err := ProbeFile(hp)
				if err != nil {
					e.Playable, e.Reason = false, err.Error()
					e.Kind = kind
					if fi, err := d.Info(); err == nil {
						e.Size = fi.Size()
					}
				} else {
					e.Info = info
				}
				out.Entries = append(out.Entries, e)
			}
		}
	}
	walk(host, p)
	sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].Path < out.Entries[j].Path })
	return out, nil
}
