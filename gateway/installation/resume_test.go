package installation_test

import (
	"sync"
	"testing"

	"github.com/holofleet/holofleet/gateway/installation"
)

// TestGatewayStopsMidRunThenResumes stops the gateway while a run is
// applying boards (its context ends mid-step, as a process would die
// there), starts a new one over the same store, and expects the run to
// carry on from its records and finish, with no board ever holding a
// scene that names a missing file.
func TestGatewayStopsMidRunThenResumes(t *testing.T) {
	cut := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	r := startRig(t, 4, nil, func(o *installation.Options) {
		o.Step = func(board, step, what string) {
			if step == installation.StepUpload && what == "/images/logo.png" {
				once.Do(func() {
					close(cut)
					<-release
				})
			}
		}
	})
	r.label(t)
	d := r.parse(t, desc(false, "image"))
	_, st, err := r.in.Apply(t.Context(), d, "test", "cut by a stop")
	if err != nil {
		t.Fatal(err)
	}
	<-cut
	// The gateway stops with the step half done.
	r.cancel()
	close(release)
	r.stopGateway()
	for _, b := range r.boards {
		checkNoDanglingScene(t, b.URL)
	}
	// A new gateway over the same store finds the run and finishes it.
	r.startGateway(t, nil)
	if id := r.in.ActiveRun(); id != st.ID {
		t.Fatalf("active run after the restart: %d, want %d", id, st.ID)
	}
	st = r.waitRun(t, st.ID)
	if st.State != installation.RunDone || st.Phases[installation.PhaseInSync] != 4 {
		bs, _ := r.in.RunBoards(st.ID)
		t.Fatalf("resumed run: %+v %+v", st, bs)
	}
	for _, b := range r.boards {
		checkNoDanglingScene(t, b.URL)
		if n := len(scenesOf(t, b.URL)); n == 0 {
			t.Errorf("board %s has no scenes after the resumed run", b.ID)
		}
	}
}
