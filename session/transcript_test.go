package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/hooks"
	"github.com/tetherdev/tether/internal/eventually"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// transcriptFixture is a Manager observing hook sessions of a user whose
// home is a temporary directory, with a transcript file in its
// ~/.claude/projects.
type transcriptFixture struct {
	t     testing.TB
	st    *store.Store
	log   *EventLog
	home  string
	path  string
	lines [][]byte // testdata/transcript.jsonl: Claude Code 2.1.197's, of a turn with a Bash call
	// logger is the Manager's; discarded unless a test sets it.
	logger *slog.Logger
	// claudeDirs are the Manager's ClaudeDirs (the default when empty).
	claudeDirs []string
}

func newTranscriptFixture(t testing.TB) *transcriptFixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewEventLog(ctx, st, slog.New(slog.DiscardHandler))
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
	f := &transcriptFixture{t: t, st: st, log: l, home: home, path: filepath.Join(dir, "23434b01-f2f1-4c1b-b368-af8a87ce1400.jsonl"),
		logger: slog.New(slog.DiscardHandler)}
	f.use("testdata/transcript.jsonl")
	return f
}

// use makes the fixture's lines those of a recorded transcript.
func (f *transcriptFixture) use(name string) {
	f.t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		f.t.Fatal(err)
	}
	f.lines = nil
	for line := range bytes.Lines(raw) {
		f.lines = append(f.lines, line)
	}
}

func (f *transcriptFixture) manager() *Manager {
	f.t.Helper()
	m, err := NewManager(context.Background(), Config{Store: f.st, Events: f.log, Home: f.home, Roots: []string{f.home, "/home/dev"}, Logger: f.logger,
		ClaudeDirs: f.claudeDirs})
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
	return f.eventsWith(after, false)
}

// eventsWith is events, with the tool named (and "failed:" before a
// failed result's text) when tools is set.
func (f *transcriptFixture) eventsWith(after int64, tools bool) []string {
	f.t.Helper()
	mark, err := f.log.Append(Entry{SessionID: "mark", Type: "mark"})
	if err != nil {
		f.t.Fatal(err)
	}
	eventually.True(f.t, "the log commits", func() bool { return f.log.Flushed() >= mark })
	evs, err := f.st.EventsAfter(context.Background(), after, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		// The model a line names (agent_info) has a test of its own.
		if e.Type == "mark" || e.Type == wire.TypeClaudeEvent || e.Type == wire.TypeSessionStatus || e.Type == wire.TypeAgentInfo {
			continue
		}
		var env wire.Envelope
		json.Unmarshal(e.Frame, &env)
		var p struct {
			Content string
			Tool    string
			Result  wire.ToolResultBody
		}
		json.Unmarshal(env.Payload, &p)
		text := p.Content + p.Result.Content
		if tools && p.Tool != "" {
			text = p.Tool + " " + text
		}
		if tools && e.Type == wire.TypeToolResult && !p.Result.Success {
			text = p.Tool + " failed: " + p.Result.Error
		}
		out = append(out, strings.TrimSpace(e.Type+" "+text))
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
	// The rest of the turn: the tool's call was relayed by its hook, its
	// result is the transcript's (read before PostToolUse's own), the
	// closing text is new.
	last, _ := seen.LastSeq(context.Background())
	f.write(8, "")
	f.observe(m, hooks.EventPostToolUse, f.path)
	f.write(len(f.lines), "")
	f.observe(m, hooks.EventStop, f.path)
	got = f.events(last)
	want = []string{"tool_result (Bash completed with no output)", "stream_start", "stream_chunk Finished.", "stream_end", "turn_complete"}
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

// TestTranscriptToolsRelayedOnce: a tool call and its result appear once
// whichever source comes first, the transcript or the hooks, and in the
// turn's order.
func TestTranscriptToolsRelayedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		result string // the tool_result relayed: the transcript's text, or the hook's stdout
		run    func(f *transcriptFixture, m *Manager)
	}{
		{"transcript first", "tool_result Bash (Bash completed with no output)", func(f *transcriptFixture, m *Manager) {
			f.write(8, "")
			f.observe(m, hooks.EventUserPromptSubmit, f.path)
			f.observe(m, hooks.EventPreToolUse, f.path)
			f.observe(m, hooks.EventPostToolUse, f.path)
			f.write(len(f.lines), "")
			f.observe(m, hooks.EventStop, f.path)
		}},
		{"hooks first", "tool_result Bash", func(f *transcriptFixture, m *Manager) {
			f.write(6, "")
			f.observe(m, hooks.EventPreToolUse, f.path)
			f.observe(m, hooks.EventPostToolUse, f.path)
			f.write(len(f.lines), "")
			f.observe(m, hooks.EventStop, f.path)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newTranscriptFixture(t)
			tc.run(f, f.manager())
			want := []string{"user_message please write f.txt", "stream_start", "stream_chunk I'll write the file.", "stream_end",
				"tool_call Bash", tc.result, "stream_start", "stream_chunk Finished.", "stream_end", "turn_complete"}
			if got := f.eventsWith(0, true); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("the log holds\n %q\nwant\n %q", got, want)
			}
		})
	}
}

