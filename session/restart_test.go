package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// TestStopLeavesATurnToTheNextDaemon: a daemon that stops with
// KeepRunningTurns leaves a session whose turn runs to the next daemon,
// which adopts its sandbox at the last event it committed: the turn goes
// on in the same stream, its questions stay pending with what is left of
// their time, and answers reach the adopted sandbox. A session with no
// turn running is stopped as before.
func TestStopLeavesATurnToTheNextDaemon(t *testing.T) {
	sockets := t.TempDir()
	// As the daemon makes it: its user's alone (sandbox.Adoptable trusts
	// no other).
	if err := os.Chmod(sockets, 0o700); err != nil {
		t.Fatal(err)
	}
	inBubble(t, func(c *Config) {
		c.KeepRunningTurns = true
		c.Sandbox.SocketDir = sockets
		c.ApprovalTimeout = 10 * time.Minute
	}, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		idle, bi := f.start(PolicyAsk)
		f.send(id, "m1", "list the files")
		var seq int64
		numbered := func(sb *fakeSandbox, ev sandbox.Event) {
			seq++
			ev.Seq = seq
			sb.emit(ev)
		}
		for _, line := range observedTurn[:5] { // the turn is cut in its first text
			numbered(b, sandbox.Event{Ev: sandbox.EvMessage, Data: json.RawMessage(line)})
		}
		for _, call := range []string{"t-answered", "t-expires"} {
			numbered(b, sandbox.Event{Ev: sandbox.EvPermissionRequest, Request: &agent.PermissionRequest{
				RequestID: "req-" + call, ToolUseID: call, ToolName: "Bash", Input: json.RawMessage(`{"command":"make"}`)}})
		}
		f.settle()
		if b.lastCommitted() != seq {
			t.Fatalf("committed %d of %d events", b.lastCommitted(), seq)
		}
		time.Sleep(4 * time.Minute)
		// The bridge left running has its pid file in the socket
		// directory, as a real one does.
		if err := os.WriteFile(filepath.Join(sockets, f.m.sandboxID(id)+".pid"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		f.restart()
		if !b.detached || b.isEnded() || !bi.isEnded() {
			t.Fatalf("after the stop: busy bridge detached %v, ended %v; idle bridge ended %v", b.detached, b.isEnded(), bi.isEnded())
		}
		b2 := f.sp.last()
		if b2 == b || b2.adoptedAt != (sandbox.Mark{Generation: b.gen, Seq: seq}) || f.status(id) != store.StatusBusy || len(b2.prompts()) != 0 {
			t.Fatalf("adopted at %+v (want %s/%d), status %q, prompts %q", b2.adoptedAt, b.gen, seq, f.status(id), b2.prompts())
		}
		if f.status(idle) != store.StatusIdle || f.sp.count() != 3 {
			t.Fatalf("the idle session: status %q; %d sandboxes", f.status(idle), f.sp.count())
		}
		if pending, _ := f.m.PendingApprovals(context.Background()); len(pending) != 2 || f.cancelled(id, "t-answered") != "" {
			t.Fatalf("%d pending after the restart; events %q", len(pending), f.types(id))
		}
		if err := f.answer(wire.ApprovalResponse{SessionID: id, ToolCallID: "t-answered", Decision: "approved"}); err != nil {
			t.Fatal(err)
		}
		if d := b2.decision("req-t-answered"); d == nil || d.Behavior != "allow" {
			t.Fatalf("the answer reached %+v", d)
		}
		time.Sleep(6*time.Minute - time.Second)
		f.settle()
		if b2.decision("req-t-expires") != nil {
			t.Fatal("denied before its time")
		}
		time.Sleep(time.Second)
		f.settle()
		if d := b2.decision("req-t-expires"); d == nil || d.Behavior != "deny" || f.cancelled(id, "t-expires") != "timeout" {
			t.Fatalf("at its time: %+v", d)
		}
		// The rest of the turn, from the adopted bridge.
		for _, line := range observedTurn[5:] {
			numbered(b2, sandbox.Event{Ev: sandbox.EvMessage, Data: json.RawMessage(line)})
		}
		numbered(b2, sandbox.Event{Ev: sandbox.EvDone})
		f.settle()
		types := f.types(id)
		if f.count(id, wire.TypeTurnComplete) != 1 || f.status(id) != store.StatusIdle || b2.lastCommitted() != seq {
			t.Fatalf("after the turn: status %q, committed %d of %d, events %q", f.status(id), b2.lastCommitted(), seq, types)
		}
		// One stream for the cut message, not a second start of it.
		if starts := f.count(id, wire.TypeStreamStart); starts != 2 || !slices.Contains(types, wire.TypeToolCall) {
			t.Fatalf("%d stream_start; events %q", starts, types)
		}
	})
}
