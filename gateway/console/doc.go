// Package console is the gateway's operator console: a web page, embedded
// in the binary, that shows the whole installation live and runs the
// fleet's operations from a browser.
//
// The console is a client of the public fleet API and nothing else. The
// page is static (HTML, CSS and JavaScript modules under static/, no
// build step, nothing fetched from elsewhere at run time); everything it
// shows comes from the same /v1/ REST calls any client makes, with the
// caller's bearer token, and every live update from the fleet's event
// stream (GET /v1/events as Server-Sent Events, resumed by event number
// after a drop) and the rollouts' watch streams. The gateway holds no
// session for it and gives it no private route into the fleet core.
//
// Routes (served on the API's listener; see Routes):
//
//	GET /            the page (index.html)
//	GET /console/... the page's scripts, style sheet and icon
//
// Every response carries a strict Content-Security-Policy (scripts,
// styles and connections from the gateway's own origin only, no inline
// script, no framing) and asks browsers to revalidate, so a new gateway
// binary serves its own console at once. Assets carry strong ETags made
// from their content.
//
// Safety rules the page keeps (and its tests check): text that comes
// from boards or operators (names, labels, event data, error messages) is
// only ever inserted as text, never parsed as HTML; the bearer token is
// kept in sessionStorage, so it ends with the browser tab.
package console
