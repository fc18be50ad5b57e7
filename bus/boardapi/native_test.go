package boardapi

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

func TestLEDPatchFromNative(t *testing.T) {
	for _, tc := range []struct {
		hex  []byte
		want LEDPatch
	}{
		{[]byte{0x01, 0xff, 0x80, 0x00, 0x1e, 0x02}, LEDPatch{Mode: ptr("solid"), Colour: ptr("#ff8000"), Brightness: ptr(30), Loop: ptr(false)}},
		{[]byte{0x02, 0x01, 0x02, 0x03, 0x00, 0x01}, LEDPatch{Mode: ptr("wipe"), Loop: ptr(true)}},
		{[]byte{0xff, 0x00, 0x00, 0x00, 0x00, 0x00}, LEDPatch{Loop: ptr(false)}},
		{[]byte{0x09, 0x00, 0x00, 0x00, 0x00, 0x00}, LEDPatch{Mode: ptr("mode 9"), Loop: ptr(false)}},
	} {
		got, err := LEDPatchFromNative(tc.hex)
		if err != nil {
			t.Fatalf("% x: %v", tc.hex, err)
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("% x (-got +want)\n%s", tc.hex, diff)
		}
	}
	if _, err := LEDPatchFromNative([]byte{1, 2}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("short payload: %v", err)
	}
}

var motionNativeTests = []struct {
	hex  []byte
	want MotionRequest
	err  bool
}{
	{hex: []byte{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, want: MotionRequest{Motion: "center"}},
	{hex: []byte{0x01, 0x64, 0x9c, 0xe8, 0x03, 0x00, 0x00}, want: MotionRequest{Motion: "move", X: ptr(1.0), Y: ptr(-1.0), DurationMS: ptr(1000)}},
	{hex: []byte{0x01, 0x65, 0x00, 0x00, 0x00, 0x00, 0x00}, err: true}, // 101
	{hex: []byte{0x02, 0x80, 0x7f, 0x00, 0x00, 0x00, 0x00}, want: MotionRequest{Motion: "nudge", X: ptr(-1.28), Y: ptr(1.27)}},
	{hex: []byte{0x04, 0x32, 0x32, 0x20, 0x03, 0x28, 0x03}, want: MotionRequest{Motion: "wag", DurationMS: ptr(800), Range: ptr(40), Count: ptr(3)}},
	{hex: []byte{0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, want: MotionRequest{Motion: "twitch"}},
	{hex: []byte{0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, want: MotionRequest{Motion: "off"}},
	{hex: []byte{0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}, err: true},
	{hex: []byte{0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff}, want: MotionRequest{Motion: "wag", Count: ptr(255)}},
	{hex: []byte{0x04, 0x00, 0x00, 0x00, 0x00, 0xff, 0x00}, want: MotionRequest{Motion: "wag", Range: ptr(255)}}, // Motion refuses it
	{hex: []byte{0x00}, err: true},
}

func TestMotionFromNative(t *testing.T) {
	for _, tc := range motionNativeTests {
		got, err := MotionFromNative(tc.hex)
		if tc.err {
			if !errors.Is(err, ErrMotion) || !errors.Is(err, ErrBadRequest) {
				t.Errorf("% x: %+v %v, want bad request", tc.hex, got, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("% x: %v", tc.hex, err)
		}
		if diff := cmp.Diff(got, tc.want); diff != "" {
			t.Errorf("% x (-got +want)\n%s", tc.hex, diff)
		}
	}
	if _, err := (MotionRequest{Motion: "wag", Range: ptr(255)}).Validate(); !errors.Is(err, ErrMotion) {
		t.Errorf("range 255: %v", err)
	}
}

// TestHasExtension: an extension counts in extensions, and in features
// for boards from before the extensions field; never a feature of the
// specification's own list by mistake.
func TestHasExtension(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		features, extensions []string
		want                 bool
	}{
		{"in extensions", []string{"leds"}, []string{"fire", "time"}, true},
		{"old board: in features", []string{"leds", "fire"}, nil, true},
		{"neither", []string{"leds"}, []string{"time"}, false},
		{"nothing", nil, nil, false},
	} {
		if got := HasExtension(tc.features, tc.extensions, ExtensionFire); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, f := range Features {
		if !IsFeature(f) {
			t.Errorf("IsFeature(%q) false", f)
		}
	}
	for _, e := range []string{ExtensionFire, ExtensionTime, ExtensionLinkI2C} {
		if IsFeature(e) {
			t.Errorf("extension %q is a feature", e)
		}
	}
}

// FuzzNative: the native LEDS and HOLO payload decoders never panic, and
// what they accept re-encodes to the same payload's meaning: an accepted
// HOLO motion is one of Motions, an LEDS patch always sets loop.
func FuzzNative(f *testing.F) {
	for _, tc := range motionNativeTests {
		f.Add(tc.hex)
	}
	f.Add([]byte{0x01, 0xff, 0x80, 0x00, 0x1e, 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := LEDPatchFromNative(b); err == nil {
			if p.Loop == nil {
				t.Fatalf("% x: loop not set", b)
			}
			if err := p.Check(); err != nil && !errors.Is(err, ErrBadRequest) {
				t.Fatalf("% x: %v is not bad_request", b, err)
			}
		} else if !errors.Is(err, ErrBadRequest) {
			t.Fatalf("% x: %v is not bad_request", b, err)
		}
		if m, err := MotionFromNative(b); err == nil {
			if !slices.Contains(Motions, m.Motion) {
				t.Fatalf("% x: motion %q", b, m.Motion)
			}
		} else if !errors.Is(err, ErrMotion) {
			t.Fatalf("% x: %v does not match ErrMotion", b, err)
		}
	})
}

// FuzzSceneApply: a scene body is decoded strictly and checked without
// panicking; a checked scene survives a JSON round trip unchanged.
func FuzzSceneApply(f *testing.F) {
	for _, s := range []string{
		`{"name":"intro"}`, `{"slot":3}`,
		`{"scene":{"screen":{"path":"/a.mov","loops":2},"leds":{"mode":"wipe","colour":"teal"},"holo":{"motion":"wag"},"then":"restore"}}`,
		`{"scene":{"then":"off","duration_s":2.5}}`, `{"scene":{"screen":{"path":"/x.part"}}}`, `{}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req SceneApply
		if err := DecodeBytes(b, &req, false); err != nil {
			return
		}
		if req.Name != nil {
			_ = CheckSceneName(*req.Name)
		}
		if req.Scene == nil || req.Scene.Check() != nil {
			return
		}
		out, err := json.Marshal(req.Scene)
		if err != nil {
			t.Fatal(err)
		}
		var back Scene
		if err := DecodeBytes(out, &back, false); err != nil {
			t.Fatalf("re-decoding %s: %v", out, err)
		}
		if err := back.Check(); err != nil {
			t.Fatalf("%s checked, its round trip %s does not: %v", b, out, err)
		}
		if diff := cmp.Diff(back, *req.Scene); diff != "" {
			t.Fatalf("round trip of %s (-got +want)\n%s", out, diff)
		}
	})
}
