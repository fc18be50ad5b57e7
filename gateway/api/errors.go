package api

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fault"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// Errors of the API layer.
var (
	// ErrBadRequest: a request field is missing or malformed.
	ErrBadRequest = fault.New(fault.Invalid, "api: bad request")
	// ErrFellBehind: an event watcher fell too far behind and was cut off.
	ErrFellBehind = fault.New(fault.Busy, "api: event watcher fell behind")
	// ErrDisabled: the gateway was built without the part the call
	// needs (firmware store, rollouts).
	ErrDisabled = fault.New(fault.Unimplemented, "api: not enabled on this gateway")
)

// BoardErrorDomain is the ErrorInfo domain of a board's own error carried
// in a gRPC status: Reason is the board's code, Metadata holds "message"
// (the board's message, as sent) and "status" (its HTTP status).
const BoardErrorDomain = "board.holofleet"

// GatewayErrorDomain is the ErrorInfo domain of the gateway's own error
// reasons that a gRPC code alone does not tell (ReasonTooLarge).
const GatewayErrorDomain = "gateway.holofleet"

// ReasonTooLarge is the ErrorInfo reason (domain GatewayErrorDomain) of a
// request larger than the transport to the board carries
// (fleet.ErrTooLarge) or an upload larger than a firmware slot
// (artifact.ErrTooLarge); REST answers it 413 too_large. The message
// names the size and the limit.
const ReasonTooLarge = "too_large"

// Status turns any error of the fleet, auth or API layers into a gRPC
// status. The code is the error's class (package fault: each package
// declares the class of its sentinel errors, and fault's one table gives
// the class's gRPC code and HTTP status); Status adds what a code alone
// does not tell:
//
//	a board's *boardapi.Error                 the code of its HTTP status, with ErrorInfo (BoardErrorDomain)
//	fleet.ErrTooLarge, artifact.ErrTooLarge   InvalidArgument, with ErrorInfo ReasonTooLarge
//	auth.ErrLimited (rate, streams)           ResourceExhausted, with RetryInfo
//
// A status error passes through unchanged. REST statuses follow from
// these codes in restError.
func Status(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	var be *boardapi.Error
	if errors.As(err, &be) {
		return boardStatus(be)
	}
	if errors.Is(err, fleet.ErrTooLarge) || errors.Is(err, artifact.ErrTooLarge) {
		return withReason(status.New(codes.InvalidArgument, err.Error()), ReasonTooLarge)
	}
	var le *auth.LimitError
	if errors.As(err, &le) {
		st := status.New(codes.ResourceExhausted, err.Error())
		if withInfo, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(le.RetryAfter)}); derr == nil {
			return withInfo
		}
		return st
	}
	return status.New(codeOf(err), err.Error())
}

// withReason adds an ErrorInfo of the gateway's domain to st.
func withReason(st *status.Status, reason string) *status.Status {
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: GatewayErrorDomain})
	if err != nil {
		return st
	}
	return withInfo
}

// gatewayReason returns the ErrorInfo reason of the gateway's domain that
// st carries, or "".
func gatewayReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == GatewayErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}

// retryAfter is the wait a status's RetryInfo asks for.
func retryAfter(st *status.Status) (time.Duration, bool) {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}

// Err is Status(err).Err(): nil for nil.
func Err(err error) error {
	if err == nil {
		return nil
	}
	return Status(err).Err()
}

// codeOf is the gRPC code of err's class (fault.Of): the one
// classification every surface reads.
func codeOf(err error) codes.Code { return fault.Of(err).GRPC() }

// boardStatus carries a board's error: the code chosen by its HTTP status,
// the message "code: message", and an ErrorInfo with both as sent.
func boardStatus(be *boardapi.Error) *status.Status {
	st := status.New(httpCode(be.Status), be.Error())
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason: be.Code,
		Domain: BoardErrorDomain,
		Metadata: map[string]string{
			"message": be.Message,
			"status":  strconv.Itoa(be.Status),
		},
	})
	if err != nil {
		return st
	}
	return withInfo
}

