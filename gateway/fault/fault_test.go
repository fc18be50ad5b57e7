package fault

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"google.golang.org/grpc/codes"
)

// TestTable: every class has its form on every surface, as the package
// doc's table says.
func TestTable(t *testing.T) {
	for _, tc := range []struct {
		c         Class
		name      string
		http      int
		grpc      codes.Code
		mqtt, osc string
	}{
		{OK, "ok", http.StatusOK, codes.OK, "ok", "ok"},
		{Invalid, "invalid", http.StatusBadRequest, codes.InvalidArgument, "error", "error"},
		{Unauthenticated, "unauthenticated", http.StatusUnauthorized, codes.Unauthenticated, "error", "denied"},
		{Denied, "denied", http.StatusForbidden, codes.PermissionDenied, "error", "denied"},
		{NotFound, "not_found", http.StatusNotFound, codes.NotFound, "error", "error"},
		{Exists, "exists", http.StatusConflict, codes.AlreadyExists, "error", "error"},
		{Precondition, "precondition", http.StatusPreconditionFailed, codes.FailedPrecondition, "error", "error"},
		{Busy, "busy", http.StatusTooManyRequests, codes.ResourceExhausted, "error", "error"},
		{Canceled, "canceled", 499, codes.Canceled, "error", "error"},
		{Internal, "internal", http.StatusInternalServerError, codes.Internal, "error", "error"},
		{Unimplemented, "unimplemented", http.StatusNotImplemented, codes.Unimplemented, "error", "error"},
		{Unavailable, "unavailable", http.StatusServiceUnavailable, codes.Unavailable, "error", "error"},
		{Deadline, "deadline", http.StatusGatewayTimeout, codes.DeadlineExceeded, "error", "error"},
	} {
		f := tc.c.Form()
		if f.Name != tc.name || tc.c.String() != tc.name || tc.c.HTTP() != tc.http || tc.c.GRPC() != tc.grpc ||
			tc.c.MQTT() != tc.mqtt || tc.c.OSC() != tc.osc {
			t.Errorf("%v: %+v, want %s %d %v %s %s", tc.c, f, tc.name, tc.http, tc.grpc, tc.mqtt, tc.osc)
		}
	}
	if Class(200).Form() != Internal.Form() {
		t.Errorf("an unknown class is not Internal's: %+v", Class(200).Form())
	}
}

// TestTableDistinct: no two classes share a name or a gRPC code, and
// FromCode gives each class back from its code.
func TestTableDistinct(t *testing.T) {
	names, grpc := map[string]Class{}, map[codes.Code]Class{}
	for _, c := range Classes() {
		f := c.Form()
		if prev, ok := names[f.Name]; ok {
			t.Errorf("%v and %v share the name %q", prev, c, f.Name)
		}
		if prev, ok := grpc[f.GRPC]; ok {
			t.Errorf("%v and %v share the code %v", prev, c, f.GRPC)
		}
		names[f.Name], grpc[f.GRPC] = c, c
		if got := FromCode(f.GRPC); got != c {
			t.Errorf("FromCode(%v) = %v, want %v", f.GRPC, got, c)
		}
	}
}

// TestFromCode: the codes no class uses land on the nearest class.
func TestFromCode(t *testing.T) {
	for code, want := range map[codes.Code]Class{
		codes.OutOfRange: Invalid, codes.Aborted: Exists, codes.Unknown: Internal, codes.DataLoss: Internal,
		codes.Code(99): Internal,
	} {
		if got := FromCode(code); got != want {
			t.Errorf("FromCode(%v) = %v, want %v", code, got, want)
		}
	}
}

var (
	errOuter   = New(Invalid, "outer")
	errMissing = New(NotFound, "missing")
	errDown    = New(Unavailable, "down")
	errBroken  = New(Internal, "broken")
)

// classed is a domain package's own classified type.
type classed struct{}

func (classed) Error() string { return "mine" }
func (classed) Class() Class  { return Busy }

// TestOf: the outermost classified error wins, a join takes the gravest
// of its parts, context errors come after any classified error, and the
// rest is Internal.
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, OK},
		{"sentinel", errMissing, NotFound},
		{"wrapped", fmt.Errorf("board x: %w", errMissing), NotFound},
		{"outer first", fmt.Errorf("%w: %w", errOuter, errMissing), Invalid},
		{"unclassified outer", fmt.Errorf("%w: %w", errors.New("plain"), errMissing), NotFound},
		{"join: gravest", errors.Join(fmt.Errorf("rs485: %w", errBroken), fmt.Errorf("lan: %w", errDown)), Unavailable},
		{"join inside", fmt.Errorf("board b: %w", errors.Join(errBroken, errDown)), Unavailable},
		{"classified before the context", fmt.Errorf("%w: %w", context.DeadlineExceeded, errDown), Unavailable},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), Deadline},
		{"canceled", context.Canceled, Canceled},
		{"own type", fmt.Errorf("x: %w", classed{}), Busy},
		{"plain", errors.New("plain"), Internal},
	} {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("%s: Of(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestSentinel: a sentinel is its own text and matches itself only.
func TestSentinel(t *testing.T) {
	e := New(Denied, "auth: no")
	if e.Error() != "auth: no" || e.Class() != Denied {
		t.Errorf("%q %v", e.Error(), e.Class())
	}
	if !errors.Is(fmt.Errorf("w: %w", e), e) || errors.Is(e, New(Denied, "auth: no")) {
		t.Error("a sentinel matches by identity")
	}
}
