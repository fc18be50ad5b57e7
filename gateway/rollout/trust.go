package rollout

// Signed firmware: a board with secure boot on (keys burned, GET /ota's
// secure_boot) refuses every image without a valid signature block of a
// key it trusts and has not revoked. The engine asks before it sends:
//
//   - At dry run and at create, every selected board is read (GET /ota,
//     Options.TrustTimeout for the whole check, at most trustParallel at
//     once) and the image's blocks, as the artifact record keeps them, are
//     checked against its keys exactly as the board would check them
//     (artifact.Artifact.Check, that is image.Trust.Check). A board that
//     would refuse the image is refused, named with the reason, and leaves
//     the waves. A board that cannot be read in time (offline, not
//     answering) stays selected and is listed in Selection.Unchecked, as
//     offline boards stay selected unless the target says online_only.
//   - Before the image leaves for a board (push or pull), the worker checks
//     again against the GET /ota it has just read: a board that would
//     refuse it (its keys were unknown at create, or changed since) ends
//     failed with the reason, and nothing is sent. A board with secure
//     boot on is never sent an image it does not trust.
//
// A board with secure boot off accepts any good image.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/holofleet/holofleet/bus/boardapi"
	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// DefaultTrustTimeout bounds the reading of the boards' keys at dry run
// and create.
const DefaultTrustTimeout = 10 * time.Second

// trustParallel is how many boards are read at once for their keys.
const trustParallel = 16

// trustOf is the board's secure_boot object as the image package takes
// it. Secure boot on without a readable key refuses everything: the board
// says it checks, and the gateway cannot tell what would pass.
func trustOf(sb boardapi.SecureBootStatus) (image.Trust, error) {
	t := image.Trust{MinSecureVersion: sb.SecureVersion}
	if !sb.Enabled {
		return t, nil
	}
	for _, k := range sb.Keys {
		d, err := image.ParseKeyDigest(k.Digest)
		if err != nil {
			return t, fmt.Errorf("%w: the board reports a key digest %q that is not 64 hex digits", fleet.ErrBadReply, k.Digest)
		}
		t.Keys = append(t.Keys, d)
		if k.Revoked {
			t.Revoked = append(t.Revoked, d)
		}
	}
	if len(t.Keys) == 0 {
		return t, fmt.Errorf("%w: the board reports secure boot on with no key", fleet.ErrBadReply)
	}
	return t, nil
}

// trustNames describes t for people: the keys it trusts and those it
// revoked, in short form.
func trustNames(t image.Trust) string {
	var ok, rev []string
	for _, k := range t.Keys {
		if slices.Contains(t.Revoked, k) {
			rev = append(rev, k.Short())
		} else {
			ok = append(ok, k.Short())
		}
	}
	s := "the board trusts " + strings.Join(ok, ", ")
	if len(ok) == 0 {
		s = "the board trusts no key"
	}
	if len(rev) > 0 {
		s += "; revoked " + strings.Join(rev, ", ")
	}
	return s
}

// refusal is why a board holding t refuses a, or "" when it takes it.
func refusal(a artifact.Artifact, t image.Trust) string {
	// Anti-rollback (issue 25 row 11): a board refuses an image below the
	// secure version it burned, keys or not.
	if a.App.SecureVersion < t.MinSecureVersion {
		return fmt.Sprintf("anti-rollback would refuse the image (downgrade_refused): its secure version is %d, the board's %d", a.App.SecureVersion, t.MinSecureVersion)
	}
	if _, err := a.Check(t); err != nil {
		return fmt.Sprintf("secure boot would refuse the image: %s (%s)", strings.TrimPrefix(err.Error(), "image: "), trustNames(t))
	}
	return ""
}

// trustVerdict is what checking one board found.
type trustVerdict struct {
	refused   string // why the board refuses the image
	unchecked string // why its keys could not be read
}

