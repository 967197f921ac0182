package bridge

import (
	"testing"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

// TestNewPrimaryConnectionTakesOver: the ReCursor app reconnects (purpose
// primary, no last_seq) while its previous socket is still open on the
// server, as a phone that switched networks leaves it. The old connection
// is closed as replaced, and the new one gets nothing the old one was sent:
// the last turn is not shown twice.
func TestNewPrimaryConnectionTakesOver(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		h := newHarnessOver(t, transport, nil)
		token, first, _ := h.paired()
		first.Close()
		primary := map[string]any{"purpose": wire.PurposePrimary}
		old := h.dial(nil)
		if env := old.Auth(token, primary); env.Type != wire.TypeConnectionAck {
			t.Fatalf("auth: %s", env.Type)
		}
		// A probe and a client that does not say primary (a web tab) take
		// nothing over.
		probe := h.dial(nil)
		probe.Auth(token, map[string]any{"purpose": "probe"})
		tab := h.dial(nil)
		tab.Auth(token, nil)
		seqs := h.appendEvents(3, "turn ")
		for _, c := range []*wstest.Client{old, probe, tab} {
			for range seqs {
				c.Expect(wire.TypeStreamChunk, nil)
			}
		}

		replacement := h.dial(nil)
		if env := replacement.Auth(token, primary); env.Type != wire.TypeConnectionAck {
			t.Fatalf("auth: %s", env.Type)
		}
		if code := old.ExpectClose(); code != CloseReplaced {
			t.Fatalf("old connection closed with %d, want %d", code, CloseReplaced)
		}
		live := h.appendEvents(1, "next ")
		if env := replacement.Expect(wire.TypeStreamChunk, nil); env.Seq != live[0] {
			t.Fatalf("the new connection got seq %d first, want the live %d: the old turn came again", env.Seq, live[0])
		}
		for _, c := range []*wstest.Client{probe, tab} {
			if env := c.Expect(wire.TypeStreamChunk, nil); env.Seq != live[0] {
				t.Fatalf("a connection that was not replaced lost its stream: seq %d", env.Seq)
			}
		}
	})
}
