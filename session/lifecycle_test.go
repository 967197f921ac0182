package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// TestStartReadyEnd: a session starts its sandbox from the spec's template
// with the session's own fields, says session_ready (echoing the request
// and the isolation it got) once the bridge is ready, and ends on End: the
// bridge is asked to stop, the session is closed and session_end follows.
func TestStartReadyEnd(t *testing.T) {
	inBubble(t, func(c *Config) {
		c.Sandbox = sandbox.Spec{Executable: "/bin/tether", Args: []string{"sandbox-bridge"}}
		c.Egress = map[string][]string{"demo": {"api.example:443"}}
	}, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		if b.spec.Agent != "demo" || b.spec.WorkDir != f.root || b.spec.ID != f.m.sandboxID(id) || b.spec.Executable != "/bin/tether" ||
			!slices.Equal(b.spec.Egress, []string{"api.example:443"}) {
			t.Fatalf("spawned with %+v", b.spec)
		}
		var ready wire.SessionReady
		if !f.last(id, wire.TypeSessionReady, &ready) || ready.Status != string(store.StatusIdle) || ready.Resumed || ready.Sandbox == nil || !ready.Sandbox.Bubblewrap {
			t.Fatalf("session_ready: %+v", ready)
		}
		if got := f.status(id); got != store.StatusIdle {
			t.Fatalf("status %q once ready", got)
		}
		if err := f.m.End(context.Background(), id, ""); err != nil {
			t.Fatal(err)
		}
		f.settle()
		if !b.isEnded() || len(b.commands(sandbox.CmdShutdown)) != 1 {
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
		// Ended: a message is refused, End again only says so again.
		if err := f.m.Send(context.Background(), id, "", "hi", nil, Sender{}); code(err) != wire.CodeSessionNotFound {
			t.Fatalf("a message to an ended session: %v", err)
		}
		if err := f.m.End(context.Background(), "sess_nobody", ""); code(err) != wire.CodeSessionNotFound {
			t.Fatalf("End of no session: %v", err)
		}
	})
}

// TestStartRefused: requests a session cannot start from, each with its
// protocol code, and nothing spawned.
func TestStartRefused(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		file := filepath.Join(f.root, "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/etc", filepath.Join(f.root, "out")); err != nil {
			t.Fatal(err)
		}
		existing, _ := f.start(PolicyAsk)
		for name, c := range map[string]struct {
			r    StartRequest
			code string
		}{
			"unknown agent":        {StartRequest{SessionStart: wire.SessionStart{Agent: "gpt", WorkingDirectory: f.root}}, wire.CodeAgentError},
			"unknown policy":       {StartRequest{SessionStart: wire.SessionStart{Policy: "yolo", WorkingDirectory: f.root}}, wire.CodeInvalidMessage},
			"bad session id":       {StartRequest{SessionStart: wire.SessionStart{SessionID: "a/b", WorkingDirectory: f.root}}, wire.CodeInvalidMessage},
			"existing session id":  {StartRequest{SessionStart: wire.SessionStart{SessionID: existing, WorkingDirectory: f.root}}, wire.CodeInvalidMessage},
			"option as agent id":   {StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: f.root}, AgentSessionID: "--dangerously"}, wire.CodeInvalidMessage},
			"no directory":         {StartRequest{}, wire.CodeInvalidMessage},
			"relative directory":   {StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: "proj"}}, wire.CodeInvalidMessage},
			"missing directory":    {StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: filepath.Join(f.root, "nope")}}, wire.CodeInvalidMessage},
			"a file":               {StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: file}}, wire.CodeInvalidMessage},
			"outside the roots":    {StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: "/etc"}}, wire.CodeInvalidMessage},
			"a link out of a root": {StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: filepath.Join(f.root, "out")}}, wire.CodeInvalidMessage},
			"resume of no session": {StartRequest{SessionStart: wire.SessionStart{SessionID: "sess_nobody", Resume: true}}, wire.CodeSessionNotFound},
			"bypass not allowed":   {StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: f.root, PermissionMode: "bypassPermissions"}}, wire.CodeInvalidMessage},
		} {
			if _, err := f.m.Start(context.Background(), c.r); code(err) != c.code {
				t.Errorf("%s: %v, want code %s", name, err, c.code)
			}
		}
		f.settle()
		if n := f.sp.count(); n != 1 {
			t.Fatalf("%d sandboxes spawned", n)
		}
	})
}

