// Command gen writes holofleet's Grafana dashboards (dashboards/*.json)
// from the Go definitions beside it, with the Grafana Foundation SDK's
// builders. Run it through `make dashboards`; its output is committed, and
// the package's tests fail when the committed JSON differs from what gen
// writes or when a dashboard breaks one of Grafana's dashboard-linter
// rules (lint.go).
//
// Every query is written without job and instance; gen adds
// job=~"$job" and instance=~"$instance" to each selector, so two
// Prometheus jobs (or sites) scraping gateways never mix.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "dashboards", "directory the dashboards are written to")
	check := flag.String("lint", "", "instead of writing, check the dashboards (*.json) in this directory against the linter's rules and list what breaks them")
	flag.Parse()
	if *check != "" {
		n, err := lintDir(*check, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		if n > 0 {
			fmt.Fprintf(os.Stderr, "gen: %d findings\n", n)
			os.Exit(1)
		}
		return
	}
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// render returns every dashboard's JSON by file name.
func render() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, b := range boards {
		raw, err := b.build()
		if err != nil {
			return nil, err
		}
		if _, dup := out[b.file]; dup {
			return nil, fmt.Errorf("two dashboards write %s", b.file)
		}
		out[b.file] = raw
	}
	return out, nil
}

// lintDir lints every dashboard in dir, writes the findings to w and
// returns how many there were.
func lintDir(dir string, w io.Writer) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no dashboards in %s", dir)
	}
	n := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return n, err
		}
		for _, finding := range lint(raw) {
			fmt.Fprintf(w, "%s: %s\n", filepath.Base(f), finding)
			n++
		}
	}
	return n, nil
}

func write(dir string) error {
	files, err := render()
	if err != nil {
		return err
	}
	for name, raw := range files {
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
			return err
		}
		fmt.Println("gen: wrote", filepath.Join(dir, name))
	}
	return nil
}