// BoardError returns the board's error a status carries, or nil.
func BoardError(st *status.Status) *boardapi.Error {
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != BoardErrorDomain {
			continue
		}
		code, _ := strconv.Atoi(info.GetMetadata()["status"])
		if code < 400 || code > 599 {
			code = http.StatusBadGateway
		}
		return &boardapi.Error{Status: code, Code: info.GetReason(), Message: info.GetMetadata()["message"]}
	}
	return nil
}

// httpCode picks the gRPC code for a board's HTTP error status.
func httpCode(s int) codes.Code {
	switch s {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusUnsupportedMediaType,
		http.StatusLengthRequired, http.StatusRequestEntityTooLarge:
		// A request the board cannot take is the caller's to change;
		// ResourceExhausted would invite a retry that fails the same way.
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return codes.Unimplemented
	case http.StatusConflict:
		return codes.FailedPrecondition
	case http.StatusTooManyRequests, http.StatusInsufficientStorage:
		return codes.ResourceExhausted
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return codes.Unavailable
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	}
	return codes.Unknown
}

// ErrorBody is the JSON of every REST error, the same shape as a board's
// errors: a snake_case code and a message.
type ErrorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// restError gives the HTTP status and body of a status: a board's error
// comes back with the board's own status, code and message; a request too
// large (for a transport to the board, or for gRPC's message limit on the
// way in) is 413 too_large with the limit in the message, as a board says
// it; the gateway's other errors use grpc-gateway's status for the code
// and its snake_case name. This is the one place gateway errors meet HTTP
// statuses: ResourceExhausted stays 429 only for what a later retry may
// pass (a watcher that fell behind, rate limits).
func restError(st *status.Status) (int, ErrorBody) {
	if be := BoardError(st); be != nil {
		return be.Status, ErrorBody{Error: be.Code, Message: be.Message}
	}
	if msg, ok := tooLarge(st); ok {
		return http.StatusRequestEntityTooLarge, ErrorBody{Error: ReasonTooLarge, Message: msg}
	}
	return httpStatus(st.Code()), ErrorBody{Error: codeName(st.Code()), Message: st.Message()}
}

// grpcSizeLimit matches the ResourceExhausted messages grpc-go gives a
// message over the receiver's limit ("grpc: received message larger than
// max (8388620 vs. 4194304)", and the forms after decompression);
// grpcSizes reads the size and the limit where the message has them.
var (
	grpcSizeLimit = regexp.MustCompile(`^grpc: (?:received )?message (?:after decompression )?larger than max`)
	grpcSizes     = regexp.MustCompile(`\((\d+) vs\. (\d+)\)`)
)

// tooLarge reports whether st refuses a request for its size, with the
// message a REST client gets: the size and the limit.
func tooLarge(st *status.Status) (string, bool) {
	if gatewayReason(st) == ReasonTooLarge {
		return st.Message(), true
	}
	if st.Code() != codes.ResourceExhausted {
		return "", false
	}
	if !grpcSizeLimit.MatchString(st.Message()) {
		return "", false
	}
	if m := grpcSizes.FindStringSubmatch(st.Message()); m != nil {
		return fmt.Sprintf("request too large: its message of %s bytes is over the API's limit of %s bytes", m[1], m[2]), true
	}
	return "request too large: " + st.Message(), true
}

// httpStatus is the REST status of a gRPC code: its class's (fault).
func httpStatus(c codes.Code) int { return fault.FromCode(c).HTTP() }

var codeNames = map[codes.Code]string{
	codes.Canceled:           "canceled",
	codes.Unknown:            "unknown",
	codes.InvalidArgument:    "invalid_argument",
	codes.DeadlineExceeded:   "deadline_exceeded",
	codes.NotFound:           "not_found",
	codes.AlreadyExists:      "already_exists",
	codes.PermissionDenied:   "permission_denied",
	codes.ResourceExhausted:  "resource_exhausted",
	codes.FailedPrecondition: "failed_precondition",
	codes.Aborted:            "aborted",
	codes.OutOfRange:         "out_of_range",
	codes.Unimplemented:      "unimplemented",
	codes.Internal:           "internal",
	codes.Unavailable:        "unavailable",
	codes.DataLoss:           "data_loss",
	codes.Unauthenticated:    "unauthenticated",
}

func codeName(c codes.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return "unknown"
}
