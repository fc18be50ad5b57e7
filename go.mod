module github.com/holofleet/holofleet

go 1.26.8

require (
	github.com/google/go-cmp v0.7.0
	go.bug.st/serial v1.8.0
	go.etcd.io/bbolt v1.5.0
	golang.org/x/sys v0.49.0
)
