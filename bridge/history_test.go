package bridge

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/history"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/wire"
)

// historyHarness is a server whose history holds the recorded transcripts
// of session's tests, under a home of its own, and a Codex rollout.
func historyHarness(t *testing.T) *harness {
	t.Helper()
	home := t.TempDir()
	project := filepath.Join(home, ".claude", "projects", "-home-dev-project")
	rollouts := filepath.Join(home, ".codex", "sessions", "2026", "11", "27")
	for _, dir := range []string{project, rollouts} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, filepath.Join("..", "session", "testdata", "transcript.jsonl"), filepath.Join(project, "23434b01-f2f1-4c1b-b368-af8a87ce1400.jsonl"))
	copyFile(t, filepath.Join("..", "session", "testdata", "transcript-terminal.jsonl"), filepath.Join(project, "413a5873-b5df-425b-a567-11a1a998c687.jsonl"))
	// A name chosen to read as an option of claude's command line.
	copyFile(t, filepath.Join("..", "session", "testdata", "transcript-thinking.jsonl"), filepath.Join(project, "--dangerously-skip-permissions.jsonl"))
	copyFile(t, filepath.Join("..", "history", "testdata", "rollout.jsonl"), filepath.Join(rollouts, "rollout-2026-11-27T13-45-34-01a21d41-14f4-7540-b870-59ce911418a7.jsonl"))
	h := newHarness(t, func(s *Server) {
		s.History = history.New(history.Config{ClaudeDirs: []string{filepath.Join(home, ".claude")}, CodexDirs: []string{filepath.Join(home, ".codex")}, Store: s.Store})
	})
	if err := h.srv.History.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return h
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHistoryMessages: a phone lists the projects and sessions of the
// history, pages and searches them, and reads one as a live session's
// events, a page at a time from the newest.
func TestHistoryMessages(t *testing.T) {
	t.Parallel()
	h := historyHarness(t)
	_, c, _ := h.paired()

	c.Send(wire.TypeHistoryProjects, "p", nil)
	var projects struct {
		Projects []wire.HistoryProject `json:"projects"`
		Indexing bool                  `json:"indexing"`
	}
	c.Expect(wire.TypeHistoryProjectsResponse, &projects)
	if len(projects.Projects) != 2 || projects.Indexing {
		t.Fatalf("projects = %+v", projects)
	}

	c.Send(wire.TypeHistoryList, "l1", map[string]any{"project": "/home/dev/project", "limit": 2})
	var page wire.HistoryListResponse
	if env := c.Expect(wire.TypeHistoryListResponse, &page); env.ID != "l1" || len(page.Sessions) != 2 || page.NextCursor == "" {
		t.Fatalf("first page = %+v", page)
	}
	first := page.Sessions
	c.Send(wire.TypeHistoryList, "l2", map[string]any{"project": "/home/dev/project", "limit": 2, "cursor": page.NextCursor})
	page = wire.HistoryListResponse{}
	c.Expect(wire.TypeHistoryListResponse, &page)
	if len(page.Sessions) != 1 || page.NextCursor != "" || page.Sessions[0].HistoryID == first[0].HistoryID || page.Sessions[0].HistoryID == first[1].HistoryID {
		t.Fatalf("second page = %+v", page)
	}
	for _, s := range append(first, page.Sessions...) {
		if s.Resumable != (s.AgentSessionID != "--dangerously-skip-permissions") {
			t.Errorf("resumable: %+v", s)
		}
	}

	c.Send(wire.TypeHistoryList, "s", map[string]any{"query": "write f.txt"})
	page = wire.HistoryListResponse{}
	c.Expect(wire.TypeHistoryListResponse, &page)
	if len(page.Sessions) != 1 {
		t.Fatalf("search = %+v", page)
	}
	s := page.Sessions[0]
	if s.HistoryID != "claude:23434b01-f2f1-4c1b-b368-af8a87ce1400" || s.Title != "please write f.txt" || s.Project != "/home/dev/project" ||
		s.Agent != "claude-code" || !s.Resumable || s.Live || s.LastActivity == "" || s.Messages == 0 {
		t.Fatalf("session = %+v", s)
	}

	var events []json.RawMessage
	before := int64(0)
	for i := 0; ; i++ {
		p := map[string]any{"history_id": s.HistoryID, "limit": 4}
		if before != 0 {
			p["before"] = before
		}
		c.Send(wire.TypeHistoryRead, "r", p)
		var r wire.HistoryReadResponse
		c.Expect(wire.TypeHistoryReadResponse, &r)
		events = append(r.Events, events...)
		if !r.HasMore {
			break
		}
		if i > 10 || r.Before == 0 {
			t.Fatalf("read page %d = %+v", i, r)
		}
		before = r.Before
	}
	var kinds []string
	for _, e := range events {
		var env wire.Envelope
		json.Unmarshal(e, &env)
		kinds = append(kinds, env.Type)
	}
	if len(kinds) != 10 || kinds[0] != wire.TypeUserMessage || kinds[len(kinds)-1] != wire.TypeStreamEnd {
		t.Fatalf("read %v", kinds)
	}
}

