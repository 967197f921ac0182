package session

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// fakeTerminal refuses to hand over, and counts what it is told.
type fakeTerminal struct {
	released, reclaimed chan struct{}
}

func (f *fakeTerminal) Release(context.Context) (net.Conn, error) {
	f.released <- struct{}{}
	return nil, errors.New("the terminal is gone")
}

func (f *fakeTerminal) Reclaim() { f.reclaimed <- struct{}{} }

// TestTerminalHandOverThatFails: a terminal registers (mode local); a
// second one for the same session is refused; a phone's message asks it
// to hand over, it cannot, and the session stays its terminal's (told to
// resume, mode local, the phone told why) rather than failing.
func TestTerminalHandOverThatFails(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	m := f.manager()
	ctx := context.Background()
	term := &fakeTerminal{released: make(chan struct{}, 1), reclaimed: make(chan struct{}, 1)}
	if err := m.AttachTerminal(ctx, "cc-1", f.home, term); err != nil {
		t.Fatal(err)
	}
	var we *wire.Error
	if err := m.AttachTerminal(ctx, "cc-1", f.home, &fakeTerminal{}); !errors.As(err, &we) || !strings.Contains(we.Message, "another terminal") {
		t.Fatalf("a second terminal: %v", err)
	}
	if err := m.AttachTerminal(ctx, "cc-2", "/etc", &fakeTerminal{}); err == nil {
		t.Fatal("a terminal outside the roots was taken")
	}
	if err := m.Send(ctx, "cc-1", "m1", "from the phone", nil, Sender{}); err != nil {
		t.Fatal(err)
	}
	<-term.released
	<-term.reclaimed
	sums, err := m.Summaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(sums, func(s wire.SessionSummary) bool { return s.SessionID == "cc-1" })
	if i < 0 || sums[i].Mode != ModeLocal || sums[i].Source != string(SourceTerminal) || sums[i].Status == "error" {
		t.Fatalf("after a failed hand-over: %+v", sums)
	}
	if got := f.events(0); !slices.Contains(got, "error") {
		t.Fatalf("the phone was not told: %q", got)
	}
	m.DetachTerminal("cc-1", term)
	if sums, _ = m.Summaries(ctx); slices.ContainsFunc(sums, func(s wire.SessionSummary) bool { return s.SessionID == "cc-1" }) {
		t.Fatal("a terminal session outlived its terminal")
	}
}

// pipeTerminal hands over on a connection of its own, and says when it is
// told to resume.
type pipeTerminal struct {
	released, reclaimed int
	mu                  sync.Mutex
	far                 net.Conn // the terminal's side of the bridge's connection
}

func (p *pipeTerminal) Release(context.Context) (net.Conn, error) {
	near, far := net.Pipe()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.released++
	p.far = far
	return near, nil
}

func (p *pipeTerminal) Reclaim() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reclaimed++
}

func (p *pipeTerminal) counts() (released, reclaimed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.released, p.reclaimed
}

// mode is the session's mode in the session list.
func (f *fixture) mode(id string) string {
	f.t.Helper()
	sums, err := f.m.Summaries(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, s := range sums {
		if s.SessionID == id {
			return s.Mode
		}
	}
	return "gone"
}

// modes are the modes session_status told the phones, in order.
func (f *fixture) modes(id string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events {
		var st wire.SessionStatus
		if e.Type == wire.TypeSessionStatus && json.Unmarshal(e.Payload, &st) == nil && st.SessionID == id && st.Mode != "" {
			out = append(out, st.Mode)
		}
	}
	return out
}

// TestTerminalHandOverAndBack: a phone's message takes a terminal's
// session over (mode remote, the bridge the terminal runs attached, the
// message its first turn); handing it back stops that bridge after the
// turn, and the terminal resumes (mode local). Ending it from the phone
// hands it back too, its turn interrupted.
func TestTerminalHandOverAndBack(t *testing.T) {
	inBubble(t, nil, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		term := &pipeTerminal{}
		if err := f.m.AttachTerminal(ctx, "cc-1", f.root, term); err != nil {
			t.Fatal(err)
		}
		if f.mode("cc-1") != ModeLocal {
			t.Fatalf("mode %q", f.mode("cc-1"))
		}
		f.send("cc-1", "m1", "from the phone")
		b := f.sp.last()
		if released, _ := term.counts(); released != 1 || b == nil || b.spec.ID != f.m.sandboxID("cc-1") {
			t.Fatalf("released %d times, bridge %+v", released, b)
		}
		if f.mode("cc-1") != ModeRemote || !slices.Equal(f.modes("cc-1"), []string{ModeLocal, ModeRemote}) ||
			!slices.Equal(b.prompts(), []string{"from the phone"}) {
			t.Fatalf("after the hand-over: mode %q, session_status modes %q, prompts %q", f.mode("cc-1"), f.modes("cc-1"), b.prompts())
		}
		var ready wire.SessionReady
		if !f.last("cc-1", wire.TypeSessionReady, &ready) || ready.Sandbox == nil || !slices.Contains(ready.Sandbox.Warnings, sandbox.Unconfined) {
			t.Fatalf("session_ready %+v", ready)
		}
		// Handed back during the turn: the bridge stops once it is over.
		if err := f.m.HandBack("cc-1", false); err != nil {
			t.Fatal(err)
		}
		f.settle()
		if b.isEnded() {
			t.Fatal("the bridge stopped during its turn")
		}
		if err := f.m.Send(ctx, "cc-1", "m2", "too late", nil, Sender{}); code(err) != wire.CodeInvalidMessage {
			t.Fatalf("a message while handing back: %v", err)
		}
		f.turnDone(b)
		if _, reclaimed := term.counts(); !b.isEnded() || reclaimed != 1 || f.mode("cc-1") != ModeLocal || f.status("cc-1") != store.StatusIdle ||
			!slices.Equal(f.modes("cc-1"), []string{ModeLocal, ModeRemote, ModeLocal}) {
			t.Fatalf("handed back: bridge ended %v, reclaimed %d, mode %q, status %q", b.isEnded(), reclaimed, f.mode("cc-1"), f.status("cc-1"))
		}
		// Taken over again; ended from the phone mid-turn: interrupted,
		// then back in the terminal, which keeps the session.
		f.send("cc-1", "m3", "again")
		b2 := f.sp.last()
		if b2 == b || !slices.Equal(b2.prompts(), []string{"again"}) {
			t.Fatalf("second hand-over: prompts %q", b2.prompts())
		}
		if err := f.m.End(ctx, "cc-1", ""); err != nil {
			t.Fatal(err)
		}
		f.settle()
		if len(b2.commands(sandbox.CmdInterrupt)) != 1 {
			t.Fatalf("commands %+v", b2.commands(""))
		}
		f.turnDone(b2)
		if released, reclaimed := term.counts(); released != 2 || reclaimed != 2 || f.mode("cc-1") != ModeLocal || f.status("cc-1") != store.StatusIdle {
			t.Fatalf("after End: released %d, reclaimed %d, mode %q, status %q", released, reclaimed, f.mode("cc-1"), f.status("cc-1"))
		}
		f.m.DetachTerminal("cc-1", term)
		f.settle()
		if f.mode("cc-1") != "gone" || f.status("cc-1") != store.StatusClosed {
			t.Fatalf("after the terminal left: mode %q, status %q", f.mode("cc-1"), f.status("cc-1"))
		}
	})
}
