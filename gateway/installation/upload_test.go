package installation_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/holofleet/holofleet/gateway/installation"
	"github.com/holofleet/holofleet/gateway/nettest"
	fleetv1 "github.com/holofleet/holofleet/proto/holo/fleet/v1"
)

// upload streams data to UploadInstallationContent: h, then data in
// chunks of 1000 bytes.
func upload(ctx context.Context, c fleetv1.InstallationServiceClient, h *fleetv1.InstallationContentHeader, data []byte) (*fleetv1.InstallationContent, error) {
	s, err := c.UploadInstallationContent(ctx)
	if err != nil {
		return nil, err
	}
	send := func(m *fleetv1.UploadInstallationContentRequest) error { return s.Send(m) }
	if err := send(&fleetv1.UploadInstallationContentRequest{Part: &fleetv1.UploadInstallationContentRequest_Header{Header: h}}); err == nil {
		for i := 0; i < len(data) && err == nil; i += 1000 {
			err = send(&fleetv1.UploadInstallationContentRequest{Part: &fleetv1.UploadInstallationContentRequest_Chunk{Chunk: data[i:min(i+1000, len(data))]}})
		}
	}
	// A refused upload ends the stream: its status comes with the close.
	return s.CloseAndRecv()
}

// noPartials fails when the content store holds an unfinished addition.
func noPartials(t *testing.T, in *installation.Installer) {
	t.Helper()
	if tmps, _ := filepath.Glob(filepath.Join(in.Contents().Dir(), "put-*.tmp")); len(tmps) != 0 {
		t.Errorf("partial uploads left in the store: %v", tmps)
	}
}

