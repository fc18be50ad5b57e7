package main

import (
	"context"

	"github.com/holofleet/holofleet/gateway/console"
)

// newConsole serves the operator console (gateway/console) on the API's
// listener: the page at "/", its files under /console/. The page is a
// client of the public /v1/ API like any other; it gets no other route.
func newConsole(_ context.Context, e *env) (component, error) {
	h, err := console.New()
	if err != nil {
		return component{}, err
	}
	for pattern, handler := range h.Routes() {
		e.handle(pattern, handler)
	}
	return component{name: "console", banner: []string{"console:  / on the API address (sign in with a token; in demo mode none is needed from loopback)"}}, nil
}
