package api

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/bus/image"
	"github.com/holofleet/holofleet/firmware/ota/efuse"
	"github.com/holofleet/holofleet/firmware/ota/flash"
	"github.com/holofleet/holofleet/gateway/artifact"
	"github.com/holofleet/holofleet/gateway/artifact/sigtest"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// grpcUpload streams img to UploadArtifact in 1000-byte chunks.
func (g *fwGateway) grpcUpload(t *testing.T, ctx context.Context, img []byte) (*fleetv1.UploadArtifactResponse, error) {
	t.Helper()
	s, err := g.client.UploadArtifact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(img); i += 1000 {
		m := &fleetv1.UploadArtifactRequest{Chunk: img[i:min(i+1000, len(img))]}
		if i == 0 {
			m.Name = "fw.bin"
		}
		if err := s.Send(m); err != nil {
			break // the server refused early: CloseAndRecv says why
		}
	}
	return s.CloseAndRecv()
}

// restArtifact is an artifact as REST writes it.
type restArtifact struct {
	SHA256  string `json:"sha256"`
	Trust   string `json:"trust"`
	Signers []struct {
		KeyDigest string `json:"key_digest"`
		Valid     bool   `json:"valid"`
		Trusted   bool   `json:"trusted"`
		Error     string `json:"error"`
	} `json:"signers"`
}

// TestUploadRefusesUntrusted sends every case of sigtest to a gateway
// started with trusted keys, over REST and over gRPC: what is not signed
// by a trusted key is refused 400 / InvalidArgument with the reason, and
// nothing is stored; what is comes back trusted with its signers.
func TestUploadRefusesUntrusted(t *testing.T) {
	ks := sigtest.NewKeys(t)
	bt := ks.Trust()
	g := startFirmwareGatewayKeys(t, 1, true, fwKeys{trusted: bt.Keys, revoked: bt.Revoked})
	ctx := g.ctx(t, "admin")
	stored := 0
	for _, c := range sigtest.Cases(t, ks, "2.0.0") {
		t.Run(c.Name, func(t *testing.T) {
			want := "invalid image"
			if !c.Structural && c.Want != nil {
				want = "image not trusted: " + c.Want.Error()
			}
			code, body := g.upload(t, "admin", "?name=fw.bin", c.Image)
			up, gerr := g.grpcUpload(t, ctx, c.Image)
			if c.Structural || c.Want != nil {
				if code != 400 || !strings.Contains(body, `"error":"invalid_argument"`) || !strings.Contains(body, want) {
					t.Errorf("REST: %d %s, want 400 with %q", code, body, want)
				}
				if status.Code(gerr) != codes.InvalidArgument || !strings.Contains(gerr.Error(), want) {
					t.Errorf("gRPC: %v, want InvalidArgument with %q", gerr, want)
				}
				if !c.Structural && !strings.Contains(body, ks.Trusted.Digest.Short()) {
					t.Errorf("REST refusal %s does not name the trusted key", body)
				}
				return
			}
			stored++
			var r struct{ Artifact restArtifact }
			if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil {
				t.Fatalf("REST: %d %s", code, body)
			}
			n := len(r.Artifact.Signers)
			if r.Artifact.Trust != artifact.TrustTrusted || n == 0 || r.Artifact.Signers[n-1].KeyDigest != ks.Trusted.Digest.String() ||
				!r.Artifact.Signers[n-1].Trusted || !r.Artifact.Signers[n-1].Valid {
				t.Errorf("REST artifact %s", body)
			}
			if gerr != nil || up.GetArtifact().GetTrust() != artifact.TrustTrusted || len(up.GetArtifact().GetSigners()) != n || !up.GetExisted() {
				t.Errorf("gRPC: %v %v", up, gerr)
			}
		})
	}
	list, err := g.client.ListArtifacts(ctx, &fleetv1.ListArtifactsRequest{})
	if err != nil || len(list.GetArtifacts()) != stored || stored != 2 {
		t.Fatalf("stored %d of %d good images: %v %v", len(list.GetArtifacts()), stored, list, err)
	}
}

