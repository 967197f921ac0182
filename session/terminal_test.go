package session

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"

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
