package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	fwapi "github.com/holofleet/holofleet/firmware/api"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/auth"
	"github.com/holofleet/holofleet/gateway/fleet"
	"github.com/holofleet/holofleet/gateway/rollout"
)

// Errors of the API layer.
var (
	// ErrBadRequest: a request field is missing or malformed.
	ErrBadRequest = errors.New("api: bad request")
	// ErrFellBehind: an event watcher fell too far behind and was cut off.
	ErrFellBehind = errors.New("api: event watcher fell behind")
	// ErrDisabled: the gateway was built without the part the call
	// needs (firmware store, rollouts).
	ErrDisabled = errors.New("api: not enabled on this gateway")
)

// BoardErrorDomain is the ErrorInfo domain of a board's own error carried
// in a gRPC status: Reason is the board's code, Metadata holds "message"
// (the board's message, as sent) and "status" (its HTTP status).
const BoardErrorDomain = "board.holofleet"

// Status turns any error of the fleet, auth or API layers into a gRPC
// status. It is the one place where domain errors meet gRPC codes:
//
//	fleet.ErrUnknownBoard, ErrUnknownGroup, auth.ErrUnknownToken  NotFound
//	fleet.ErrUnreachable, ErrNoReply, ErrClosed                    Unavailable
//	fleet.ErrNotOverLink                                           FailedPrecondition
//	fleet.ErrBadReply                                              Internal
//	auth.ErrNoToken, ErrBadToken                                   Unauthenticated
//	auth.ErrForbidden                                              PermissionDenied
//	auth.ErrExists                                                 AlreadyExists
//	ErrBadRequest, auth.ErrBadRole, ErrBadName                     InvalidArgument
//	ErrFellBehind                                                  ResourceExhausted
//	auth.ErrLimited (rate, streams)                                ResourceExhausted, with RetryInfo
//	rollout.ErrPlan, ErrArtifact (even when the artifact is unknown) InvalidArgument
//	rollout.ErrNotFound, artifact.ErrNotFound                      NotFound
//	rollout.ErrState, artifact.ErrInUse                            FailedPrecondition
//	artifact.ErrInvalid, ErrTooLarge, ErrBadName                   InvalidArgument
//	rollout.ErrClosed                                              Unavailable
//	ErrDisabled                                                    Unimplemented
//	context deadline / cancel                                      DeadlineExceeded / Canceled
//	a board's *firmware/api.Error                                  by its HTTP status, with ErrorInfo
//
// Anything else is Internal. A status error passes through unchanged.
func Status(err error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	var be *fwapi.Error
	if errors.As(err, &be) {
		return boardStatus(be)
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

func codeOf(err error) codes.Code {
	switch {
	// A plan naming an unknown artifact is a bad plan: checked before
	// the artifact store's NotFound it wraps.
	case errors.Is(err, rollout.ErrPlan), errors.Is(err, rollout.ErrArtifact):
		return codes.InvalidArgument
	case errors.Is(err, rollout.ErrNotFound), errors.Is(err, artifact.ErrNotFound):
		return codes.NotFound
	case errors.Is(err, rollout.ErrState), errors.Is(err, artifact.ErrInUse):
		return codes.FailedPrecondition
	case errors.Is(err, artifact.ErrInvalid), errors.Is(err, artifact.ErrTooLarge), errors.Is(err, artifact.ErrBadName):
		return codes.InvalidArgument
	case errors.Is(err, rollout.ErrClosed):
		return codes.Unavailable
	case errors.Is(err, ErrDisabled):
		return codes.Unimplemented
	case errors.Is(err, fleet.ErrUnknownBoard), errors.Is(err, fleet.ErrUnknownGroup), errors.Is(err, auth.ErrUnknownToken):
		return codes.NotFound
	case errors.Is(err, fleet.ErrUnreachable), errors.Is(err, fleet.ErrNoReply), errors.Is(err, fleet.ErrClosed):
		return codes.Unavailable
	case errors.Is(err, fleet.ErrNotOverLink):
		return codes.FailedPrecondition
	case errors.Is(err, fleet.ErrBadReply):
		return codes.Internal
	case errors.Is(err, auth.ErrNoToken), errors.Is(err, auth.ErrBadToken):
		return codes.Unauthenticated
	case errors.Is(err, auth.ErrForbidden):
		return codes.PermissionDenied
	case errors.Is(err, auth.ErrExists):
		return codes.AlreadyExists
	case errors.Is(err, ErrBadRequest), errors.Is(err, auth.ErrBadRole), errors.Is(err, auth.ErrBadName):
		return codes.InvalidArgument
	case errors.Is(err, ErrFellBehind), errors.Is(err, auth.ErrLimited):
		return codes.ResourceExhausted
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Internal
}

// boardStatus carries a board's error: the code chosen by its HTTP status,
// the message "code: message", and an ErrorInfo with both as sent.
func boardStatus(be *fwapi.Error) *status.Status {
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
func BoardError(st *status.Status) *fwapi.Error {
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != BoardErrorDomain {
			continue
		}
		code, _ := strconv.Atoi(info.GetMetadata()["status"])
		if code < 400 || code > 599 {
			code = http.StatusBadGateway
		}
		return &fwapi.Error{Status: code, Code: info.GetReason(), Message: info.GetMetadata()["message"]}
	}
	return nil
}

// httpCode picks the gRPC code for a board's HTTP error status.
func httpCode(s int) codes.Code {
	switch s {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusUnsupportedMediaType,
		http.StatusLengthRequired:
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
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusInsufficientStorage:
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
// comes back with the board's own status, code and message; the gateway's
// errors use grpc-gateway's status for the code and its snake_case name.
func restError(st *status.Status) (int, ErrorBody) {
	if be := BoardError(st); be != nil {
		return be.Status, ErrorBody{Error: be.Code, Message: be.Message}
	}
	return httpStatus(st.Code()), ErrorBody{Error: codeName(st.Code()), Message: st.Message()}
}

func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.FailedPrecondition:
		return http.StatusPreconditionFailed
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Canceled:
		return 499
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

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