// TestGRPCUpload uploads a description's content over gRPC through the
// gateway's real API server and applies the description naming it by
// sha256 alone: the boards end in sync. An upload without a token is
// refused (Unauthenticated) before its header is read, a viewer's is
// refused and audited with the caller and the content's sha256; a wrong
// sha256, a
// short or long stream, a size over the limit and a stream without its
// header are refused with InvalidArgument and nothing is stored.
func TestGRPCUpload(t *testing.T) {
	r, g, aud := auditedGRPC(t)
	c, as := g.client, g.as
	admin, viewer := g.tokens["admin"], g.tokens["viewer"]

	d, err := installation.Parse("installation.yaml", []byte(strings.ReplaceAll(desc(false, "image"), "$MEDIA", media)))
	if err != nil {
		t.Fatal(err)
	}
	for name, ct := range d.Content {
		data, err := os.ReadFile(ct.File)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		sha := hex.EncodeToString(sum[:])
		h := &fleetv1.InstallationContentHeader{Name: name, Sha256: sha, Size: int64(len(data))}
		if name == "clip" {
			if _, err := upload(context.Background(), c, h, data); status.Code(err) != codes.Unauthenticated {
				t.Fatalf("upload without a token: %v", err)
			}
			if _, err := upload(as(viewer), c, h, data); status.Code(err) != codes.PermissionDenied {
				t.Fatalf("viewer upload: %v", err)
			}
			if _, ok := r.in.Contents().Has(sha); ok {
				t.Fatal("a viewer's upload was stored")
			}
		}
		got, err := upload(as(admin), c, h, data)
		if err != nil || got.Sha256 != sha || got.Size != int64(len(data)) {
			t.Fatalf("upload %s: %v %v", name, got, err)
		}
		if n, ok := r.in.Contents().Has(sha); !ok || n != int64(len(data)) {
			t.Fatalf("%s not in the store after its upload (%d bytes)", name, n)
		}
		d.Content[name] = installation.Content{SHA256: sha, Size: int64(len(data))}
	}
	ap, err := c.ApplyInstallation(as(admin), &fleetv1.ApplyInstallationRequest{Description: string(d.JSON()), Message: "uploaded over gRPC"})
	if err != nil {
		t.Fatalf("apply of the uploaded content: %v", err)
	}
	g.inSync(t, ap.Run.Id, 2)

	// The audit log: the viewer refused, the admin's uploads let in, each
	// naming the caller and the content.
	var allowed, denied, unknown int
	for _, rec := range aud.find("UploadInstallationContent") {
		if rec.Code == "Unauthenticated" && rec.Name == "" {
			unknown++ // refused before its header was read
			continue
		}
		if !strings.HasPrefix(rec.Name, "content ") || len(rec.Name) != len("content ")+64 {
			t.Errorf("audit record names %q, want content <sha256>", rec.Name)
		}
		switch {
		case rec.Allowed && rec.Who.Name == "ada" && rec.Code == "OK":
			allowed++
		case !rec.Allowed && rec.Who.Name == "vic" && rec.Code == "PermissionDenied":
			denied++
		default:
			t.Errorf("audit record: %+v", rec)
		}
	}
	if allowed != len(d.Content) || denied != 1 || unknown != 1 {
		t.Errorf("audit of UploadInstallationContent: %d allowed, %d denied, %d without a token; want %d, 1 and 1", allowed, denied, unknown, len(d.Content))
	}

	fresh := []byte("bytes no test uploaded before")
	sum := sha256.Sum256(fresh)
	sha := hex.EncodeToString(sum[:])
	wrong := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name string
		h    *fleetv1.InstallationContentHeader
		data []byte
	}{
		{"wrong sha256", &fleetv1.InstallationContentHeader{Sha256: wrong, Size: int64(len(fresh))}, fresh},
		{"fewer bytes than declared", &fleetv1.InstallationContentHeader{Sha256: sha, Size: int64(len(fresh)) + 1}, fresh},
		{"more bytes than declared", &fleetv1.InstallationContentHeader{Size: int64(len(fresh)) - 1}, fresh},
		{"over the limit", &fleetv1.InstallationContentHeader{Size: installation.MaxContent + 1}, fresh},
		{"negative size", &fleetv1.InstallationContentHeader{Size: -1}, fresh},
		{"not a sha256", &fleetv1.InstallationContentHeader{Sha256: "abc", Size: int64(len(fresh))}, fresh},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := upload(as(admin), c, tc.h, tc.data); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("upload: %v, want InvalidArgument", err)
			}
			for _, s := range []string{sha, wrong} {
				if _, ok := r.in.Contents().Has(s); ok {
					t.Fatalf("%s stored", s)
				}
			}
			noPartials(t, r.in)
		})
	}
	t.Run("chunk first", func(t *testing.T) {
		s, err := c.UploadInstallationContent(as(admin))
		if err != nil {
			t.Fatal(err)
		}
		_ = s.Send(&fleetv1.UploadInstallationContentRequest{Part: &fleetv1.UploadInstallationContentRequest_Chunk{Chunk: fresh}})
		if _, err := s.CloseAndRecv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("a chunk before the header: %v", err)
		}
	})
	t.Run("no header", func(t *testing.T) {
		s, err := c.UploadInstallationContent(as(admin))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CloseAndRecv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("an empty stream: %v", err)
		}
	})
	if _, ok := r.in.Contents().Has(sha); ok {
		t.Fatal("a refused upload was stored")
	}
}

// TestGRPCUploadGrpcurl uploads a file with grpcurl, a real gRPC client
// working from reflection alone: the header and two chunks as one
// stream of JSON messages.
func TestGRPCUploadGrpcurl(t *testing.T) {
	grpcurl, run := nettest.Grpcurl(t)
	r := startRig(t, 1, nil, nil)
	g := serveGRPC(t, r, &memAudit{})
	data := []byte("a clip's worth of bytes, sent by grpcurl")
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	b64 := base64.StdEncoding.EncodeToString
	msgs := `{"header": {"name": "clip", "sha256": "` + sha + `", "size": ` + strconv.Itoa(len(data)) + `}}` +
		`{"chunk": "` + b64(data[:10]) + `"}{"chunk": "` + b64(data[10:]) + `"}`
	method := "holo.fleet.v1.InstallationService/UploadInstallationContent"
	if out, err := grpcurl("-H", "authorization: Bearer "+g.tokens["viewer"], "-d", msgs, g.addr, method); err == nil || !strings.Contains(out, "PermissionDenied") {
		t.Fatalf("viewer upload: %v\n%s", err, out)
	}
	if out := run("-H", "authorization: Bearer "+g.tokens["admin"], "-d", msgs, g.addr, method); !strings.Contains(out, `"sha256": "`+sha+`"`) {
		t.Fatalf("grpcurl upload:\n%s", out)
	}
	if n, ok := r.in.Contents().Has(sha); !ok || n != int64(len(data)) {
		t.Fatalf("the upload is not in the store (%d bytes)", n)
	}
}
