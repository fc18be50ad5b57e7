package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/holofleet/holofleet/gateway/audit"
	"github.com/holofleet/holofleet/gateway/auth"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// AuditLog is what the API needs of the audit log (*audit.Log): the
// Guard's Auditor, and the query behind GET /v1/audit.
type AuditLog interface {
	auth.Auditor
	Query(audit.Filter) ([]audit.Entry, error)
	// Sync waits until the records queued so far are written, so a query
	// sees the calls that ended before it.
	Sync(ctx context.Context) error
}

// auditSync bounds the wait for queued records before a query.
const auditSync = 2 * time.Second

func (s *service) ListAudit(ctx context.Context, r *fleetv1.ListAuditRequest) (*fleetv1.ListAuditResponse, error) {
	if s.audit == nil {
		return nil, Err(fmt.Errorf("%w: this gateway keeps no audit log", ErrDisabled))
	}
	f := audit.Filter{Token: r.GetToken(), Board: r.GetBoard(), Outcome: r.GetOutcome(), Limit: int(r.GetLimit())}
	if r.GetSince() != nil {
		f.Since = r.GetSince().AsTime()
	}
	if r.GetUntil() != nil {
		f.Until = r.GetUntil().AsTime()
	}
	if err := f.Check(); err != nil {
		return nil, Err(fmt.Errorf("%w: %w", ErrBadRequest, err))
	}
	sctx, cancel := context.WithTimeout(ctx, auditSync)
	_ = s.audit.Sync(sctx) // at worst the newest records are missing
	cancel()
	entries, err := s.audit.Query(f)
	if err != nil {
		if errors.Is(err, audit.ErrBadFilter) {
			err = fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		return nil, Err(err)
	}
	out := &fleetv1.ListAuditResponse{Entries: make([]*fleetv1.AuditEntry, 0, len(entries))}
	for _, e := range entries {
		out.Entries = append(out.Entries, &fleetv1.AuditEntry{
			Time: timestamppb.New(e.Time), Token: e.Token, Role: e.Role, Client: e.Client, Surface: e.Surface,
			Agent: e.Agent, Operation: e.Operation, Verb: e.Verb, Resource: e.Resource, Boards: e.Boards,
			Selector: e.Selector, Kind: e.Kind, Call: e.Call, Name: e.Name, Outcome: e.Outcome, Code: e.Code,
			Reason: e.Reason, RequestId: e.RequestID,
		})
	}
	return out, nil
}