// TestHistoryMalformed: every history request that is malformed, or names
// what is not there, is answered with an error and a protocol code; the
// connection goes on.
func TestHistoryMalformed(t *testing.T) {
	t.Parallel()
	h := historyHarness(t)
	_, c, _ := h.paired()
	long := make([]byte, wire.MaxHistoryQuery+1)
	for i := range long {
		long[i] = 'x'
	}
	for _, tt := range []struct {
		name, frame, code string
	}{
		{"projects payload not an object", `{"type":"history_projects","id":"x","payload":[1]}`, wire.CodeInvalidMessage},
		{"list limit a string", `{"type":"history_list","id":"x","payload":{"limit":"ten"}}`, wire.CodeInvalidMessage},
		{"list limit too big", `{"type":"history_list","id":"x","payload":{"limit":100000}}`, wire.CodeInvalidMessage},
		{"list limit negative", `{"type":"history_list","id":"x","payload":{"limit":-1}}`, wire.CodeInvalidMessage},
		{"list bad cursor", `{"type":"history_list","id":"x","payload":{"cursor":"nonsense"}}`, wire.CodeInvalidMessage},
		{"list query too long", `{"type":"history_list","id":"x","payload":{"query":"` + string(long) + `"}}`, wire.CodeInvalidMessage},
		{"read without id", `{"type":"history_read","id":"x","payload":{}}`, wire.CodeInvalidMessage},
		{"read unknown", `{"type":"history_read","id":"x","payload":{"history_id":"claude:nope"}}`, wire.CodeSessionNotFound},
		{"read unknown tether", `{"type":"history_read","id":"x","payload":{"history_id":"tether:nope"}}`, wire.CodeSessionNotFound},
		{"read path as id", `{"type":"history_read","id":"x","payload":{"history_id":"claude:../../etc/passwd"}}`, wire.CodeSessionNotFound},
		{"read negative before", `{"type":"history_read","id":"x","payload":{"history_id":"claude:23434b01-f2f1-4c1b-b368-af8a87ce1400","before":-5}}`, wire.CodeInvalidMessage},
		{"read limit too big", `{"type":"history_read","id":"x","payload":{"history_id":"claude:23434b01-f2f1-4c1b-b368-af8a87ce1400","limit":5000}}`, wire.CodeInvalidMessage},
		{"resume without id", `{"type":"history_resume","id":"x","payload":{}}`, wire.CodeInvalidMessage},
		{"resume unknown", `{"type":"history_resume","id":"x","payload":{"history_id":"claude:nope"}}`, wire.CodeSessionNotFound},
		{"resume codex", `{"type":"history_resume","id":"x","payload":{"history_id":"codex:01a21d41-14f4-7540-b870-59ce911418a7"}}`, wire.CodeAgentError},
		// This daemon runs only the demo agent.
		{"resume without claude-code", `{"type":"history_resume","id":"x","payload":{"history_id":"claude:23434b01-f2f1-4c1b-b368-af8a87ce1400"}}`, wire.CodeAgentError},
		{"resume an id that reads as an option", `{"type":"history_resume","id":"x","payload":{"history_id":"claude:--dangerously-skip-permissions"}}`, wire.CodeInvalidMessage},
		{"resume bad policy", `{"type":"history_resume","id":"x","payload":{"history_id":"claude:23434b01-f2f1-4c1b-b368-af8a87ce1400","policy":7}}`, wire.CodeInvalidMessage},
	} {
		c.SendRaw(tt.frame)
		var ep wire.ErrorPayload
		env := c.Expect(wire.TypeError, &ep)
		if ep.Code != tt.code || !ep.Recoverable || ep.Message == "" || env.ID != "x" {
			t.Errorf("%s: got id=%q %+v, want %s", tt.name, env.ID, ep, tt.code)
		}
		c.Send(wire.TypeHeartbeatPing, "alive", nil)
		if env := c.Expect(wire.TypeHeartbeatPong, nil); env.ID != "alive" {
			t.Fatalf("%s: pong id %q", tt.name, env.ID)
		}
	}
}