// TestSandboxThatDoesNotStart: the session fails: an error, a notification
// and session_end with the reason, status error.
func TestSandboxThatDoesNotStart(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		f.sp.fail = errors.New("bubblewrap is missing")
		id, err := f.m.Start(context.Background(), StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: f.root}})
		if err != nil {
			t.Fatal(err)
		}
		f.settle()
		var end wire.SessionEnd
		if !f.last(id, wire.TypeSessionEnd, &end) || end.Reason != "error" || !strings.Contains(end.Error, "bubblewrap is missing") {
			t.Fatalf("session_end %+v", end)
		}
		want := []string{wire.TypeSessionStatus, wire.TypeError, wire.TypeNotification, wire.TypeSessionEnd}
		if got := f.types(id); !slices.Equal(got, want) || f.status(id) != store.StatusError {
			t.Fatalf("events %q, status %q", got, f.status(id))
		}
	})
}

// TestBridgeThatDies: a sandbox that ends on its own fails its session,
// and the phone is told how it ended.
func TestBridgeThatDies(t *testing.T) {
	for exit, want := range map[sandbox.Exit]string{
		{Reason: sandbox.ExitOOM, OOMKills: 2}:  "the agent ran out of memory: its sandbox was killed by the out-of-memory killer (2 kill(s))",
		{Reason: sandbox.ExitHung}:              "the agent's sandbox stopped answering and was killed",
		{Reason: sandbox.ExitCrash, Signal: 11}: "the agent's sandbox crashed (signal 11)",
		{Reason: sandbox.ExitCrash, Code: 3}:    "the agent's sandbox exited with status 3",
		{Reason: sandbox.ExitClean}:             "the agent's sandbox ended unexpectedly",
		{Reason: sandbox.ExitProtocol}:          "the agent's sandbox sent its events out of order and was ended",
	} {
		t.Run(exit.Reason.String(), func(t *testing.T) {
			inBubble(t, nil, func(t *testing.T, f *fixture) {
				id, b := f.start(PolicyAsk)
				f.send(id, "m1", "hello")
				b.end(exit)
				f.settle()
				var end wire.SessionEnd
				if !f.last(id, wire.TypeSessionEnd, &end) || end.Reason != "error" || end.Error != want || f.status(id) != store.StatusError {
					t.Fatalf("session_end %+v, status %q", end, f.status(id))
				}
				var n wire.Notification
				if !f.last(id, wire.TypeNotification, &n) || n.NotificationType != "error" || n.Priority != "high" {
					t.Fatalf("notification %+v", n)
				}
				// The failed session resumes with a new sandbox.
				if _, err := f.m.Start(context.Background(), StartRequest{SessionStart: wire.SessionStart{SessionID: id, Resume: true}}); err != nil {
					t.Fatal(err)
				}
				f.settle()
				if f.sp.count() != 2 || f.status(id) != store.StatusIdle {
					t.Fatalf("%d sandboxes, status %q", f.sp.count(), f.status(id))
				}
			})
		})
	}
}

// TestRestartAndResume: a daemon that stops leaves its sessions idle; the
// next one resumes a session on its message, with the agent's own
// conversation id; session_start with resume of a live session answers
// session_ready again.
func TestRestartAndResume(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		f.send(id, "m1", "hello")
		b.emit(sandbox.Event{Ev: sandbox.EvDone, AgentSessionID: "agent-conv-1"})
		f.settle()
		f.restart()
		if !b.isEnded() || f.status(id) != store.StatusIdle {
			t.Fatalf("after a restart: bridge ended %v, status %q", b.isEnded(), f.status(id))
		}
		f.send(id, "m2", "again")
		b2 := f.sp.last()
		if b2 == b || b2.spec.AgentSessionID != "agent-conv-1" || !slices.Equal(b2.prompts(), []string{"again"}) {
			t.Fatalf("resumed with %+v, prompts %q", b2.spec, b2.prompts())
		}
		var ready wire.SessionReady
		if !f.last(id, wire.TypeSessionReady, &ready) || !ready.Resumed {
			t.Fatalf("session_ready %+v", ready)
		}
		if _, err := f.m.Start(context.Background(), StartRequest{SessionStart: wire.SessionStart{SessionID: id, Resume: true}, RequestID: "req-2"}); err != nil {
			t.Fatal(err)
		}
		f.settle()
		if f.sp.count() != 2 || f.count(id, wire.TypeSessionReady) != 3 {
			t.Fatalf("%d sandboxes, events %q", f.sp.count(), f.types(id))
		}
	})
}

