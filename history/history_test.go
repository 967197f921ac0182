package history

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// fixture is a home directory with a ~/.claude and a ~/.codex.
type fixture struct {
	t     *testing.T
	home  string
	index *Index
}

func newFixture(t *testing.T, st *store.Store) *fixture {
	t.Helper()
	home := t.TempDir()
	f := &fixture{t: t, home: home}
	f.index = New(Config{ClaudeDirs: []string{filepath.Join(home, ".claude")}, CodexDirs: []string{filepath.Join(home, ".codex")}, Store: st})
	return f
}

// transcript writes a Claude Code transcript of the project dir, with the
// lines of a recorded one (session's testdata), and returns its path.
func (f *fixture) transcript(project, id string, lines []byte) string {
	f.t.Helper()
	dir := filepath.Join(f.home, ".claude", "projects", session.ClaudeProjectDir(project))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		f.t.Fatal(err)
	}
	path := filepath.Join(dir, id+".jsonl")
	if err := os.WriteFile(path, lines, 0o600); err != nil {
		f.t.Fatal(err)
	}
	return path
}

func recorded(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "session", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) scan() {
	f.t.Helper()
	if err := f.index.Scan(context.Background()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) list(q Query) Page {
	f.t.Helper()
	p, err := f.index.List(context.Background(), q)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// types are the event types of frames, with a user message's or a text's
// content and a tool's name.
func types(t testing.TB, frames []json.RawMessage) []string {
	t.Helper()
	var out []string
	for _, fr := range frames {
		var env wire.Envelope
		if err := json.Unmarshal(fr, &env); err != nil {
			t.Fatalf("frame %s: %v", fr, err)
		}
		var p struct {
			Content string `json:"content"`
			Tool    string `json:"tool"`
		}
		json.Unmarshal(env.Payload, &p)
		s := env.Type
		if p.Content != "" && env.Type != wire.TypeToolResult {
			s += " " + p.Content
		}
		if p.Tool != "" {
			s += " " + p.Tool
		}
		out = append(out, s)
	}
	return out
}

// TestClaudeTranscripts: recorded transcripts of Claude Code are listed
// with their project, first prompt and size, and read back as a live
// session's events, paged from the newest.
func TestClaudeTranscripts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.transcript("/home/dev/project", "23434b01-f2f1-4c1b-b368-af8a87ce1400", recorded(t, "transcript.jsonl"))
	f.transcript("/home/dev/project", "413a5873-b5df-425b-a567-11a1a998c687", recorded(t, "transcript-terminal.jsonl"))
	f.transcript("/home/dev/other", "ab64f275-64b1-4587-a402-997ce1101089", recorded(t, "transcript-thinking.jsonl"))
	f.scan()
	p := f.list(Query{})
	if len(p.Sessions) != 3 || p.Next != "" {
		t.Fatalf("sessions = %+v", p)
	}
	byID := map[string]Session{}
	for _, s := range p.Sessions {
		byID[s.ID] = s
	}
	s := byID["claude:23434b01-f2f1-4c1b-b368-af8a87ce1400"]
	if s.Project != "/home/dev/project" || s.Title != "please write f.txt" || s.Agent != "claude-code" || s.Source != SourceClaude || s.Messages == 0 ||
		s.AgentSessionID != "23434b01-f2f1-4c1b-b368-af8a87ce1400" || s.Live || s.LastActivity.Before(s.StartedAt) || s.StartedAt.Year() != 2026 {
		t.Fatalf("session = %+v", s)
	}

	// Read whole, then a page at a time: the pages make the whole.
	whole, err := f.index.Read(context.Background(), s.ID, 0, 1000)
	if err != nil || whole.More {
		t.Fatalf("read: %+v, %v", whole, err)
	}
	got := types(t, whole.Frames)
	want := []string{"user_message please write f.txt", "stream_start", "stream_chunk I'll write the file.", "stream_end", "agent_info", "tool_call Bash",
		"tool_result Bash", "stream_start", "stream_chunk Finished.", "stream_end"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read:\n got %q\nwant %q", got, want)
	}
	var paged []json.RawMessage
	before := int64(0)
	for range 20 {
		c, err := f.index.Read(context.Background(), s.ID, before, 3)
		if err != nil {
			t.Fatal(err)
		}
		paged = append(c.Frames, paged...)
		if !c.More {
			break
		}
		before = c.Before
	}
	if fmt.Sprint(types(t, paged)) != fmt.Sprint(got) {
		t.Fatalf("paged:\n got %q\nwant %q", types(t, paged), got)
	}

	// Projects (the working directory the lines name, not the directory
	// the file is in), a project's sessions, search.
	projects, err := f.index.Projects(context.Background())
	if err != nil || len(projects) != 1 || projects[0].Sessions != 3 || projects[0].Path != "/home/dev/project" {
		t.Fatalf("projects = %+v, %v", projects, err)
	}
	if p := f.list(Query{Project: "/home/dev/other"}); len(p.Sessions) != 0 {
		t.Fatalf("other project = %+v", p)
	}
	if p := f.list(Query{Project: "/home/dev/project", Text: "say hello"}); len(p.Sessions) != 1 || p.Sessions[0].Title != "say hello" {
		t.Fatalf("search in a project = %+v", p)
	}
	if p := f.list(Query{Text: "WRITE F.TXT"}); len(p.Sessions) != 1 || p.Sessions[0].ID != s.ID {
		t.Fatalf("search = %+v", p)
	}
	if p := f.list(Query{Text: "no such words"}); len(p.Sessions) != 0 {
		t.Fatalf("search = %+v", p)
	}
	if _, err := f.index.Read(context.Background(), "claude:nope", 0, 10); err == nil {
		t.Fatal("an unknown session was read")
	}
}

// TestPaging: pages of the list follow one another without a gap or a
// repeat, also for sessions of equal activity.
func TestPaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	line := `{"type":"user","message":{"role":"user","content":"prompt %d"},"uuid":"u%d","timestamp":"2026-01-0%dT00:00:00Z","cwd":"/p","sessionId":"s"}` + "\n"
	for i := range 7 {
		f.transcript("/p", fmt.Sprintf("s%d", i), fmt.Appendf(nil, line, i, i, 1+i%3))
	}
	f.scan()
	var seen []string
	cur := ""
	for range 10 {
		p := f.list(Query{Limit: 2, Cursor: cur})
		for _, s := range p.Sessions {
			seen = append(seen, s.ID)
		}
		if p.Next == "" {
			break
		}
		cur = p.Next
	}
	all := f.list(Query{})
	var want []string
	for _, s := range all.Sessions {
		want = append(want, s.ID)
	}
	if len(seen) != 7 || fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("paged %v, whole %v", seen, want)
	}
	if _, err := f.index.List(context.Background(), Query{Cursor: "garbage"}); err == nil {
		t.Fatal("a bad cursor was taken")
	}
}

