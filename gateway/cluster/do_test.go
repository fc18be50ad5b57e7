package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/holofleet/holofleet/gateway/cluster"
	"github.com/holofleet/holofleet/gateway/fleet"
)

// TestDoOneResultPerMember: a group action answers once for every board
// the records put in the group, also when the owner's fleet core answers
// for fewer (it lost the group while ownership moved; staticLocal.Do
// answers nothing). It once returned no result at all for them.
func TestDoOneResultPerMember(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	local := &staticLocal{}
	var members []string
	for i := range 31 {
		v := scaleView("x", i)
		v.Gateway = ""
		local.views = append(local.views, v)
		if len(v.Groups) > 0 {
			members = append(members, v.ID)
		}
	}
	eng, err := cluster.OpenEngine(ctx, cluster.EngineOptions{Name: "a", URL: cluster.Embedded, Listen: "127.0.0.1:0", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	c := runMember(ctx, t, eng, local)
	waitStatus(t, c, "a owns its boards", func(st cluster.Status) bool { return st.Owned == len(local.views) && !st.Partitioned })
	res, err := c.Do(ctx, fleet.Selector{Groups: []int{1}}, fleet.Action{Kind: fleet.ActionSceneApply, Body: []byte(`{"slot":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(members) {
		t.Fatalf("%d results for the %d members of group 1: %+v", len(res), len(members), res)
	}
	for i, r := range res {
		if r.Board != members[i] || r.Error == "" {
			t.Errorf("result %d: %+v, want board %s with why it was not acted on", i, r, members[i])
		}
	}
}