// revokeOn revokes ks.Revoked on board i of g (burned ks.Burned()).
func revokeOn(t *testing.T, g *fwGateway, i int, ks sigtest.Keys) {
	t.Helper()
	fl, err := flash.Open(g.fm.Boards()[i].Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, done, err := efuse.Open(fl.Dir()).Revoke([]image.KeyDigest{ks.Trusted.Digest}, []image.KeyDigest{ks.Revoked.Digest}); err != nil || len(done) != 1 {
		t.Fatalf("revoke: %v %v", done, err)
	}
}

// TestOpenGatewayMarksAndDryRuns: a gateway without keys keeps unsigned
// and untrusted images, marked as such with their signers; a dry run over
// REST and gRPC refuses the secure boards that would refuse one, naming
// them and why, and keeps the open board.
func TestOpenGatewayMarksAndDryRuns(t *testing.T) {
	ks := sigtest.NewKeys(t)
	g := startFirmwareGatewayKeys(t, 3, true, fwKeys{boards: func(i int) []image.KeyDigest {
		if i < 2 {
			return ks.Burned()
		}
		return nil
	}})
	revokeOn(t, g, 0, ks)
	revokeOn(t, g, 1, ks)
	ctx := g.ctx(t, "admin")
	for _, c := range sigtest.Cases(t, ks, "2.0.0") {
		if c.Structural {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			code, body := g.upload(t, "admin", "", c.Image)
			var r struct{ Artifact restArtifact }
			if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil {
				t.Fatalf("REST: %d %s", code, body)
			}
			a := r.Artifact
			wantTrust := artifact.TrustSigned
			if c.Valid == 0 {
				wantTrust = artifact.TrustUnsigned
			}
			valid := 0
			for _, s := range a.Signers {
				if s.Valid {
					valid++
				} else if s.Error == "" {
					t.Errorf("invalid signer without error: %s", body)
				}
			}
			if a.Trust != wantTrust || valid != c.Valid {
				t.Errorf("artifact %s, want trust %q and %d valid signers", body, wantTrust, c.Valid)
			}
			if code, got := g.rest(t, "viewer", "GET", "/v1/artifacts/"+a.SHA256, ""); code != 200 || !strings.Contains(got, `"trust":"`+wantTrust+`"`) {
				t.Errorf("GET: %d %s", code, got)
			}
			plan := `{"artifact":"` + a.SHA256 + `","target":{"all":true}}`
			code, body = g.rest(t, "viewer", "POST", "/v1/rollouts/dry-run", plan)
			var sel struct {
				Waves   []struct{ Boards []string }
				Refused []struct{ Board, Reason string }
			}
			if err := json.Unmarshal([]byte(body), &sel); code != 200 || err != nil {
				t.Fatalf("dry run: %d %s", code, body)
			}
			gsel, err := g.client.DryRunRollout(ctx, &fleetv1.DryRunRolloutRequest{Plan: &fleetv1.RolloutPlan{Artifact: a.SHA256, Target: &fleetv1.RolloutTarget{All: true}}})
			if err != nil {
				t.Fatal(err)
			}
			if c.Want == nil {
				if len(sel.Refused) != 0 || gsel.GetBoards() != 3 {
					t.Errorf("dry run of a trusted image: %s / %v", body, gsel)
				}
				return
			}
			if len(sel.Refused) != 2 || gsel.GetBoards() != 1 || len(gsel.GetRefused()) != 2 || !slices.Contains(gsel.GetWaves()[0].GetBoards(), g.ids[2]) {
				t.Fatalf("dry run: %s / %v", body, gsel)
			}
			want := strings.TrimPrefix(c.Want.Error(), "image: ")
			for _, r := range gsel.GetRefused() {
				if !slices.Contains(g.ids[:2], r.GetBoard()) || !strings.Contains(r.GetReason(), "secure boot would refuse the image") || !strings.Contains(r.GetReason(), want) {
					t.Errorf("refusal %v, want a secure board with %q", r, want)
				}
			}
			// Creating it for the secure boards alone is refused, each
			// named.
			code, body = g.rest(t, "admin", "POST", "/v1/rollouts", `{"artifact":"`+a.SHA256+`","target":{"boards":["`+g.ids[0]+`","`+g.ids[1]+`"]}}`)
			if code != 400 || !strings.Contains(body, g.ids[0]+": secure boot") || !strings.Contains(body, g.ids[1]+": secure boot") {
				t.Errorf("create: %d %s", code, body)
			}
		})
	}
}