// TestLinesOutOfOrder: a transcript whose answer was appended before its
// prompt reads in the order of the lines' times.
func TestLinesOutOfOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	answer := `{"type":"assistant","message":{"id":"m1","role":"assistant","model":"claude","content":[{"type":"text","text":"Hello, terminal."}]},"uuid":"a1","parentUuid":"u1","timestamp":"2026-11-27T10:00:02Z","cwd":"/p","sessionId":"s"}` + "\n"
	prompt := `{"type":"user","message":{"role":"user","content":"hello from the terminal"},"uuid":"u1","timestamp":"2026-11-27T10:00:01Z","cwd":"/p","sessionId":"s"}` + "\n"
	f.transcript("/p", "s", []byte(answer+prompt))
	f.scan()
	c, err := f.index.Read(context.Background(), "claude:s", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	got := types(t, c.Frames)
	if len(got) < 2 || got[0] != "user_message hello from the terminal" || !slices.Contains(got, "stream_chunk Hello, terminal.") {
		t.Fatalf("read %q", got)
	}
}

// TestUntrustedFiles: malformed and huge lines are skipped, a line being
// written waits for its end, and nothing is read through a symbolic link:
// neither a transcript nor a project directory that leads out.
func TestUntrustedFiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	huge := `{"type":"user","message":{"role":"user","content":"` + strings.Repeat("x", MaxLine) + `"},"uuid":"h","cwd":"/p"}`
	lines := "not json\n{\"broken\":\n" + huge + "\n" +
		`{"type":"user","message":{"role":"user","content":"the real prompt"},"uuid":"u1","timestamp":"2026-01-01T00:00:00Z","cwd":"/p"}` + "\n" +
		`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"half`
	path := f.transcript("/p", "s1", []byte(lines))
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.jsonl")
	os.WriteFile(secret, recorded(t, "transcript.jsonl"), 0o600)
	os.Symlink(secret, filepath.Join(filepath.Dir(path), "link.jsonl"))
	os.Symlink(outside, filepath.Join(f.home, ".claude", "projects", "-linked"))
	f.scan()
	p := f.list(Query{})
	if len(p.Sessions) != 1 || p.Sessions[0].Title != "the real prompt" || p.Sessions[0].Messages != 1 {
		t.Fatalf("sessions = %+v", p.Sessions)
	}
	c, err := f.index.Read(context.Background(), "claude:s1", 0, 100)
	if err != nil || fmt.Sprint(types(t, c.Frames)) != "[user_message the real prompt]" {
		t.Fatalf("read %q, %v", types(t, c.Frames), err)
	}
	// The line's end arrives: it is read on from where the scan stopped.
	fh, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString(`"}]},"uuid":"a1","timestamp":"2026-01-02T00:00:00Z","cwd":"/p"}` + "\n")
	fh.Close()
	f.scan()
	p = f.list(Query{})
	if len(p.Sessions) != 1 || p.Sessions[0].Messages != 2 || p.Sessions[0].LastActivity.Day() != 2 {
		t.Fatalf("after the append: %+v", p.Sessions)
	}
	// Replaced by a shorter file: read again from its start.
	os.Remove(path)
	os.WriteFile(path, []byte(`{"type":"user","message":{"role":"user","content":"another"},"uuid":"u9","cwd":"/q"}`+"\n"), 0o600)
	f.scan()
	if p := f.list(Query{}); len(p.Sessions) != 1 || p.Sessions[0].Title != "another" || p.Sessions[0].Project != "/q" || p.Sessions[0].Messages != 1 {
		t.Fatalf("after the replacement: %+v", p.Sessions)
	}
	os.Remove(path)
	f.scan()
	if p := f.list(Query{}); len(p.Sessions) != 0 {
		t.Fatalf("after the removal: %+v", p.Sessions)
	}
	// A named pipe where a transcript would be (an agent can make one in
	// its project's directory) is skipped, not waited on for ever.
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f.index.refresh(path)
	if p := f.list(Query{}); len(p.Sessions) != 0 {
		t.Fatalf("a named pipe was indexed: %+v", p.Sessions)
	}
}

