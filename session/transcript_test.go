package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge/wire"
	"github.com/tetherdev/tether/hooks"
	"github.com/tetherdev/tether/store"
)

// transcriptFixture is a Manager observing hook sessions of a user whose
// home is a temporary directory, with a transcript file in its
// ~/.claude/projects.
type transcriptFixture struct {
	t     *testing.T
	st    *store.Store
	log   *Log
	home  string
	path  string
	lines [][]byte // testdata/transcript.jsonl: Claude Code 2.1.197's, of a turn with a Bash call
}

func newTranscriptFixture(t *testing.T) *transcriptFixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLog(ctx, st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; st.Close() })
	home := t.TempDir()
	dir := filepath.Join(home, ".claude", "projects", "-home-dev-project")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	f := &transcriptFixture{t: t, st: st, log: l, home: home, path: filepath.Join(dir, "23434b01-f2f1-4c1b-b368-af8a87ce1400.jsonl")}
	for line := range bytes.Lines(raw) {
		f.lines = append(f.lines, line)
	}
	return f
}

func (f *transcriptFixture) manager() *Manager {
	f.t.Helper()
	m, err := NewManager(context.Background(), Config{Store: f.st, Log: f.log, Home: f.home, Roots: []string{f.home, "/home/dev"}})
	if err != nil {
		f.t.Fatal(err)
	}
	// Before the store closes: the transcript watchers stop.
	f.t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m
}

// write makes the transcript hold lines [0, n) and then partial.
func (f *transcriptFixture) write(n int, partial string) {
	f.t.Helper()
	if err := os.WriteFile(f.path, append(bytes.Join(f.lines[:n], nil), partial...), 0o600); err != nil {
		f.t.Fatal(err)
	}
}

func (f *transcriptFixture) observe(m *Manager, name, path string) {
	f.t.Helper()
	ev := hooks.Event{SessionID: "cc-1", Name: name, Cwd: "/home/dev/project", TranscriptPath: path, ToolName: "Bash", ToolUseID: "toolu_mock000101",
		ToolInput: json.RawMessage(`{"command":"echo hi > f.txt"}`), Raw: json.RawMessage(`{}`)}
	if err := m.Observe(context.Background(), ev); err != nil {
		f.t.Fatal(err)
	}
}

// events returns the logged events after seq as "type text", once the log
// has committed everything appended so far.
func (f *transcriptFixture) events(after int64) []string {
	f.t.Helper()
	mark, err := f.log.Append(Entry{SessionID: "mark", Type: "mark"})
	if err != nil {
		f.t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); f.log.Flushed() < mark; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			f.t.Fatal("the log never committed")
		}
	}
	evs, err := f.st.EventsAfter(context.Background(), after, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Type == "mark" || e.Type == wire.TypeClaudeEvent || e.Type == wire.TypeSessionStatus {
			continue
		}
		var env wire.Envelope
		json.Unmarshal(e.Frame, &env)
		var p struct{ Content string }
		json.Unmarshal(env.Payload, &p)
		out = append(out, strings.TrimSpace(e.Type+" "+p.Content))
	}
	return out
}

func TestTranscriptFollowed(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	m := f.manager()

	// The prompt and the first text are in the file when the tool's hook
	// fires: they come first, the tool call after them; a line still
	// being written waits.
	f.write(6, `{"type":"assistant","uuid":"half`)
	f.observe(m, hooks.EventPreToolUse, f.path)
	got := f.events(0)
	want := []string{"user_message please write f.txt", "stream_start", "stream_chunk I'll write the file.", "stream_end", "tool_call"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after PreToolUse:\n got %q\nwant %q", got, want)
	}
	seen := f.st
	// The rest of the turn: the tool's call and result lines are the
	// hooks' to relay, the closing text is new.
	last, _ := seen.LastSeq(context.Background())
	f.write(8, "")
	f.observe(m, hooks.EventPostToolUse, f.path)
	f.write(len(f.lines), "")
	f.observe(m, hooks.EventStop, f.path)
	got = f.events(last)
	want = []string{"tool_result", "stream_start", "stream_chunk Finished.", "stream_end", "turn_complete"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after Stop:\n got %q\nwant %q", got, want)
	}

	// A restarted daemon goes on from the stored offset; a file replaced
	// by a shorter one is read again from its start, relaying nothing
	// twice.
	last, _ = seen.LastSeq(context.Background())
	m2 := f.manager()
	f.observe(m2, hooks.EventStop, f.path)
	f.write(3, "")
	f.observe(m2, hooks.EventStop, f.path)
	f.write(len(f.lines), "")
	f.observe(m2, hooks.EventStop, f.path)
	if got := f.events(last); fmt.Sprint(got) != fmt.Sprint([]string{"turn_complete", "turn_complete", "turn_complete"}) {
		t.Fatalf("after a restart and a replaced file: %q", got)
	}
}

func TestTranscriptOutsideProjectsIsNotFollowed(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	m := f.manager()
	f.write(len(f.lines), "")
	outside := filepath.Join(t.TempDir(), "stolen.jsonl")
	os.WriteFile(outside, bytes.Join(f.lines, nil), 0o600)
	link := filepath.Join(filepath.Dir(f.path), "link.jsonl")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	notJSONL := strings.TrimSuffix(f.path, ".jsonl") + ".txt"
	os.WriteFile(notJSONL, bytes.Join(f.lines, nil), 0o600)
	for _, path := range []string{outside, link, notJSONL, "relative/x.jsonl", filepath.Dir(f.path), filepath.Join(filepath.Dir(f.path), "..", "..", "..", ".bashrc")} {
		f.observe(m, hooks.EventStop, path)
	}
	for _, e := range f.events(0) {
		if !strings.HasPrefix(e, "turn_complete") {
			t.Fatalf("a file outside ~/.claude/projects was relayed: %q", e)
		}
	}
}

// FuzzTranscriptLine: any line means a user message, a stream of one
// chunk, or nothing; it never panics.
func FuzzTranscriptLine(f *testing.F) {
	raw, err := os.ReadFile("testdata/transcript.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	for line := range bytes.Lines(raw) {
		f.Add(line)
	}
	f.Add([]byte(`{"type":"user","uuid":"u","message":{"content":[{"type":"text","text":"a"},{"type":"image"}]}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		es := transcriptEntries("s", line)
		switch {
		case len(es) == 0:
		case len(es) == 1 && es[0].Type == wire.TypeUserMessage:
		case len(es) == 3 && es[0].Type == wire.TypeStreamStart && es[1].Type == wire.TypeStreamChunk && es[2].Type == wire.TypeStreamEnd:
		default:
			t.Fatalf("%q means %+v", line, es)
		}
	})
}
