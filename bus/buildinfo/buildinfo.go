// Package buildinfo describes the running build: project, version,
// build date and time, framework, and the SHA-256 of the executable. The
// version and date are set at link time (make build VERSION=...); the
// firmware image tooling (bus/image) writes the same values into the
// image's application description.
//
// It lives in bus/ because both sides read it: the firmware describes
// itself with it (GET /info, /ota), and holo-gateway and holoctl report
// the same link-time version, so one -X flag stamps every binary. It
// imports only the standard library and bus/boardapi.
package buildinfo

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/holofleet/holofleet/bus/boardapi"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"
)

// Link-time values (-ldflags -X).
var (
	Version = "0.0.0-dev"
	Date    = ""
	Time    = ""
)

// Project is the firmware's project name, checked by updates.
const Project = "holo-board"

// Chip is the chip family the host build reports; its image chip id is
// outside Espressif's range (see the ota image package).
const Chip = "holo-sim"

// App is the application description shown in GET /info and /ota (see
// bus/boardapi).
type App = boardapi.App

// SecureBoot tells how the running firmware passed the bootloader's
// signature check (GET /info's firmware.secure_boot).
type SecureBoot = boardapi.SecureBoot

var (
	once sync.Once
	app  App
)

// AppEnv names the environment variable through which process mode's
// bootloader hands the firmware the application description of the slot
// it booted (JSON of App). When it is set, Running reports it: the
// firmware describes itself as the image it was booted from.
const AppEnv = "HOLO_BOARD_APP"

// Running returns the description of the running firmware: the booted
// slot's image description in process mode, otherwise this executable's.
func Running() App {
	once.Do(func() {
		if v := os.Getenv(AppEnv); v != "" {
			if err := json.Unmarshal([]byte(v), &app); err == nil && app.Project != "" {
				return
			}
		}
		app = App{Project: Project, Version: Version, Date: Date, Time: Time, IDF: "host-" + goVersion()}
		if app.Date == "" || app.Time == "" {
			t := buildTime()
			app.Date, app.Time = t.Format("Jan _2 2006"), t.Format("15:04:05")
		}
		app.ELFSHA256 = executableSHA256()
	})
	return app
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "go"
}

func buildTime() time.Time {
	if exe, err := os.Executable(); err == nil {
		if st, err := os.Stat(exe); err == nil {
			return st.ModTime().UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

func executableSHA256() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