// TestCodexRollout: a rollout the Codex CLI wrote (0.169.0, against the mock
// Responses API) is listed with its project and prompt and read back.
func TestCodexRollout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	raw, err := os.ReadFile("testdata/rollout.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(f.home, ".codex", "sessions", "2026", "11", "27")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "rollout-2026-11-27T13-45-34-01a21d41-14f4-7540-b870-59ce911418a7.jsonl"), raw, 0o600)
	f.scan()
	p := f.list(Query{})
	if len(p.Sessions) != 1 {
		t.Fatalf("sessions = %+v", p.Sessions)
	}
	s := p.Sessions[0]
	if s.ID != "codex:01a21d41-14f4-7540-b870-59ce911418a7" || s.Agent != "codex" || s.Title != "say hello to codex" ||
		s.Project != "/tmp/TestCodexRolloutObserve2525563204/002" || s.Messages != 5 {
		t.Fatalf("session = %+v", s)
	}
	c, err := f.index.Read(context.Background(), s.ID, 0, 100)
	want := "[user_message say hello to codex stream_start stream_chunk I will list. stream_end tool_call exec_command tool_result exec_command stream_start stream_chunk Listed. stream_end]"
	if err != nil || fmt.Sprint(types(t, c.Frames)) != want {
		t.Fatalf("read %q, %v", types(t, c.Frames), err)
	}
}

