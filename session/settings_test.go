package session

import (
	"context"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// configured is the result of a Configure run in the background.
type configured struct {
	st  wire.SessionSettings
	err error
}

// configure runs a phone's session_configure of the model in the
// background, and settles: the agent has been asked, or it was answered.
func (f *fixture) configure(id, model string) <-chan configured {
	out := make(chan configured, 1)
	go func() {
		st, err := f.m.Configure(context.Background(), wire.SessionConfigure{SessionID: id, Model: &model}, Sender{DeviceName: "phone"})
		out <- configured{st, err}
	}()
	f.settle()
	return out
}

// TestConfigure: a running agent applies a phone's settings first, and
// the settings it reports are the session's, in the store and for every
// device; an agent that refuses, that does not answer in time, or whose
// sandbox ends meanwhile changes nothing.
func TestConfigure(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		res := f.configure(id, "opus")
		cmds := b.commands(sandbox.CmdConfigure)
		if len(cmds) != 1 || cmds[0].Settings == nil || cmds[0].Settings.Model != "opus" {
			t.Fatalf("configure commands %+v", cmds)
		}
		b.emit(sandbox.Event{Ev: sandbox.EvConfigured, ID: cmds[0].ID, Settings: &agent.Settings{Model: "claude-opus-4"}})
		r := <-res
		if r.err != nil || r.st.Model != "claude-opus-4" {
			t.Fatalf("configure: %+v", r)
		}
		f.settle()
		var ev wire.SessionSettings
		if !f.last(id, wire.TypeSessionSettings, &ev) || ev.Model != "claude-opus-4" || ev.ChangedBy != "phone" {
			t.Fatalf("session_settings %+v", ev)
		}
		if rec, err := f.st.Session(context.Background(), id); err != nil || rec.Settings.Model != "claude-opus-4" {
			t.Fatalf("stored %+v, %v", rec.Settings, err)
		}

		res = f.configure(id, "haiku")
		cmds = b.commands(sandbox.CmdConfigure)
		b.emit(sandbox.Event{Ev: sandbox.EvError, ID: cmds[len(cmds)-1].ID, Error: "unknown model"})
		if r := <-res; code(r.err) != wire.CodeAgentError {
			t.Fatalf("refused by the agent: %+v", r)
		}
		res = f.configure(id, "haiku")
		start := time.Now()
		if r := <-res; code(r.err) != wire.CodeAgentError || time.Since(start) != configureWait {
			t.Fatalf("no answer: %+v after %v", r, time.Since(start))
		}
		res = f.configure(id, "haiku")
		b.end(sandbox.Exit{Reason: sandbox.ExitCrash, Code: 1})
		if r := <-res; code(r.err) != wire.CodeAgentError {
			t.Fatalf("the sandbox ended: %+v", r)
		}
		f.settle()
		if rec, err := f.st.Session(context.Background(), id); err != nil || rec.Settings.Model != "claude-opus-4" || f.count(id, wire.TypeSessionSettings) != 1 {
			t.Fatalf("after the failures: %+v, %v, events %q", rec.Settings, err, f.types(id))
		}
	})
}

// TestConfigureWithoutASandbox: settings changed while no sandbox runs
// are kept for the next start, and those changed while it starts are sent
// once it is ready; bypassPermissions only where the daemon allows it.
func TestConfigureWithoutASandbox(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		id, b := f.start(PolicyAsk)
		f.restart()
		if r := <-f.configure(id, "sonnet"); r.err != nil || r.st.Model != "sonnet" {
			t.Fatalf("configure an idle session: %+v", r)
		}
		bypass := wire.ModeBypass
		if _, err := f.m.Configure(context.Background(), wire.SessionConfigure{SessionID: id, PermissionMode: &bypass}, Sender{}); code(err) != wire.CodeInvalidMessage {
			t.Fatalf("bypass: %v", err)
		}
		gate := make(chan struct{})
		f.sp.gate = gate
		f.send(id, "m1", "hi")
		if r := <-f.configure(id, "opus"); r.err != nil || r.st.Model != "opus" {
			t.Fatalf("configure during the start: %+v", r)
		}
		close(gate)
		f.settle()
		b2 := f.sp.last()
		if b2 == b || b2.spec.Settings.Model != "sonnet" {
			t.Fatalf("started with %+v", b2.spec.Settings)
		}
		if cmds := b2.commands(sandbox.CmdConfigure); len(cmds) != 1 || cmds[0].Settings.Model != "opus" {
			t.Fatalf("settings changed during the start: %+v", cmds)
		}
		if _, err := f.m.Configure(context.Background(), wire.SessionConfigure{SessionID: "sess_nobody"}, Sender{}); code(err) != wire.CodeSessionNotFound {
			t.Fatalf("no session: %v", err)
		}
		if err := f.m.End(context.Background(), id, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := f.m.Configure(context.Background(), wire.SessionConfigure{SessionID: id}, Sender{}); code(err) != wire.CodeSessionNotFound || f.status(id) != store.StatusClosed {
			t.Fatalf("an ended session: %v", err)
		}
	})
}