// TestMessagesWhileTheSandboxStarts: messages sent and a resume asked for
// while the sandbox starts wait for it: the query goes once it is ready,
// and session_ready answers the last request.
func TestMessagesWhileTheSandboxStarts(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		gate := make(chan struct{})
		f.sp.gate = gate
		id, err := f.m.Start(context.Background(), StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: f.root}, RequestID: "req-1"})
		if err != nil {
			t.Fatal(err)
		}
		f.send(id, "m1", "first")
		if _, err := f.m.Start(context.Background(), StartRequest{SessionStart: wire.SessionStart{SessionID: id, Resume: true}, RequestID: "req-2"}); err != nil {
			t.Fatal(err)
		}
		f.settle()
		if f.status(id) != store.StatusStarting || f.count(id, wire.TypeSessionReady) != 0 {
			t.Fatalf("before the sandbox is ready: status %q, events %q", f.status(id), f.types(id))
		}
		close(gate)
		f.settle()
		b := f.sp.last()
		if !slices.Equal(b.prompts(), []string{"first"}) || f.status(id) != store.StatusBusy {
			t.Fatalf("prompts %q, status %q", b.prompts(), f.status(id))
		}
		f.mu.Lock()
		i := slices.IndexFunc(f.events, func(e wire.Envelope) bool { return e.Type == wire.TypeSessionReady })
		reqID := f.events[i].ID
		f.mu.Unlock()
		if reqID != "req-2" || f.count(id, wire.TypeSessionReady) != 1 {
			t.Fatalf("session_ready answers %q; events %q", reqID, f.types(id))
		}
	})
}

// TestIdleTimeout: a session without a turn for IdleTimeout loses its
// sandbox and stays (idle); a pending question keeps the sandbox; the next
// message starts a sandbox again.
func TestIdleTimeout(t *testing.T) {
	inBubble(t, func(c *Config) { c.IdleTimeout = 10 * time.Minute; c.ApprovalTimeout = time.Hour }, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		f.send(id, "m1", "work")
		time.Sleep(time.Hour)
		f.settle()
		if b.isEnded() {
			t.Fatal("stopped during a turn")
		}
		f.ask(b, "t1", "Bash", `{"command":"make"}`)
		f.turnDone(b)
		time.Sleep(30 * time.Minute)
		f.settle()
		if b.isEnded() {
			t.Fatal("stopped while a question waits")
		}
		if err := f.answer(wire.ApprovalResponse{SessionID: id, ToolCallID: "t1", Decision: "approved"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Minute - time.Second)
		f.settle()
		if b.isEnded() {
			t.Fatal("stopped before its time")
		}
		time.Sleep(time.Second)
		f.settle()
		var st wire.SessionStatus
		if !b.isEnded() || !f.last(id, wire.TypeSessionStatus, &st) || st.Reason != "idle_timeout" || st.Sandbox != "stopped" || f.status(id) != store.StatusIdle {
			t.Fatalf("after the idle timeout: ended %v, %+v, status %q", b.isEnded(), st, f.status(id))
		}
		f.send(id, "m2", "more")
		if b2 := f.sp.last(); b2 == b || !slices.Equal(b2.prompts(), []string{"more"}) {
			t.Fatalf("no new sandbox for the next message: %d", f.sp.count())
		}
	})
}