// TestTranscriptHooksAfterARestart: a daemon restarted between the
// transcript's lines and the hooks that report the same call and result
// (it relayed them from the transcript) relays neither again: what was
// relayed is read back from the log.
func TestTranscriptHooksAfterARestart(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	f.write(8, "")
	f.observe(f.manager(), hooks.EventUserPromptSubmit, f.path)
	f.events(0) // committed
	last, _ := f.st.LastSeq(context.Background())
	m := f.manager()
	f.observe(m, hooks.EventPreToolUse, f.path)
	f.observe(m, hooks.EventPostToolUse, f.path)
	if got := f.events(last); len(got) != 0 {
		t.Fatalf("relayed again after the restart: %q", got)
	}
}

// TestTranscriptSubagentToolsDoNotWait: a subagent's tool calls reach the
// hooks with the session's transcript_path but are written to the
// subagent's own transcript (observed with Claude Code 2.1.197: the hook
// body names agent_id); their PreToolUse does not wait for a line that
// never comes, and the phone sees the call once, from the hook.
func TestTranscriptSubagentToolsDoNotWait(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	m := f.manager()
	f.write(len(f.lines), "")
	ev := hooks.Event{SessionID: "cc-1", Name: hooks.EventPreToolUse, Cwd: "/home/dev/project", TranscriptPath: f.path, ToolName: "Bash", ToolUseID: "toolu_sub1",
		ToolInput: json.RawMessage(`{"command":"echo from-sub"}`), Raw: json.RawMessage(`{"agent_id":"aa0885086f3eb6572","agent_type":"general-purpose"}`)}
	start := time.Now()
	if err := m.Observe(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= hookWait {
		t.Fatalf("a subagent's PreToolUse waited %v for a line of the session's transcript", took)
	}
	var calls int
	for _, e := range f.eventsWith(0, true) {
		if strings.HasPrefix(e, "tool_call") {
			calls++
		}
	}
	if calls != 2 {
		t.Fatalf("%d tool calls, want the transcript's and the subagent's", calls)
	}
}

// TestTranscriptRelaysWhatNoHookDoes: PostToolUse fires only for tools
// that succeeded, so the result of a command that failed, or of a call
// that was denied, comes from the transcript alone (Claude Code 2.1.197's
// lines of such a turn, in -p mode), and so does a call no hook saw.
func TestTranscriptRelaysWhatNoHookDoes(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	f.use("testdata/transcript-errors.jsonl")
	m := f.manager()
	f.write(len(f.lines), "")
	f.observe(m, hooks.EventStop, f.path)
	want := []string{"user_message please do things", "stream_start", "stream_chunk Running it.", "stream_end",
		"tool_call Bash", "tool_result Bash failed: Exit code 3\nout\nerr",
		"tool_call Write", "tool_result Write failed: Claude requested permissions to write to /home/dev/project/w.txt, but you haven't granted it yet.",
		"tool_call Bash", "tool_call Bash", "tool_result Bash ok", "tool_result Bash two",
		"stream_start", "stream_chunk Done with it.", "stream_end", "turn_complete"}
	if got := f.eventsWith(0, true); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the log holds\n %q\nwant\n %q", got, want)
	}
}

