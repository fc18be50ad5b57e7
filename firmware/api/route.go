package api

import "net/http"

// Route is one endpoint of the board API, as a feature package declares it.
// The HTTP server applies the Authentication rules around Handler; the host
// link serves the routes marked Link with the same Handler.
type Route struct {
	Method string // GET, PUT, POST, PATCH, DELETE
	// Path is the path under /api/v1, such as "/leds".
	Path    string
	Handler http.Handler
	// Link marks the routes the host link serves too.
	Link bool
	// Private marks a GET that needs the password once one is set
	// (downloading a file, reading web settings).
	Private bool
	// Raw marks a changing request whose body is raw bytes (uploads), so
	// the Content-Type rule does not apply.
	Raw bool
	// Summary is one line for openapi.json.
	Summary string

	// The rest describes the route in openapi.json.

	// Request is a value of the JSON body's type (nil: no body).
	Request any
	// Response is a value of the success reply's type (nil: no body).
	Response any
	// Status is the success status (0 means 200).
	Status int
	// AlsoStatus lists other success statuses with the same reply type
	// (PUT /fs/file answers 201 when it creates and 200 when it replaces).
	AlsoStatus []int
	// Query lists the query parameters.
	Query []Param
	// Errors lists the error codes the route may answer with, beyond the
	// ones every route of its method has.
	Errors []*Error

	// Prepare, on a changing route, is the route split in two: it reads
	// and checks the request, changing nothing, and returns the change to
	// make. The board can then make the change at once (Handler, which
	// is Prepared(Prepare) for such routes) or at a moment the request
	// names (fire_at, at_ms: firmware/fire wraps such routes). Nil for
	// routes that change nothing or cannot be scheduled.
	Prepare func(r *http.Request) (Change, error)
	// Accepted is a value of the type of a 202 reply of its own (a
	// scheduled change), for openapi.json; nil when there is none.
	Accepted any
}

// Change is a checked change a request makes, ready to be made.
type Change struct {
	// Apply makes the change and returns the reply's status and body.
	Apply func() (status int, reply any, err error)
	// Discard, when set, releases what Apply would have used (an open
	// file), for a change that will not be made.
	Discard func()
}

// Drop discards a change that will not be made.
func (c Change) Drop() {
	if c.Discard != nil {
		c.Discard()
	}
}

// Prepared is the handler of a route with Prepare: it checks the request
// and makes the change at once, replying as Apply says.
func Prepared(prepare func(r *http.Request) (Change, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := prepare(r)
		if err != nil {
			WriteError(w, err)
			return
		}
		status, v, err := c.Apply()
		if err != nil {
			WriteError(w, err)
			return
		}
		WriteJSON(w, status, v)
	})
}

// Param is a query parameter of a route.
type Param struct {
	Name string
	// Type is string, integer, boolean or number.
	Type        string
	Required    bool
	Description string
}

// ViaLink reports whether the request came over the host link rather than
// HTTP. The link server marks its requests with WithLink.
func ViaLink(r *http.Request) bool {
	v, _ := r.Context().Value(linkKey{}).(bool)
	return v
}

type linkKey struct{}

// LinkContextKey is the context key the link server sets to true.
var LinkContextKey any = linkKey{}
