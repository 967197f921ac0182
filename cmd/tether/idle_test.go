package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tetherdev/tether/wire"
)

// stoppedForIdleness matches the session_status that says a session's
// sandbox stopped for idleness.
func stoppedForIdleness(id string) func(wire.Envelope) bool {
	return func(e wire.Envelope) bool {
		var st wire.SessionStatus
		json.Unmarshal(e.Payload, &st)
		return st.SessionID == id && st.Sandbox == "stopped" && st.Reason == "idle_timeout"
	}
}

// TestIdleSessionStopsAndResumesOnItsNextMessage: with --idle-timeout, a
// session's sandbox stops after a turn and the phone is told; the next
// message starts it again and is answered; --max-sessions 1 refuses a
// second sandbox while the first runs, and accepts it once the first
// stopped for idleness.
func TestIdleSessionStopsAndResumesOnItsNextMessage(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, "--idle-timeout", "300ms", "--max-sessions", "1")
	c, _ := d.phone(nil)
	d.startSession(c, "first", "ask")
	c.WaitFor(wire.TypeSessionReady, nil, forSession("first"))

	// While the first runs, a second sandbox is refused.
	d.startSession(c, "second", "ask")
	var e wire.Error
	c.WaitFor(wire.TypeError, &e, func(env wire.Envelope) bool { return env.ID == "start-second" })
	if e.Code != wire.CodeRateLimited || !strings.Contains(e.Message, "--max-sessions") {
		t.Fatalf("a second sandbox: %+v", e)
	}

	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": "first", "content": "hello"})
	c.WaitFor(wire.TypeTurnComplete, nil, forSession("first"))
	var st wire.SessionStatus
	c.WaitFor(wire.TypeSessionStatus, &st, stoppedForIdleness("first"))
	if st.Status != "idle" {
		t.Fatalf("status %+v", st)
	}
	// Its place is free: the second session starts now.
	d.startSession(c, "second", "ask")
	c.WaitFor(wire.TypeSessionReady, nil, forSession("second"))
	c.WaitFor(wire.TypeSessionStatus, nil, stoppedForIdleness("second"))

	// The first's next message starts its sandbox again and is answered.
	c.Send(wire.TypeMessage, "m2", map[string]any{"session_id": "first", "content": "are you back"})
	c.WaitFor(wire.TypeTurnComplete, nil, forSession("first"))
	if !strings.Contains(streamed(c), "are you back") {
		t.Fatalf("the resumed session did not answer: %q", streamed(c))
	}
}