// readSecureBoot reads board id's secure_boot object from GET /ota, and
// the running image's SHA-256 when the board shows it (ota-delta).
func (e *Engine) readSecureBoot(ctx context.Context, id string) (boardapi.SecureBootStatus, string, error) {
	rep, err := e.o.Fleet.Call(ctx, id, http.MethodGet, "/ota", nil)
	if err != nil {
		return boardapi.SecureBootStatus{}, "", err
	}
	if err := rep.Err(); err != nil {
		return boardapi.SecureBootStatus{}, "", err
	}
	var st boardapi.OTAStatus
	if err := json.Unmarshal(rep.Body, &st); err != nil {
		return boardapi.SecureBootStatus{}, "", fmt.Errorf("%w: GET /ota: %v", fleet.ErrBadReply, err)
	}
	running := ""
	for _, s := range st.Slots {
		if s.Running {
			running = s.SHA256
		}
	}
	return st.SecureBoot, running, nil
}

// checkTrust reads the keys of the picked boards and moves those that
// would refuse a into sel.Refused (and those that cannot be read into
// sel.Unchecked); it returns the boards left, in order. online tells
// which boards the fleet sees online: the others are not asked.
func (e *Engine) checkTrust(ctx context.Context, a artifact.Artifact, picked []string, online map[string]bool, sel *Selection) []string {
	ctx, cancel := context.WithTimeout(ctx, e.o.TrustTimeout)
	defer cancel()
	verdicts := make([]trustVerdict, len(picked))
	var mu sync.Mutex
	memo := map[string]string{} // refusal by the board's keys: one check per key set
	sem := make(chan struct{}, trustParallel)
	var wg sync.WaitGroup
	for i, id := range picked {
		if !online[id] {
			verdicts[i].unchecked = "offline: its keys are checked before the image is sent"
			continue
		}
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				verdicts[i].unchecked = "not read in time: its keys are checked before the image is sent"
				return
			}
			defer func() { <-sem }()
			sb, running, err := e.readSecureBoot(ctx, id)
			if running != "" && running != a.SHA256 {
				mu.Lock()
				if sel.bases == nil {
					sel.bases = map[string]bool{}
				}
				sel.bases[running] = true
				mu.Unlock()
			}
			if err != nil {
				verdicts[i].unchecked = fmt.Sprintf("its keys could not be read (%v): they are checked before the image is sent", err)
				return
			}
			t, err := trustOf(sb)
			if err != nil {
				verdicts[i].refused = fmt.Sprintf("secure boot: %v", err)
				return
			}
			key := fmt.Sprint(t.Keys, t.Revoked, t.MinSecureVersion)
			mu.Lock()
			why, ok := memo[key]
			mu.Unlock()
			if !ok {
				why = refusal(a, t)
				mu.Lock()
				memo[key] = why
				mu.Unlock()
			}
			verdicts[i].refused = why
		})
	}
	wg.Wait()
	var keep []string
	for i, id := range picked {
		v := verdicts[i]
		switch {
		case v.refused != "":
			sel.Refused = append(sel.Refused, Refusal{Board: id, Reason: v.refused})
		case v.unchecked != "":
			sel.Unchecked = append(sel.Unchecked, Refusal{Board: id, Reason: v.unchecked})
			keep = append(keep, id)
		default:
			keep = append(keep, id)
		}
	}
	return keep
}

// refusedBy checks, before the image is sent, that the board (as GET
// /ota showed it in v) takes the rollout's image: "" when it does, else
// why not. An error means the artifact could not be read.
func (w *worker) refusedBy(v view) (string, error) {
	t, err := trustOf(v.st.SecureBoot)
	if err != nil {
		// The board checks signatures with keys no one can read: it would
		// take nothing the gateway can vouch for.
		return fmt.Sprintf("secure boot: %v", err), nil
	}
	if !t.Enabled() && t.MinSecureVersion == 0 {
		return "", nil
	}
	a, err := w.e.o.Artifacts.Get(w.rollout().Image.SHA256)
	if err != nil {
		return "", err
	}
	return refusal(a, t), nil
}
