package session

import (
	"context"
	"slices"
	"testing"

	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// TestStartReadyEnd: a session starts its sandbox from the spec's template
// with the session's own fields, says session_ready (echoing the request
// and the isolation it got) once the bridge is ready, and ends on End: the
// bridge is asked to stop, the session is closed and session_end follows.
func TestStartReadyEnd(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		if b.spec.Agent != "demo" || b.spec.WorkDir != f.root || b.spec.ID != f.m.sandboxID(id) {
			t.Fatalf("spawned with %+v", b.spec)
		}
		var ready wire.SessionReady
		if !f.last(id, wire.TypeSessionReady, &ready) || ready.Status != store.StatusIdle || ready.Sandbox == nil || !ready.Sandbox.Bubblewrap {
			t.Fatalf("session_ready: %+v", ready)
		}
		if got := f.status(id); got != store.StatusIdle {
			t.Fatalf("status %q once ready", got)
		}
		if err := f.m.End(context.Background(), id, ""); err != nil {
			t.Fatal(err)
		}
		f.settle()
		if !b.isEnded() || len(b.commands("shutdown")) != 1 {
			t.Fatalf("the bridge was not asked to stop: %+v", b.commands(""))
		}
		var end wire.SessionEnd
		if !f.last(id, wire.TypeSessionEnd, &end) || end.Reason != "user_request" || f.status(id) != store.StatusClosed {
			t.Fatalf("session_end %+v, status %q", end, f.status(id))
		}
		want := []string{wire.TypeSessionStatus, wire.TypeSessionReady, wire.TypeSessionStatus, wire.TypeSessionEnd}
		if got := f.types(id); !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
	})
}