// TestTetherSessions: tether's own sessions are listed from the store, with
// the first prompt the log holds; one whose agent conversation has a
// transcript is that transcript's entry, live while it runs.
func TestTetherSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "tether.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now()
	for _, s := range []store.Session{
		{ID: "demo-1", Agent: "demo", Source: "sandbox", WorkingDirectory: "/w", Title: "w", Status: store.StatusClosed, CreatedAt: now, UpdatedAt: now},
		{ID: "cc-1", Agent: "claude-code", Source: "sandbox", WorkingDirectory: "/home/dev/project", Title: "project", Status: store.StatusIdle,
			AgentSessionID: "23434b01-f2f1-4c1b-b368-af8a87ce1400", CreatedAt: now, UpdatedAt: now},
	} {
		if err := st.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	seq := int64(0)
	frame := func(typ string, p any) store.Event {
		seq++
		b, _ := json.Marshal(p)
		fr, _ := json.Marshal(wire.Envelope{Type: typ, Seq: seq, Payload: b})
		return store.Event{Seq: seq, SessionID: "demo-1", Type: typ, Frame: fr, CreatedAt: now}
	}
	if err := st.AppendEvents(ctx, []store.Event{
		frame(wire.TypeUserMessage, wire.UserMessage{SessionID: "demo-1", Content: "hello demo"}),
		frame(wire.TypeStreamStart, wire.StreamStart{SessionID: "demo-1"}),
		frame(wire.TypeUserMessage, wire.UserMessage{SessionID: "demo-1", Content: "second"}),
	}, nil); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, st)
	f.transcript("/home/dev/project", "23434b01-f2f1-4c1b-b368-af8a87ce1400", recorded(t, "transcript.jsonl"))
	f.scan()
	p := f.list(Query{})
	if len(p.Sessions) != 2 {
		t.Fatalf("sessions = %+v", p.Sessions)
	}
	for _, s := range p.Sessions {
		switch s.ID {
		case "tether:demo-1":
			if s.Title != "hello demo" || s.Messages != 3 || s.Live || s.SessionID != "demo-1" || s.Agent != "demo" {
				t.Errorf("demo session = %+v", s)
			}
			c, err := f.index.Read(ctx, s.ID, 0, 2)
			if err != nil || len(c.Frames) != 2 || !c.More || !bytes.Contains(c.Frames[1], []byte("second")) {
				t.Errorf("read = %+v, %v", c, err)
			}
		case "claude:23434b01-f2f1-4c1b-b368-af8a87ce1400":
			if !s.Live || s.SessionID != "cc-1" {
				t.Errorf("claude session = %+v", s)
			}
		default:
			t.Errorf("unexpected %+v", s)
		}
	}
	if p := f.list(Query{Text: "hello demo"}); len(p.Sessions) != 1 {
		t.Fatalf("search = %+v", p.Sessions)
	}
}

// TestWatch: once running, the index picks up new transcripts, lines
// appended to one, new project directories, and files removed.
func TestWatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.index.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-f.index.Ready()
	await := func(what string, ok func(Page) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(f.list(Query{})) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: never; sessions %+v", what, f.list(Query{}).Sessions)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// ~/.claude/projects does not exist at the start.
	path := f.transcript("/home/dev/project", "s1", recorded(t, "transcript.jsonl")[:0])
	fh, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	for line := range bytes.Lines(recorded(t, "transcript.jsonl")) {
		fh.Write(line)
	}
	fh.Close()
	await("the first transcript", func(p Page) bool { return len(p.Sessions) == 1 && p.Sessions[0].Title == "please write f.txt" })
	before := f.list(Query{}).Sessions[0].Messages
	fh, _ = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString(`{"type":"user","message":{"role":"user","content":"more"},"uuid":"m1","timestamp":"2027-01-01T00:00:00Z","cwd":"/home/dev/project"}` + "\n")
	fh.Close()
	await("the appended line", func(p Page) bool { return len(p.Sessions) == 1 && p.Sessions[0].Messages == before+1 })
	f.transcript("/home/dev/other", "s2", recorded(t, "transcript-thinking.jsonl"))
	await("a new project", func(p Page) bool { return len(p.Sessions) == 2 })
	os.Remove(path)
	await("the removal", func(p Page) bool { return len(p.Sessions) == 1 && p.Sessions[0].ID == "claude:s2" })
}