// TestRelease: a run's end releases its session: its sandbox stops once
// the agent is idle, with the reason run_ended.
func TestRelease(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		f.send(id, "m1", "work")
		f.m.Release(id)
		time.Sleep(time.Second)
		f.settle()
		if b.isEnded() {
			t.Fatal("released during a turn")
		}
		f.turnDone(b)
		time.Sleep(time.Second)
		f.settle()
		var st wire.SessionStatus
		if !b.isEnded() || !f.last(id, wire.TypeSessionStatus, &st) || st.Reason != "run_ended" {
			t.Fatalf("after release: ended %v, %+v", b.isEnded(), st)
		}
	})
}

// TestMaxSessions: past MaxSessions running sandboxes a start is refused
// (rate limited, nothing recorded); a session stopped for idleness makes
// room.
func TestMaxSessions(t *testing.T) {
	inBubble(t, func(c *Config) { c.MaxSessions = 1; c.IdleTimeout = time.Minute }, func(t *testing.T, f *fixture) {
		first, _ := f.start(PolicyAsk)
		_, err := f.m.Start(context.Background(), StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: f.root, SessionID: "second"}})
		if code(err) != wire.CodeRateLimited {
			t.Fatalf("a second session: %v", err)
		}
		if _, err := f.st.Session(context.Background(), "second"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the refused session was recorded: %v", err)
		}
		time.Sleep(time.Minute)
		f.settle()
		second, _ := f.start(PolicyAsk)
		// The first one's message now finds no room: refused, it stays idle.
		if err := f.m.Send(context.Background(), first, "m1", "hi", nil, Sender{}); code(err) != wire.CodeRateLimited {
			t.Fatalf("a message to an idle session with no room: %v", err)
		}
		f.settle()
		if f.status(first) != store.StatusIdle || f.status(second) != store.StatusIdle || f.sp.count() != 2 {
			t.Fatalf("statuses %q %q, %d sandboxes", f.status(first), f.status(second), f.sp.count())
		}
	})
}

// TestBridgeThatDoesNotStop: a bridge that ignores shutdown is killed after
// End's grace, and at the daemon's shutdown once its context ends; the
// sessions end, or stay idle, all the same.
func TestBridgeThatDoesNotStop(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		f.sp.hang = true
		ended, b1 := f.start(PolicyAsk)
		kept, b2 := f.start(PolicyAsk)
		start := time.Now()
		if err := f.m.End(context.Background(), ended, ""); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 5*time.Second || !b1.isEnded() || b1.Exit().Reason != sandbox.ExitKilled || f.status(ended) != store.StatusClosed {
			t.Fatalf("End waited %v; bridge %+v; status %q", waited, b1.Exit(), f.status(ended))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f.m.Shutdown(ctx)
		if !b2.isEnded() || b2.Exit().Reason != sandbox.ExitKilled || f.status(kept) != store.StatusIdle {
			t.Fatalf("after shutdown: bridge %+v, status %q", b2.Exit(), f.status(kept))
		}
	})
}

// TestEndWhileTheSandboxStarts: a session ended, or a daemon stopped,
// while its sandbox starts: the sandbox is closed once it is ready, and
// the session is not made ready.
func TestEndWhileTheSandboxStarts(t *testing.T) {
	for _, how := range []string{"end", "shutdown"} {
		t.Run(how, func(t *testing.T) {
			inBubble(t, nil, func(t *testing.T, f *fixture) {
				gate := make(chan struct{})
				f.sp.gate = gate
				id, err := f.m.Start(context.Background(), StartRequest{SessionStart: wire.SessionStart{WorkingDirectory: f.root}})
				if err != nil {
					t.Fatal(err)
				}
				f.settle()
				want := store.StatusClosed
				switch how {
				case "end":
					if err := f.m.End(context.Background(), id, ""); err != nil {
						t.Fatal(err)
					}
				case "shutdown":
					go f.m.Shutdown(context.Background())
					want = store.StatusIdle
				}
				f.settle()
				close(gate)
				f.settle()
				b := f.sp.last()
				if b == nil || !b.isEnded() || b.Exit().Reason != sandbox.ExitKilled {
					t.Fatalf("the sandbox that started late: %+v", b)
				}
				if f.count(id, wire.TypeSessionReady) != 0 || f.status(id) != want {
					t.Fatalf("events %q, status %q", f.types(id), f.status(id))
				}
			})
		})
	}
}
