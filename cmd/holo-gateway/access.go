package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/holofleet/holofleet/gateway/api"
	"github.com/holofleet/holofleet/gateway/audit"
)

// accessFlags are the flags of who may do what, how much, and the record.
type accessFlags struct {
	limits      api.Limits
	maxBody     sizeFlag
	metricsAuth bool
	allowHosts  listFlag
	boardsFile  string
	auditAge    time.Duration
	auditMax    int
}

func addAccessFlags(fs *flag.FlagSet, f *accessFlags) {
	d := api.DefaultLimits()
	f.limits = d
	f.maxBody = sizeFlag(d.MaxBody)
	fs.Var(&f.maxBody, "max-body", "largest REST request body and gRPC message (bytes; KiB, MiB suffixes); larger ones get 413 (firmware uploads excepted)")
	fs.DurationVar(&f.limits.ReadHeaderTimeout, "http-read-header-timeout", d.ReadHeaderTimeout, "time a client has to send a request's headers")
	fs.DurationVar(&f.limits.ReadTimeout, "http-read-timeout", d.ReadTimeout, "time a client has to send a whole request, body included (uploads and streams lift it)")
	fs.DurationVar(&f.limits.WriteTimeout, "http-write-timeout", d.WriteTimeout, "time a request has to be answered (event and rollout streams lift it)")
	fs.DurationVar(&f.limits.IdleTimeout, "http-idle-timeout", d.IdleTimeout, "time an idle keep-alive connection is kept")
	fs.IntVar(&f.limits.StreamsPerToken, "streams-per-token", d.StreamsPerToken, "event and rollout streams one token may hold open (then 429)")
	fs.IntVar(&f.limits.Streams, "streams-total", d.Streams, "event and rollout streams open on the gateway in all (then 429)")
	fs.IntVar(&f.limits.PublicStreamsPerSource, "public-streams-per-source", d.PublicStreamsPerSource, "public streams (gRPC health Watch; reflection in demo mode) one source address may hold open (then ResourceExhausted)")
	fs.IntVar(&f.limits.PublicStreams, "public-streams-total", d.PublicStreams, "public streams open on the gateway in all, a pool apart from the event streams (then ResourceExhausted)")
	fs.DurationVar(&f.limits.PublicStreamIdle, "public-stream-idle", d.PublicStreamIdle, "a health Watch or reflection stream that sends and receives nothing for this long ends (DeadlineExceeded)")
	fs.Float64Var(&f.limits.Rate, "rate", d.Rate, "changing requests a token may make per second on average (then 429); negative: no limit")
	fs.IntVar(&f.limits.Burst, "rate-burst", d.Burst, "changing requests a token may make at once")
	fs.BoolVar(&f.metricsAuth, "metrics-auth", false, "make /metrics need a viewer token (default: open, see docs/metrics.md)")
	fs.Var(&f.allowHosts, "allow-host", "Host name accepted besides localhost from callers without a token (demo, --insecure-lab); repeatable")
	fs.StringVar(&f.boardsFile, "boards-file", "", "file of LAN boards, one 'URL [PASSWORD]' a line, mode 0600 (keeps passwords out of ps)")
	fs.DurationVar(&f.auditAge, "audit-max-age", audit.DefaultMaxAge, "audit records older than this are dropped")
	fs.IntVar(&f.auditMax, "audit-max-records", audit.DefaultMaxRecords, "audit records kept at most (the oldest go first)")
}

// apiLimits is what the flags ask of the API: the defaults where a flag
// says 0 (api.Limits' own rule), a negative value to turn a limit off.
func (f *accessFlags) apiLimits() api.Limits {
	l := f.limits
	l.MaxBody = int64(f.maxBody)
	return l
}

// sizeFlag is a byte count: 1048576, 512KiB, 1MiB, 2M.
type sizeFlag int64

func (s *sizeFlag) String() string { return strconv.FormatInt(int64(*s), 10) }

func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s = sizeFlag(n)
	return nil
}

func parseSize(v string) (int64, error) {
	t := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<31-1)/mult {
		return 0, fmt.Errorf("size %q: a byte count such as 1048576, 512KiB or 1MiB (at most 2 GiB)", v)
	}
	return n * mult, nil
}

// Errors of the boards file.
var (
	// errBoardsFileMode: the boards file can be read or written by others
	// than its owner.
	errBoardsFileMode = errors.New("boards file open to group or others")
	// errBoardsFileLine: a line that is not "URL [PASSWORD]".
	errBoardsFileLine = errors.New("bad boards file line")
)

// lanBoard is one LAN board to follow: its base URL and password.
type lanBoard struct{ url, password string }

// credentialName is the systemd credential holding the boards file
// (LoadCredential=boards:/etc/holofleet/boards), read when --boards-file
// is not given.
const credentialName = "boards"

// boardPasswordEnv names the environment variable holding the password
// of every --board URL that carries none.
const boardPasswordEnv = "HOLO_BOARD_PASSWORD"

// lanBoards gathers the LAN boards: --board URLs (a password in the URL
// still works, but shows in ps; HOLO_BOARD_PASSWORD is the password of
// those without one), then the boards file's lines (--boards-file, or the
// systemd credential "boards").
func lanBoards(o options) ([]lanBoard, []string, error) {
	var out []lanBoard
	var notes []string
	envPW := os.Getenv(boardPasswordEnv)
	inURL := 0
	for _, b := range o.boards {
		base, pw, err := splitPassword(b)
		if err != nil {
			return nil, nil, fmt.Errorf("--board %s: %w", redact(b), err)
		}
		if pw != "" {
			inURL++
		} else {
			pw = envPW
		}
		out = append(out, lanBoard{base, pw})
	}
	if inURL > 0 {
		notes = append(notes, fmt.Sprintf("%d --board URL(s) carry a password, which any user sees in ps: use --boards-file or $%s", inURL, boardPasswordEnv))
	}
	file := o.access.boardsFile
	if file == "" {
		// systemd's LoadCredential=boards:... puts the file here, readable
		// by the service's user only.
		if dir := os.Getenv("CREDENTIALS_DIRECTORY"); dir != "" {
			if _, err := os.Stat(filepath.Join(dir, credentialName)); err == nil {
				file = filepath.Join(dir, credentialName)
			}
		}
	}
	if file != "" {
		bs, err := readBoardsFile(file)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, bs...)
	}
	return out, notes, nil
}

// readBoardsFile reads a boards file: one board a line, "URL [PASSWORD]"
// (the password is the rest of the line; a password in the URL's user
// info works too); blank lines and lines starting with # are skipped. The
// file must be open to its owner only (mode 0600 or 0400): it holds
// passwords.
func readBoardsFile(path string) ([]lanBoard, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--boards-file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat() // the file opened, not a name that may change
	if err != nil {
		return nil, fmt.Errorf("--boards-file: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("--boards-file %s: %w (mode %04o): it holds passwords; chmod 600 %s", path, errBoardsFileMode, perm, path)
	}
	return parseBoards(f, path)
}

func parseBoards(r io.Reader, name string) ([]lanBoard, error) {
	var out []lanBoard
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		raw, pw := line, ""
		if i := strings.IndexAny(line, " \t"); i >= 0 {
			raw, pw = line[:i], strings.TrimSpace(line[i+1:])
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s:%d: %w: want \"http://host[:port] [PASSWORD]\"", name, n, errBoardsFileLine)
		}
		base, urlPW, err := splitPassword(raw)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if pw == "" {
			pw = urlPW
		}
		out = append(out, lanBoard{base, pw})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}
