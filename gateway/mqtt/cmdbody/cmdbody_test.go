package cmdbody

import (
	"errors"
	"testing"
)

// TestReaders: each reader takes what its command may hold and refuses
// the rest with ErrBadCommand naming the field.
func TestReaders(t *testing.T) {
	m, err := Object([]byte(` {"name":"intro","slot":3,"lead_ms":2.5,"loop":true} `))
	if err != nil {
		t.Fatal(err)
	}
	if empty, err := Object(nil); err != nil || len(empty) != 0 {
		t.Errorf("empty payload: %v %v", empty, err)
	}
	for _, bad := range []string{`[1]`, `"x"`, `null`, `{"a":`, `{} {}`} {
		if _, err := Object([]byte(bad)); !errors.Is(err, ErrBadCommand) {
			t.Errorf("Object(%s) = %v, want ErrBadCommand", bad, err)
		}
	}
	if err := OnlyKeys(m, "scene", "name", "slot", "lead_ms", "loop"); err != nil {
		t.Error(err)
	}
	if err := OnlyKeys(m, "scene", "name"); !errors.Is(err, ErrBadCommand) {
		t.Errorf("unknown keys: %v", err)
	}
	if s, ok, err := String(m, "name", 32); s != "intro" || !ok || err != nil {
		t.Errorf("String: %q %v %v", s, ok, err)
	}
	if _, ok, err := String(m, "name", 3); !ok || !errors.Is(err, ErrBadCommand) {
		t.Errorf("String over its length: %v %v", ok, err)
	}
	if _, ok, err := String(m, "slot", 8); !ok || !errors.Is(err, ErrBadCommand) {
		t.Errorf("String of a number: %v %v", ok, err)
	}
	if _, ok, err := String(m, "absent", 8); ok || err != nil {
		t.Errorf("String absent: %v %v", ok, err)
	}
	if n, ok, err := Number(m, "slot", 1, 255, true); n != 3 || !ok || err != nil {
		t.Errorf("Number: %v %v %v", n, ok, err)
	}
	if _, _, err := Number(m, "lead_ms", 0, 100, true); !errors.Is(err, ErrBadCommand) {
		t.Errorf("Number not whole: %v", err)
	}
	if _, _, err := Number(m, "slot", 4, 9, false); !errors.Is(err, ErrBadCommand) {
		t.Errorf("Number out of range: %v", err)
	}
	if v, ok, err := Bool(m, "loop"); !v || !ok || err != nil {
		t.Errorf("Bool: %v %v %v", v, ok, err)
	}
	if _, _, err := Bool(m, "name"); !errors.Is(err, ErrBadCommand) {
		t.Errorf("Bool of a string: %v", err)
	}
}