// TestHistoryWithoutIndex: a daemon without a history says so.
func TestHistoryWithoutIndex(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, c, _ := h.paired()
	c.Send(wire.TypeHistoryList, "x", nil)
	var ep wire.ErrorPayload
	if c.Expect(wire.TypeError, &ep); ep.Code != wire.CodeBridgeError {
		t.Fatalf("error = %+v", ep)
	}
}

// TestHistoryResumeKeepsToTheRoots: a conversation whose working directory
// lies outside the daemon's roots does not resume there.
func TestHistoryResumeKeepsToTheRoots(t *testing.T) {
	t.Parallel()
	home, outside := t.TempDir(), t.TempDir()
	dir := filepath.Join(home, ".claude", "projects", session.ClaudeProjectDir(outside))
	os.MkdirAll(dir, 0o700)
	line := `{"type":"user","message":{"role":"user","content":"hello"},"uuid":"u1","timestamp":"2026-01-01T00:00:00Z","cwd":"` + outside + `"}` + "\n"
	os.WriteFile(filepath.Join(dir, "23434b01-f2f1-4c1b-b368-af8a87ce1400.jsonl"), []byte(line), 0o600)
	resumeRefused(t, home, t.TempDir(), "outside the allowed roots")
}

// TestHistoryResumeNeedsTheProjectsOwnDirectory: a transcript that names a
// working directory other than the one its directory is Claude Code's for
// (an agent in one project writing a conversation "of" another) is listed
// but does not resume, there or anywhere.
func TestHistoryResumeNeedsTheProjectsOwnDirectory(t *testing.T) {
	t.Parallel()
	home, other := t.TempDir(), t.TempDir()
	dir := filepath.Join(home, ".claude", "projects", "-home-dev-agents-project")
	os.MkdirAll(dir, 0o700)
	line := `{"type":"user","message":{"role":"user","content":"continue the release"},"uuid":"u1","timestamp":"2026-01-01T00:00:00Z","cwd":"` + other + `"}` + "\n"
	os.WriteFile(filepath.Join(dir, "23434b01-f2f1-4c1b-b368-af8a87ce1400.jsonl"), []byte(line), 0o600)
	resumeRefused(t, home, other, "directory is not Claude Code's")
}

// resumeRefused resumes the conversation 23434b01-… of the Claude Code
// home home, with sessions allowed in root, and expects INVALID_MESSAGE
// saying why.
func resumeRefused(t *testing.T, home, root, why string) {
	t.Helper()
	h := newHarness(t, func(s *Server) {
		m, err := session.NewManager(context.Background(), session.Config{Store: s.Store, Events: s.Events, Agents: []string{"claude-code"}, Roots: []string{root}})
		if err != nil {
			t.Fatal(err)
		}
		s.Sessions = m
		s.History = history.New(history.Config{ClaudeDirs: []string{filepath.Join(home, ".claude")}, Store: s.Store})
	})
	if err := h.srv.History.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, c, _ := h.paired()
	c.Send(wire.TypeHistoryResume, "x", map[string]any{"history_id": "claude:23434b01-f2f1-4c1b-b368-af8a87ce1400"})
	var ep wire.ErrorPayload
	if c.Expect(wire.TypeError, &ep); ep.Code != wire.CodeInvalidMessage || !strings.Contains(ep.Message, why) {
		t.Fatalf("error = %+v", ep)
	}
}
