package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/wire"
)

// TestHistoryOfClaudeCodeSessions: conversations the real Claude Code CLI
// had on this machine outside tether, one in -p mode and one in its
// terminal UI (against the mock Messages API), appear in the phone's
// history with their project and first prompt while the daemon runs, read
// back with every turn, and the -p one resumes as a sandboxed session: the
// model gets the earlier conversation with the new prompt.
func TestHistoryOfClaudeCodeSessions(t *testing.T) {
	bin := inTerminal(t)
	api := anthropicmock.New(t, func(r *anthropicmock.Request) anthropicmock.Reply {
		switch {
		case r.HasText("user", "Write the title"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("A title")}}
		case r.HasText("user", "what was the word"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("The word was pineapple.")}}
		case r.HasText("user", "hello from the terminal"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Hello, terminal.")}}
		}
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Noted.")}}
	})
	d := newDaemonEnv(t, []string{
		"ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-mock-not-a-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, "--claude-bin", bin)
	home := envMap(d.env)["HOME"]
	c, _ := d.phone(nil)

	// Written while the daemon runs: the history watches for them.
	cli := exec.Command(bin, "-p", "remember the word pineapple")
	cli.Dir, cli.Env = d.project, api.ClaudeEnv(home)
	if out, err := cli.CombinedOutput(); err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	term := openTerminal(t, d, append(api.ClaudeEnv(home), bin))
	term.await("? for shortcuts")
	term.send("hello from the terminal")
	term.await("Hello, terminal.")

	list := func(query string) wire.HistoryListResponse {
		t.Helper()
		c.Send(wire.TypeHistoryList, "l", map[string]any{"query": query})
		var page wire.HistoryListResponse
		c.WaitFor(wire.TypeHistoryListResponse, &page, nil)
		return page
	}
	// awaitSession waits until the one session holding query is as done
	// says.
	awaitSession := func(query string, done func(wire.HistorySession) bool) wire.HistorySession {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			if page := list(query); len(page.Sessions) == 1 && done(page.Sessions[0]) {
				return page.Sessions[0]
			}
			// The file notification is on its way.
			c.Send(wire.TypeHeartbeatPing, "wait", nil)
			c.WaitFor(wire.TypeHeartbeatPong, nil, nil)
		}
		logTranscripts(t, home)
		t.Fatalf("no session holds %q: %+v", query, list(""))
		return wire.HistorySession{}
	}
	answered := func(s wire.HistorySession) bool { return s.Messages >= 2 }
	printed := awaitSession("pineapple", answered)
	typed := awaitSession("hello from the terminal", answered)
	for _, s := range []wire.HistorySession{printed, typed} {
		if s.Project != d.project || s.Agent != "claude-code" || s.Source != "claude" || !s.Resumable || s.Live || s.Messages < 2 {
			t.Errorf("session = %+v", s)
		}
	}
	if printed.Title != "remember the word pineapple" || typed.Title != "hello from the terminal" {
		t.Errorf("titles %q, %q", printed.Title, typed.Title)
	}

	read := func(id string) []string {
		t.Helper()
		c.Send(wire.TypeHistoryRead, "r", map[string]any{"history_id": id})
		var r wire.HistoryReadResponse
		c.WaitFor(wire.TypeHistoryReadResponse, &r, nil)
		var out []string
		for _, raw := range r.Events {
			var env wire.Envelope
			json.Unmarshal(raw, &env)
			var p struct {
				Content string `json:"content"`
			}
			json.Unmarshal(env.Payload, &p)
			if env.Type == wire.TypeUserMessage || env.Type == wire.TypeStreamChunk {
				out = append(out, env.Type+" "+p.Content)
			}
		}
		return out
	}
	if got := strings.Join(read(printed.HistoryID), "|"); got != "user_message remember the word pineapple|stream_chunk Noted." {
		t.Errorf("-p conversation: %q", got)
	}
	if got := strings.Join(read(typed.HistoryID), "|"); got != "user_message hello from the terminal|stream_chunk Hello, terminal." {
		logTranscripts(t, home)
		t.Errorf("terminal conversation: %q", got)
	}
	term.send("/exit")

	// Resume: a sandboxed claude-code session in the project, whose model
	// sees the earlier conversation.
	c.Send(wire.TypeHistoryResume, "resume", map[string]any{"history_id": printed.HistoryID, "policy": "auto_approve"})
	var resumed wire.HistoryResumeResponse
	c.WaitFor(wire.TypeHistoryResumeResponse, &resumed, nil)
	var ready wire.SessionReady
	seenOrWait(c, wire.TypeSessionReady, &ready, func(e wire.Envelope) bool { return e.ID == "resume" })
	if ready.SessionID != resumed.SessionID || ready.Agent != "claude-code" || ready.WorkingDirectory != d.project {
		t.Fatalf("session_ready = %+v, response %+v", ready, resumed)
	}
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": ready.SessionID, "content": "what was the word?"})
	c.WaitFor(wire.TypeTurnComplete, nil, forSession(ready.SessionID))
	if !strings.Contains(streamed(c), "The word was pineapple.") {
		t.Fatalf("streamed %q", streamed(c))
	}
	reqs := api.MessageRequests()
	last := reqs[len(reqs)-1]
	if !last.HasText("user", "remember the word pineapple") || !last.HasText("assistant", "Noted.") || !last.HasText("user", "what was the word") {
		t.Fatalf("the model did not get the earlier conversation: %s", last.Body)
	}
	// The history shows the conversation as the live session's.
	// (the same transcript, which the resumed claude appends to).
	now := awaitSession("pineapple", func(s wire.HistorySession) bool { return s.Live && s.SessionID == ready.SessionID && s.Messages >= 4 })
	if now.HistoryID != printed.HistoryID {
		t.Fatalf("after the resume: %+v", now)
	}
}

// TestWebClientHistory drives Debian's chromium through the web client's
// Past screen (web/e2e/history.mjs): a conversation the real claude CLI
// had in -p mode is listed, found, read, and continued from the browser.
func TestWebClientHistory(t *testing.T) {
	bin := inTerminal(t)
	api := anthropicmock.New(t, func(r *anthropicmock.Request) anthropicmock.Reply {
		if r.HasText("user", "what was the word") && r.HasText("user", "remember the word pineapple") {
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("The word was pineapple.")}}
		}
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Noted.")}}
	})
	d := newDaemonEnv(t, []string{
		"ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-mock-not-a-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, "--claude-bin", bin)
	cli := exec.Command(bin, "-p", "remember the word pineapple")
	cli.Dir, cli.Env = d.project, api.ClaudeEnv(envMap(d.env)["HOME"])
	if out, err := cli.CombinedOutput(); err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	runBrowser(t, d, "history.mjs")
}

// logTranscripts logs the Claude Code transcripts under home: what a
// failed history test read.
func logTranscripts(t *testing.T, home string) {
	files, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", "*.jsonl"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		t.Logf("%s:\n%s", f, b)
	}
}