// TestTranscriptTerminalInput: in the terminal UI the user also types
// slash commands and shell commands (after "!"); the phone shows them as
// typed, not Claude Code's tags, and not their output nor the expanded
// command (Claude Code 2.1.197's lines, from tmux).
func TestTranscriptTerminalInput(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	f.use("testdata/transcript-terminal.jsonl")
	m := f.manager()
	f.write(len(f.lines), "")
	f.observe(m, hooks.EventSessionEnd, f.path)
	var got []string
	for _, e := range f.events(0) {
		if strings.HasPrefix(e, "user_message") || strings.HasPrefix(e, "stream_chunk") {
			got = append(got, e)
		}
	}
	want := []string{"user_message please write typed.txt", "stream_chunk Sure.", "stream_chunk Finished.",
		"user_message !echo bashmode", "stream_chunk Finished.", "user_message /hello bob", "stream_chunk Finished."}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the log holds\n %q\nwant\n %q", got, want)
	}
}

// TestTranscriptPromptWithImage: a prompt's images (Claude Code 2.1.197's
// line of a prompt with a PNG, sent with -p in stream-json) reach the
// phone as the message's attachments, as a phone's own images do; an image
// that is not what it claims to be is left out, its text kept.
func TestTranscriptPromptWithImage(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	f.use("testdata/transcript-image.jsonl")
	f.lines = append(f.lines, []byte(`{"type":"user","uuid":"u-fake","message":{"role":"user","content":[{"type":"text","text":"and this"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"bm90IGEgcG5n"}}]}}`+"\n"))
	m := f.manager()
	f.write(len(f.lines), "")
	f.observe(m, hooks.EventStop, f.path)
	f.events(0) // committed
	evs, err := f.st.EventsAfter(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []wire.UserMessage
	for _, e := range evs {
		if e.Type == wire.TypeUserMessage {
			var env wire.Envelope
			var um wire.UserMessage
			json.Unmarshal(e.Frame, &env)
			json.Unmarshal(env.Payload, &um)
			msgs = append(msgs, um)
		}
	}
	if len(msgs) != 2 || msgs[0].Content != "what is this" || len(msgs[0].Attachments) != 1 || msgs[1].Content != "and this" || len(msgs[1].Attachments) != 0 {
		t.Fatalf("user messages = %+v", msgs)
	}
	if a := msgs[0].Attachments[0]; a.Type != "image" || a.MediaType != "image/png" || !strings.HasPrefix(a.Data, "iVBORw0KGgo") {
		t.Fatalf("attachment = %+v", a)
	}
}

// TestTranscriptReplaced: a transcript replaced by another file (another
// inode), even a longer one, or rewritten in place so that the last read
// no longer ends at a line end, is read again from its start; only lines
// not relayed before are.
func TestTranscriptReplaced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// aligned makes the new file's first line end exactly where the
		// last read ended: only the inode tells the files apart.
		aligned bool
		replace func(f *transcriptFixture, content []byte)
	}{
		{"another file", true, func(f *transcriptFixture, content []byte) {
			tmp := f.path + ".new"
			if err := os.WriteFile(tmp, content, 0o600); err != nil {
				f.t.Fatal(err)
			}
			if err := os.Rename(tmp, f.path); err != nil {
				f.t.Fatal(err)
			}
		}},
		{"rewritten in place", false, func(f *transcriptFixture, content []byte) {
			if err := os.WriteFile(f.path, content, 0o600); err != nil {
				f.t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newTranscriptFixture(t)
			m := f.manager()
			f.write(3, "")
			f.observe(m, hooks.EventUserPromptSubmit, f.path)
			f.events(0) // committed
			last, _ := f.st.LastSeq(context.Background())
			// The new file starts with a line longer than what was read,
			// and holds the old lines again.
			read := len(bytes.Join(f.lines[:3], nil))
			head := `{"type":"user","uuid":"u-new","timestamp":"2026-11-25T08:00:00Z","message":{"role":"user","content":"a new prompt`
			tail := `"}}` + "\n"
			pad := read - len(head) - len(tail)
			if !tc.aligned {
				pad += 100
			}
			line := head + strings.Repeat(".", pad) + tail
			tc.replace(f, append([]byte(line), bytes.Join(f.lines, nil)...))
			f.observe(m, hooks.EventStop, f.path)
			got := f.events(last)
			want := []string{"user_message a new prompt", "stream_start", "stream_chunk I'll write the file.", "stream_end",
				"tool_call", "tool_result (Bash completed with no output)", "stream_start", "stream_chunk Finished.", "stream_end", "turn_complete"}
			if len(got) != len(want) || !strings.HasPrefix(got[0], want[0]) || fmt.Sprint(got[1:]) != fmt.Sprint(want[1:]) {
				t.Fatalf("after the replacement\n %q\nwant\n %q", got, want)
			}
		})
	}
}

