module github.com/holofleet/holofleet

go 1.26.8

require (
	github.com/google/go-cmp v0.7.0 // indirect
	go.bug.st/serial v1.8.0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
