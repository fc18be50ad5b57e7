package boardapi

import (
	"errors"
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