// TestTranscriptMalformedLines: lines that are not JSON, and lines over
// the bound, are skipped and counted; the lines after them are relayed.
func TestTranscriptMalformedLines(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	var logged bytes.Buffer
	f.logger = slog.New(slog.NewTextHandler(&logged, nil))
	m := f.manager()
	huge := `{"type":"user","uuid":"u-huge","message":{"content":"` + strings.Repeat("x", maxTranscriptLine) + `"}}` + "\n"
	f.lines = append([][]byte{[]byte("not json\n"), []byte(huge), []byte(`{"type":"user","uuid":` + "\n")}, f.lines...)
	f.write(len(f.lines), "")
	f.observe(m, hooks.EventStop, f.path)
	if got := f.events(0); len(got) != 10 || got[0] != "user_message please write f.txt" {
		t.Fatalf("the lines after the bad ones: %q", got)
	}
	if !strings.Contains(logged.String(), "transcript lines skipped") || !strings.Contains(logged.String(), "over_bound=1 malformed=2") {
		t.Fatalf("the skipped lines were not counted:\n%s", logged.String())
	}
}

func TestTranscriptOutsideProjectsIsNotFollowed(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	var logged bytes.Buffer
	f.logger = slog.New(slog.NewTextHandler(&logged, nil))
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
	dir := filepath.Join(filepath.Dir(f.path), "dir.jsonl")
	os.Mkdir(dir, 0o700)
	refused := []string{outside, link, notJSONL, "relative/x.jsonl", dir, filepath.Join(filepath.Dir(f.path), "..", "..", "..", ".bashrc")}
	for _, path := range refused {
		// A tool's hook would wait for its line: it does not, and the
		// refusal is logged once a path, not at every read.
		f.observe(m, hooks.EventPreToolUse, path)
		f.observe(m, hooks.EventStop, path)
	}
	for _, e := range f.events(0) {
		if !strings.HasPrefix(e, "turn_complete") && !strings.HasPrefix(e, "tool_call") {
			t.Fatalf("a file outside ~/.claude/projects was relayed: %q", e)
		}
	}
	if n := strings.Count(logged.String(), "not following a transcript"); n != len(refused) {
		t.Fatalf("%d refusals logged for %d paths:\n%s", n, len(refused), logged.String())
	}
}

