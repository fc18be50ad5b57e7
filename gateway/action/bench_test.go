package action

import "testing"

// BenchmarkDecode is the cost a fleet action pays for its body being
// checked before anything is sent (the API decodes it, then the fleet
// core again for the frame).
func BenchmarkDecode(b *testing.B) {
	for _, bc := range []struct {
		name string
		kind Kind
		body string
	}{
		{"leds", KindLEDs, `{"mode":"solid","colour":"#102030","brightness":40,"loop":true}`},
		{"holo", KindHolo, `{"motion":"move","x":0.25,"y":-1}`},
		{"scene", KindSceneApply, `{"scene":{"leds":{"mode":"rainbow"},"then":"restore","duration_s":5}}`},
	} {
		body := []byte(bc.body)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ab, err := Decode(bc.kind, body)
				if err != nil {
					b.Fatal(err)
				}
				ab.Native()
			}
		})
	}
}