// FuzzSessionFile: any file content is summarised and read as pages of
// valid frames, as a Claude Code transcript and as a Codex rollout,
// without panicking; the pages of a read end where they say.
func FuzzSessionFile(f *testing.F) {
	for _, name := range []string{"transcript.jsonl", "transcript-errors.jsonl", "transcript-terminal.jsonl", "transcript-image.jsonl", "transcript-thinking.jsonl"} {
		f.Add(recorded(f, name))
	}
	rollout, err := os.ReadFile("testdata/rollout.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(rollout)
	f.Add([]byte("{\"type\":\"user\"\n\n\x00{}\n{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"tool_use\"}]}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, source := range []string{SourceClaude, SourceCodex} {
			var s summary
			scan := scanClaude
			pager := claudePage
			if source == SourceCodex {
				scan = func(_ string, r io.Reader, from int64, s *summary) (int64, error) { return scanCodex(r, from, s) }
				pager = codexPage
			}
			end, err := scan("x", bytes.NewReader(data), 0, &s)
			if err != nil || end < 0 || end > int64(len(data)) || end > 0 && data[end-1] != '\n' {
				t.Fatalf("%s: end %d of %d, %v", source, end, len(data), err)
			}
			if len(s.prompts) > maxPrompts || len(s.title) > maxTitle {
				t.Fatalf("%s: bounds broken: %d, %d", source, len(s.prompts), len(s.title))
			}
			before := int64(0)
			for range len(data) + 2 {
				frames, from, more, err := pager("x", bytes.NewReader(data), int64(len(data)), before, 2, time.Time{})
				if err != nil {
					t.Fatal(err)
				}
				for _, fr := range frames {
					if !json.Valid(fr) {
						t.Fatalf("%s: invalid frame %s", source, fr)
					}
				}
				if !more {
					break
				}
				if before != 0 && from >= before {
					t.Fatalf("%s: page before %d starts at %d", source, before, from)
				}
				before = from
			}
		}
	})
}

// TestFileWrittenWhileRead: a transcript being appended to while it is
// scanned and read is only ever seen as whole lines, and its count only
// grows.
func TestFileWrittenWhileRead(t *testing.T) {
	t.Parallel()
	const lines = 2000
	f := newFixture(t, nil)
	path := f.transcript("/p", "s1", nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer fh.Close()
		for n := range lines {
			// Each line in two writes: a reader may find half of one.
			line := fmt.Sprintf(`{"type":"user","message":{"role":"user","content":"prompt %d"},"uuid":"u%d","cwd":"/p"}`, n, n)
			fh.WriteString(line[:len(line)/2])
			fh.WriteString(line[len(line)/2:] + "\n")
		}
	}()
	last := 0
	for writing := true; writing; {
		select {
		case <-done:
			writing = false
		default:
		}
		f.scan()
		p := f.list(Query{})
		if len(p.Sessions) > 1 || len(p.Sessions) == 1 && p.Sessions[0].Messages < last {
			t.Fatalf("sessions %+v after %d messages", p.Sessions, last)
		}
		if len(p.Sessions) == 0 {
			continue
		}
		last = p.Sessions[0].Messages
		c, err := f.index.Read(context.Background(), "claude:s1", 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, fr := range c.Frames {
			if !json.Valid(fr) || !bytes.Contains(fr, []byte(`"content":"prompt `)) {
				t.Fatalf("frame %s", fr)
			}
		}
	}
	if last != lines {
		t.Fatalf("%d messages after %d written", last, lines)
	}
}

// TestOneConversationOneEntry: a file named after another conversation's
// id (an agent can write one into its own project's directory) does not
// stand in for it: the list has one entry, the real one, and reading it
// reads the real file, every time; only that one resumes.
func TestOneConversationOneEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const id = "23434b01-f2f1-4c1b-b368-af8a87ce1400"
	prompt := func(text, cwd string) []byte {
		return []byte(`{"type":"user","message":{"role":"user","content":"` + text + `"},"uuid":"u1","timestamp":"2026-01-01T00:00:00Z","cwd":"` + cwd + `"}` + "\n")
	}
	f.transcript("/home/dev/real", id, prompt("the real prompt", "/home/dev/real"))
	f.transcript("/home/dev/agent", id, prompt("a forged prompt", "/home/dev/real"))
	f.scan()
	p := f.list(Query{})
	if len(p.Sessions) != 1 || p.Sessions[0].Title != "the real prompt" || !p.Sessions[0].Resumable {
		t.Fatalf("sessions = %+v", p.Sessions)
	}
	for range 5 {
		c, err := f.index.Read(context.Background(), "claude:"+id, 0, 10)
		if err != nil || fmt.Sprint(types(t, c.Frames)) != "[user_message the real prompt]" {
			t.Fatalf("read %q, %v", types(t, c.Frames), err)
		}
	}
}