// TestTranscriptUnderClaudeConfigDir: a terminal that sets
// $CLAUDE_CONFIG_DIR writes its transcripts there; the daemon, told of the
// directory, follows them, and still nothing outside a projects directory.
func TestTranscriptUnderClaudeConfigDir(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	config := t.TempDir()
	f.claudeDirs = []string{filepath.Join(f.home, ".claude"), config}
	m := f.manager()
	f.path = filepath.Join(config, "projects", "-home-dev-project", "s.jsonl")
	os.MkdirAll(filepath.Dir(f.path), 0o700)
	f.write(len(f.lines), "")
	beside := filepath.Join(config, "history.jsonl")
	os.WriteFile(beside, bytes.Join(f.lines, nil), 0o600)
	f.observe(m, hooks.EventStop, beside)
	if got := f.events(0); len(got) != 1 {
		t.Fatalf("a file beside projects/ was relayed: %q", got)
	}
	f.observe(m, hooks.EventStop, f.path)
	if got := f.events(0); len(got) != 11 || got[1] != "user_message please write f.txt" {
		t.Fatalf("the transcript under $CLAUDE_CONFIG_DIR: %q", got)
	}
}

// TestTranscriptThinkingModelAndMode: a terminal session's thinking (a
// transcript line of its own, Claude Code 2.1.197's against the mock), the
// model that wrote its answer, and the permission mode its hooks report
// reach the phones; each only when it is new.
func TestTranscriptThinkingModelAndMode(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	f.use("testdata/transcript-thinking.jsonl")
	m := f.manager()
	f.write(len(f.lines), "")
	stop := func(mode string) {
		ev := hooks.Event{SessionID: "cc-1", Name: hooks.EventStop, Cwd: "/home/dev/project", TranscriptPath: f.path, PermissionMode: mode, Raw: json.RawMessage(`{}`)}
		if err := m.Observe(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	stop("plan")
	stop("plan")
	stop("default")
	got := f.events(0) // once the log has committed them all
	evs, err := f.st.EventsAfter(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user_message say hello", "thinking_chunk The user wants a greeting.", "stream_start", "stream_chunk Hello.", "stream_end",
		"session_settings", "turn_complete", "turn_complete", "session_settings", "turn_complete"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
	var infos, modes []string
	for _, e := range evs {
		var env wire.Envelope
		json.Unmarshal(e.Frame, &env)
		switch e.Type {
		case wire.TypeAgentInfo:
			var p wire.AgentInfo
			json.Unmarshal(env.Payload, &p)
			infos = append(infos, p.Model)
		case wire.TypeSessionSettings:
			var p wire.SessionSettings
			json.Unmarshal(env.Payload, &p)
			modes = append(modes, p.PermissionMode+" by "+p.ChangedBy)
		}
	}
	if fmt.Sprint(infos) != "[claude-opus-4-8]" || fmt.Sprint(modes) != "[plan by terminal default by terminal]" {
		t.Fatalf("agent_info models %q, settings %q", infos, modes)
	}
	if rec, _ := f.st.Session(context.Background(), "cc-1"); rec.Settings.PermissionMode != "default" {
		t.Errorf("stored mode %q", rec.Settings.PermissionMode)
	}
}

// FuzzTranscriptLine: any line means user messages, streams of one chunk,
// tool calls and tool results, each under a key, or nothing, and reports
// a message's usage within bounds, or none; it never panics.
func FuzzTranscriptLine(f *testing.F) {
	for _, name := range []string{"testdata/transcript.jsonl", "testdata/transcript-errors.jsonl", "testdata/transcript-terminal.jsonl", "testdata/transcript-image.jsonl",
		"testdata/transcript-thinking.jsonl"} {
		raw, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for line := range bytes.Lines(raw) {
			f.Add(line)
		}
	}
	f.Add([]byte(`{"type":"user","uuid":"u","message":{"content":[{"type":"text","text":"a"},{"type":"image"}]}}`))
	f.Add([]byte(`{"type":"user","uuid":"u","message":{"content":"<command-name>/x</command-name><command-args>y</command-args>"}}`))
	for _, bad := range badUsage {
		f.Add([]byte(bad))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		relays, use, ok := decodeTranscriptLine("s", line, time.Now())
		if !ok && (len(relays) > 0 || use != nil) {
			t.Fatalf("%q is malformed but means %+v %+v", line, relays, use)
		}
		if use != nil {
			u := use.use
			for _, n := range []int64{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens} {
				if n < 0 || n > maxMessageTokens {
					t.Fatalf("%q reports usage %+v", line, u)
				}
			}
			if use.id == "" || u == (store.Usage{}) || u.Turns != 0 || u.CostUSD != 0 {
				t.Fatalf("%q reports usage %+v of message %q", line, u, use.id)
			}
		}
		for _, r := range relays {
			es := r.entries
			switch {
			case r.key == "" && len(es) == 1 && es[0].Type == wire.TypeAgentInfo && es[0].Payload.(wire.AgentInfo).Model != "":
				// Relayed when the model changes, not by key.
			case r.key == "":
				t.Fatalf("%q means %+v without a key", line, es)
			case len(es) == 1 && es[0].Type == wire.TypeThinkingChunk:
			case len(es) == 1 && es[0].Type == wire.TypeUserMessage:
			case len(es) == 1 && es[0].Type == wire.TypeToolCall:
			case len(es) == 1 && es[0].Type == wire.TypeToolResult:
			case len(es) == 3 && es[0].Type == wire.TypeStreamStart && es[1].Type == wire.TypeStreamChunk && es[2].Type == wire.TypeStreamEnd:
			default:
				t.Fatalf("%q means %+v", line, es)
			}
		}
	})
}

// BenchmarkTranscriptPoll is what a live terminal session's watcher costs
// every transcriptPoll when nothing was written: the path checked, the
// file opened through its root, its size and last line end looked at.
func BenchmarkTranscriptPoll(b *testing.B) {
	f := newTranscriptFixture(b)
	f.write(len(f.lines), "")
	m := f.manager()
	m.followTranscript(context.Background(), "cc-1", f.path)
	for b.Loop() {
		m.followTranscript(context.Background(), "cc-1", f.path)
	}
}

// badUsage are assistant lines whose usage is malformed: their text is
// relayed, their usage not counted.
var badUsage = []string{
	`{"type":"assistant","uuid":"a-bad1","message":{"id":"msg_bad1","model":"m","content":[{"type":"text","text":"one"}],"usage":"lots"}}`,
	`{"type":"assistant","uuid":"a-bad2","message":{"id":"msg_bad2","model":"m","content":[{"type":"text","text":"two"}],"usage":{"input_tokens":-5,"output_tokens":3}}}`,
	`{"type":"assistant","uuid":"a-bad3","message":{"id":"msg_bad3","model":"m","content":[{"type":"text","text":"three"}],"usage":{"input_tokens":1e300}}}`,
	`{"type":"assistant","uuid":"a-bad4","message":{"id":"msg_bad4","model":"m","content":[{"type":"text","text":"four"}],"usage":{"input_tokens":2000000000}}}`,
	`{"type":"assistant","uuid":"a-bad5","message":{"id":7,"model":"m","content":[{"type":"text","text":"five"}],"usage":{"input_tokens":5}}}`,
	`{"type":"assistant","uuid":"a-bad6","message":{"model":"m","content":[{"type":"text","text":"six"}],"usage":{"input_tokens":5}}}`,
	`{"type":"assistant","uuid":"a-bad7","message":{"id":"msg_bad7","model":"m","content":[{"type":"text","text":"seven"}],"usage":{"input_tokens":"5"}}}`,
	`{"type":"assistant","uuid":"a-bad8","message":{"id":"msg_bad8","model":"<synthetic>","content":[{"type":"text","text":"eight"}],"usage":{"input_tokens":5}}}`,
	`{"type":"assistant","uuid":"a-bad9","isSidechain":true,"message":{"id":"msg_bad9","model":"m","content":[{"type":"text","text":"nine"}],"usage":{"input_tokens":5}}}`,
}

// turnUsages returns the usage and session_usage of every turn_complete
// logged after seq, as "in out cache_read cache_creation" and
// "turns in out cache_read cache_creation".
func (f *transcriptFixture) turnUsages(after int64) (turns, totals []string) {
	f.t.Helper()
	f.events(after) // committed
	evs, err := f.st.EventsAfter(context.Background(), after, 1000)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, e := range evs {
		if e.Type != wire.TypeTurnComplete {
			continue
		}
		var env wire.Envelope
		json.Unmarshal(e.Frame, &env)
		var tc wire.TurnComplete
		json.Unmarshal(env.Payload, &tc)
		var u wire.UsageTotals
		json.Unmarshal(tc.Usage, &u)
		turns = append(turns, fmt.Sprint(u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens))
		if s := tc.SessionUsage; s != nil {
			totals = append(totals, fmt.Sprint(s.Turns, s.InputTokens, s.OutputTokens, s.CacheReadInputTokens, s.CacheCreationInputTokens, s.CostUSD))
		}
	}
	return turns, totals
}

// TestTranscriptUsage: a terminal session's turn reports what its API
// messages used, each message once although Claude Code writes a line per
// content block (Claude Code 2.1.197's lines: two messages, the first of
// two lines); the session's totals add up across turns, a restart of the
// daemon and a transcript read again from its start; malformed usage is
// not counted and costs nothing else of its line; a message whose later
// line reports more counts the difference.
func TestTranscriptUsage(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	m := f.manager()
	stop := func(m *Manager) {
		t.Helper()
		ev := hooks.Event{SessionID: "cc-1", Name: hooks.EventStop, Cwd: "/home/dev/project", TranscriptPath: f.path, Raw: json.RawMessage(`{}`)}
		if err := m.Observe(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	f.write(len(f.lines), "")
	stop(m)
	turns, totals := f.turnUsages(0)
	if fmt.Sprint(turns) != "[38262 24 0 0]" || fmt.Sprint(totals) != "[1 38262 24 0 0 0]" {
		t.Fatalf("first turn: usage %q, session %q", turns, totals)
	}
	last, _ := f.st.LastSeq(context.Background())

	// Malformed usage, then a message in two lines, the second reporting
	// more output (as a line written mid-stream would), with cache
	// figures.
	for _, l := range badUsage {
		f.lines = append(f.lines, []byte(l+"\n"))
	}
	f.lines = append(f.lines,
		[]byte(`{"type":"assistant","uuid":"a-ok1","message":{"id":"msg_ok","model":"m","content":[{"type":"thinking","thinking":"hm"}],"usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":3000,"cache_creation_input_tokens":400}}}`+"\n"),
		[]byte(`{"type":"assistant","uuid":"a-ok2","message":{"id":"msg_ok","model":"m","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":10,"output_tokens":9,"cache_read_input_tokens":3000,"cache_creation_input_tokens":400}}}`+"\n"))
	f.write(len(f.lines), "")
	stop(m)
	var texts []string
	for _, e := range f.events(last) {
		if strings.HasPrefix(e, "stream_chunk") {
			texts = append(texts, strings.TrimPrefix(e, "stream_chunk "))
		}
	}
	if fmt.Sprint(texts) != "[one two three four five six seven eight done]" {
		t.Fatalf("the lines with malformed usage: %q", texts)
	}
	turns, totals = f.turnUsages(last)
	if fmt.Sprint(turns) != "[10 9 3000 400]" || fmt.Sprint(totals) != "[2 38272 33 3000 400 0]" {
		t.Fatalf("second turn: usage %q, session %q", turns, totals)
	}
	last, _ = f.st.LastSeq(context.Background())

	// The file replaced by a copy (read again from its start), and a
	// daemon restart: nothing counted twice.
	before, _, _ := f.st.TranscriptMark(context.Background(), "cc-1")
	tmp := f.path + ".new"
	if err := os.WriteFile(tmp, bytes.Join(f.lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		t.Fatal(err)
	}
	stop(m)
	if mark, _, _ := f.st.TranscriptMark(context.Background(), "cc-1"); mark.FileID == before.FileID || mark.Offset != int64(len(bytes.Join(f.lines, nil))) {
		t.Fatalf("the copy was not read: %+v", mark)
	}
	m.Shutdown(context.Background())
	stop(f.manager())
	turns, totals = f.turnUsages(last)
	if fmt.Sprint(turns) != "[0 0 0 0 0 0 0 0]" || fmt.Sprint(totals) != "[3 38272 33 3000 400 0 4 38272 33 3000 400 0]" {
		t.Fatalf("after a rewrite and a restart: usage %q, session %q", turns, totals)
	}
	rec, err := f.st.Session(context.Background(), "cc-1")
	if err != nil || fmt.Sprint(rec.Usage) != "{4 38272 33 3000 400 0}" {
		t.Fatalf("stored usage %+v %v", rec.Usage, err)
	}
}

// TestStartRefusesAnAgentSessionIDThatReadsAsAnOption: the id a session
// resumes becomes an argument of the agent's command line.
func TestStartRefusesAnAgentSessionIDThatReadsAsAnOption(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	m := f.manager()
	m.cfg.Agents = []string{"claude-code"}
	for _, id := range []string{"--dangerously-skip-permissions", "-p", "a b", strings.Repeat("a", 65)} {
		_, err := m.Start(context.Background(), StartRequest{SessionStart: wire.SessionStart{Agent: "claude-code", WorkingDirectory: f.home}, AgentSessionID: id})
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeInvalidMessage {
			t.Errorf("%q: %v", id, err)
		}
	}
}

// TestTranscriptLineLongerThanARead: a line longer than one read (an
// agent's sparse or endless transcript) is skipped read by read, each
// going on where the last stopped, never again from the line's start; the
// lines after it are relayed.
func TestTranscriptLineLongerThanARead(t *testing.T) {
	t.Parallel()
	f := newTranscriptFixture(t)
	m := f.manager()
	f.write(2, "")
	f.observe(m, hooks.EventStop, f.path)
	before := len(f.events(0))
	start, err := os.Stat(f.path)
	if err != nil {
		t.Fatal(err)
	}
	// 20 MiB of a line without its end, as a hole: three reads of at most
	// maxTranscriptRead.
	if err := os.Truncate(f.path, start.Size()+20<<20); err != nil {
		t.Fatal(err)
	}
	follow := func() int64 {
		t.Helper()
		if !m.followTranscript(context.Background(), "cc-1", f.path) {
			t.Fatal("the transcript is no longer followed")
		}
		m.transcripts.mu.Lock()
		defer m.transcripts.mu.Unlock()
		fl := m.transcripts.session("cc-1")
		if fl.mark.Offset != start.Size() {
			t.Fatalf("the mark moved into the long line: %d, want %d", fl.mark.Offset, start.Size())
		}
		return fl.skipTo
	}
	// The session's watcher reads too: the reads only go forward, and
	// three reach the end of what is written.
	last := int64(0)
	for i := range 3 {
		got := follow() - start.Size()
		if i == 0 {
			// As a mark stored by a daemon from before file ids.
			m.transcripts.mu.Lock()
			m.transcripts.session("cc-1").mark.FileID = ""
			m.transcripts.mu.Unlock()
		}
		if got < last || got <= 0 || got > 20<<20 {
			t.Fatalf("read %d reached %d bytes into the long line, after %d", i+1, got, last)
		}
		last = got
	}
	if last != 20<<20 {
		t.Fatalf("three reads reached %d bytes into the long line, want all 20 MiB", last)
	}
	// The line ends; what follows is relayed.
	tail, err := os.OpenFile(f.path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tail.Write(append([]byte("\n"), bytes.Join(f.lines[2:], nil)...)); err != nil {
		t.Fatal(err)
	}
	tail.Close()
	f.observe(m, hooks.EventStop, f.path)
	if got := f.events(0); len(got) <= before {
		t.Fatalf("nothing after the long line was relayed: %q", got)
	}
}
