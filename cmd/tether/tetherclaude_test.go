package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/internal/wstest"
	wrapper "github.com/tetherdev/tether/terminal"
	"github.com/tetherdev/tether/wire"
)

// TestTetherClaudeHandsOverAndBack: `tether claude` runs the real CLI's
// terminal UI in tmux. A prompt typed there reaches the phone (hooks); the
// phone's message takes the session over: the terminal says so, the mock
// gets the message with the conversation before it (the same Claude Code
// session, resumed), the phone sees the answer stream. A key press in the
// terminal (or the phone's terminal_handback) gives it back: the
// interactive UI returns with the phone's exchange in its history, and the
// phone sees the mode change. Three rounds are timed. Last, the daemon
// stops while the phone has the session: the terminal takes it back by
// itself and goes on, and offers it again to the daemon once it is back.
func TestTetherClaudeHandsOverAndBack(t *testing.T) {
	bin := inTerminal(t)
	d := newDaemon(t)
	listen := d.info.Listen
	if code, _, errOut := runCmd(t, d.env, "hooks", "install", "--project", d.project); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	c, _ := d.phone(map[string]any{"capabilities": []string{"hook_approvals"}})
	api := anthropicmock.New(t, func(r *anthropicmock.Request) anthropicmock.Reply {
		// The latest prompt decides; the request carries the whole
		// conversation.
		var last string
		for _, text := range r.Texts("user") {
			if strings.Contains(text, "phone says hi") || strings.Contains(text, "hello from the terminal") {
				last = text
			}
		}
		reply := func(text string) anthropicmock.Reply {
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text(text)}}
		}
		var toolResult bool
		for _, b := range r.LastMessage().Content {
			toolResult = toolResult || b.Type == "tool_result"
		}
		switch {
		case r.HasText("user", "Write the title"):
			return reply("Greetings")
		case toolResult:
			return reply("Written from the phone.")
		case strings.HasPrefix(last, "phone says hi write"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{
				anthropicmock.ToolUse("Bash", map[string]any{"command": "echo remote > remote.txt", "description": "Write the file"}),
			}, StopReason: "tool_use"}
		case strings.HasPrefix(last, "phone says hi") && r.HasText("user", "hello from the terminal"):
			return reply("Hello phone " + strings.TrimPrefix(last, "phone says hi ") + ", I remember the terminal.")
		case strings.HasPrefix(last, "phone says hi"):
			return reply("I do not know this conversation.")
		case strings.Contains(last, "hello from the terminal"):
			return reply("Hi from the mock.")
		}
		return reply("?")
	})
	term, id := tetherClaude(t, d, c, api, bin)

	// Local: typed in the terminal, seen on the phone.
	term.send("hello from the terminal")
	c.WaitFor(wire.TypeTurnComplete, nil, forSession(id))
	term.await("Hi from the mock.")
	mode := func(m string) func(wire.Envelope) bool {
		return func(e wire.Envelope) bool {
			return forSession(id)(e) && strings.Contains(string(e.Payload), `"mode":"`+m+`"`)
		}
	}
	takeOver := func(round int) time.Duration {
		t.Helper()
		start := time.Now()
		c.Send(wire.TypeMessage, fmt.Sprintf("m%d", round), map[string]any{"session_id": id, "content": fmt.Sprintf("phone says hi %d", round)})
		c.WaitFor(wire.TypeSessionStatus, nil, mode("remote"))
		took := time.Since(start)
		term.await(wrapper.Banner)
		answer := fmt.Sprintf("Hello phone %d, I remember the terminal.", round)
		c.WaitFor(wire.TypeTurnComplete, nil, func(e wire.Envelope) bool { return forSession(id)(e) && strings.Contains(string(e.Payload), answer) })
		if !strings.Contains(streamed(c), answer) {
			t.Fatalf("round %d: the phone did not see the answer stream: %q", round, streamed(c))
		}
		return took
	}
	var over, back []time.Duration
	for round := 1; round <= 3; round++ {
		over = append(over, takeOver(round))
		// The terminal showed the phone's turn as it ran; cleared, only
		// the resumed interface can show its answer again.
		term.awaitLine(fmt.Sprintf("● Hello phone %d, I remember the terminal.", round))
		term.clear()
		start := time.Now()
		if round == 2 {
			c.Send(wire.TypeTerminalHandback, "back", map[string]any{"session_id": id})
		} else {
			term.tmux("send-keys", "-t", "dev", "x")
		}
		// The interactive UI is back when it shows the phone's answer,
		// which only the resumed session's history holds.
		term.await(fmt.Sprintf("Hello phone %d,", round))
		back = append(back, time.Since(start))
		c.WaitFor(wire.TypeSessionStatus, nil, mode("local"))
	}
	// The reference for the way back: claude alone, resuming the same
	// session in another window until it shows the same history.
	var alone []time.Duration
	for range 3 {
		start := time.Now()
		other := openTerminal(t, d, append(append(api.ClaudeEnv(envMap(d.env)["HOME"]), "TETHER_TEST_AS_TETHER=1"), bin, "--resume", id))
		other.await("Hello phone 3,")
		alone = append(alone, time.Since(start))
		other.tmux("kill-server")
	}
	for _, ds := range [][]time.Duration{over, back, alone} {
		slices.Sort(ds)
	}
	t.Logf("switch to the phone (message to remote mode): %v, median %v; back to the terminal (key or hand-back to the resumed UI): %v, median %v; "+
		"claude alone resuming the session to its history: %v, median %v", over, over[1], back, back[1], alone, alone[1])

	// The terminal goes on with the same session.
	term.tmux("clear-history", "-t", "dev")
	term.send("hello from the terminal")
	c.WaitFor(wire.TypeTurnComplete, nil, func(e wire.Envelope) bool {
		var p struct{ Result string }
		json.Unmarshal(e.Payload, &p)
		return forSession(id)(e) && p.Result == "Hi from the mock."
	})

	// A tool the phone's claude wants is asked on the phone, as in any
	// tether session, and runs in the terminal's directory once approved.
	c.Send(wire.TypeMessage, "m-tool", map[string]any{"session_id": id, "content": "phone says hi write remote.txt"})
	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, forSession(id))
	if ar.Tool != "Bash" || !strings.Contains(string(ar.Params), "remote.txt") {
		t.Fatalf("approval_required = %+v", ar)
	}
	c.Send(wire.TypeApprovalResponse, "yes", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	c.WaitFor(wire.TypeTurnComplete, nil, func(e wire.Envelope) bool {
		return forSession(id)(e) && strings.Contains(string(e.Payload), "Written from the phone.")
	})
	if b, err := os.ReadFile(filepath.Join(d.project, "remote.txt")); err != nil || string(b) != "remote\n" {
		t.Fatalf("the approved command: %q %v", b, err)
	}
	c.Send(wire.TypeTerminalHandback, "back-tool", map[string]any{"session_id": id})
	term.await("Written from the phone.")
	c.WaitFor(wire.TypeSessionStatus, nil, mode("local"))

	for _, bad := range []map[string]any{{}, {"session_id": "nope"}, {"session_id": 7}} {
		c.Send(wire.TypeTerminalHandback, "bad", bad)
		var ep wire.ErrorPayload
		if e := c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == "bad" }); ep.Code == "" {
			t.Fatalf("terminal_handback %v: %+v", bad, e)
		}
	}

	// The daemon stops while the phone has the session: the terminal
	// takes it back on its own, with the phone's last exchange.
	takeOver(4)
	term.clear()
	d.stop()
	term.await("the daemon went away")
	term.await("Hello phone 4,")

	// A daemon that comes back gets the session offered again.
	d.start("--listen", listen)
	c, _ = d.phone(map[string]any{"capabilities": []string{"hook_approvals"}})
	c.WaitFor(wire.TypeSessionStatus, nil, mode("local"))
	takeOver(5)

	// Back, and quit: tether claude ends with its claude, and nothing of
	// either is left writing into the test's directories.
	term.clear()
	term.tmux("send-keys", "-t", "dev", "x")
	term.await("Hello phone 5,")
	term.send("/exit")
	awaitExit(t, term.pid)
}

// tetherClaude runs `tether claude` (this test binary standing in for
// tether) in a tmux terminal, its claude against api, and returns once its
// session is offered to the phone c in local mode, with the session's id.
// A failed test logs the terminal and what the phone saw last.
func tetherClaude(t *testing.T, d *daemon, c *wstest.Client, api *anthropicmock.Server, bin string) (*terminal, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(api.ClaudeEnv(envMap(d.env)["HOME"]), "TETHER_TEST_AS_TETHER=1", "TETHER_DATA="+envMap(d.env)["TETHER_DATA"], "TETHER_CLAUDE_BIN="+bin)
	term := openTerminal(t, d, append(env, self, "claude"))
	term.await("? for shortcuts")
	var status wire.SessionStatus
	c.WaitFor(wire.TypeSessionStatus, &status, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), `"mode":"local"`) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the terminal:\n%s", term.tmux("capture-pane", "-p", "-S", "-60", "-t", "dev"))
			for _, e := range c.Seen[max(0, len(c.Seen)-25):] {
				t.Logf("the phone saw %s %.300s", e.Type, e.Payload)
			}
		}
	})
	return term, status.SessionID
}

// TestTetherClaudeKeepsClaudesExitStatus: with a daemon (claude in a
// pseudo-terminal) and without one (claude run unchanged, after one line
// saying so), `tether claude` exits as claude does.
func TestTetherClaudeKeepsClaudesExitStatus(t *testing.T) {
	t.Parallel()
	bin := anthropicmock.ClaudeBin(t)
	d := newDaemon(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exitOf := func(cmd *exec.Cmd) (int, string) {
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), string(out)
	}
	want, _ := exitOf(exec.Command(bin, "--no-such-option"))
	if want == 0 {
		t.Fatal("claude accepted an unknown option")
	}
	for name, data := range map[string]string{"daemon": envMap(d.env)["TETHER_DATA"], "no daemon": t.TempDir()} {
		cmd := exec.Command(self, "claude", "--no-such-option")
		cmd.Dir = d.project
		cmd.Env = append(os.Environ(), "TETHER_TEST_AS_TETHER=1", "TETHER_DATA="+data, "TETHER_CLAUDE_BIN="+bin, "HOME="+envMap(d.env)["HOME"])
		got, out := exitOf(cmd)
		if got != want {
			t.Errorf("%s: exit %d, claude's %d\n%s", name, got, want, out)
		}
		if said := strings.Contains(out, "running claude without the phone"); said != (name == "no daemon") {
			t.Errorf("%s: %q", name, out)
		}
	}
}

// TestTetherClaudeSuspendsLikeClaude: in a shell, Ctrl-Z suspends claude,
// and tether claude with it, back at the shell's prompt; fg brings both
// back, and claude takes input again.
func TestTetherClaudeSuspendsLikeClaude(t *testing.T) {
	bin := inTerminal(t)
	d := newDaemon(t)
	api := anthropicmock.New(t, func(r *anthropicmock.Request) anthropicmock.Reply {
		if r.HasText("user", "Write the title") {
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Greetings")}}
		}
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Back from the suspension.")}}
	})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	term := openTerminal(t, d, []string{"PS1=$ ", "bash", "--norc", "--noprofile"})
	env := append(api.ClaudeEnv(envMap(d.env)["HOME"]), "TETHER_TEST_AS_TETHER=1", "TETHER_DATA="+envMap(d.env)["TETHER_DATA"], "TETHER_CLAUDE_BIN="+bin)
	term.send("env " + strings.Join(env, " ") + " " + self + " claude")
	term.await("? for shortcuts")
	term.tmux("send-keys", "-t", "dev", "C-z")
	term.await("Stopped")
	term.send("fg")
	term.send("say something")
	term.await("Back from the suspension.")
	// Quit, so that nothing is left writing into the test's home (the
	// window's shell is what the cleanup waits for).
	term.send("/exit")
	term.awaitLastLine("$")
}

// inTerminal prepares a test that drives the real claude CLI in tmux: it
// is skipped with -short, runs in parallel, and gets the CLI.
func inTerminal(t *testing.T) (claudeBin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("drives the real CLI in a terminal")
	}
	t.Parallel()
	bin := anthropicmock.ClaudeBin(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing: run scripts/install-deps")
	}
	return bin
}

// awaitLastLine waits until the terminal's last line that is not empty is
// want (a shell's prompt is back).
func (term *terminal) awaitLastLine(want string) {
	term.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		lines := strings.Split(strings.TrimRight(term.tmux("capture-pane", "-p", "-t", "dev"), "\n "), "\n")
		if strings.TrimSpace(lines[len(lines)-1]) == want {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			term.t.Fatalf("the terminal's last line never became %q:\n%s", want, term.tmux("capture-pane", "-p", "-t", "dev"))
		}
	}
}

// clear empties the window and its history.
func (term *terminal) clear() {
	term.t.Helper()
	term.tmux("send-keys", "-R", "-t", "dev")
	term.tmux("clear-history", "-t", "dev")
}

// awaitLine waits until a line of the terminal is want, spaces around it
// aside.
func (term *terminal) awaitLine(want string) {
	term.t.Helper()
	term.await(want)
	for l := range strings.Lines(term.tmux("capture-pane", "-p", "-J", "-t", "dev")) {
		if strings.TrimSpace(l) == want {
			return
		}
	}
	term.t.Fatalf("no line of the terminal is %q:\n%s", want, term.tmux("capture-pane", "-p", "-t", "dev"))
}

// TestTetherClaudeFirstMessageFromThePhone: a `tether claude` session
// nobody has typed in yet is taken over by the phone's first message (no
// conversation exists to resume: the phone's claude starts it under the
// terminal's session id), and the terminal takes back that conversation.
func TestTetherClaudeFirstMessageFromThePhone(t *testing.T) {
	bin := inTerminal(t)
	d := newDaemon(t)
	if code, _, errOut := runCmd(t, d.env, "hooks", "install", "--project", d.project); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	c, _ := d.phone(map[string]any{"capabilities": []string{"hook_approvals"}})
	api := anthropicmock.New(t, func(r *anthropicmock.Request) anthropicmock.Reply {
		reply := func(text string) anthropicmock.Reply {
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text(text)}}
		}
		switch {
		case r.HasText("user", "Write the title"):
			return reply("Greetings")
		case r.HasText("user", "and from the terminal") && r.HasText("user", "first from the phone"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("I remember the phone.")},
				Usage: &anthropicmock.Usage{InputTokens: 300, OutputTokens: 9}}
		case r.HasText("user", "first from the phone"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Hello phone, this is new.")},
				Usage: &anthropicmock.Usage{InputTokens: 200, OutputTokens: 7}}
		}
		return reply("I do not know this conversation.")
	})
	term, id := tetherClaude(t, d, c, api, bin)

	c.Send(wire.TypeMessage, "first", map[string]any{"session_id": id, "content": "first from the phone"})
	var done wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &done, forSession(id))
	if done.IsError || done.Result != "Hello phone, this is new." {
		t.Fatalf("the phone's first turn: %+v", done)
	}
	// Back in the terminal, the resumed claude shows the phone's exchange.
	term.clear()
	c.Send(wire.TypeTerminalHandback, "back", map[string]any{"session_id": id})
	c.WaitFor(wire.TypeSessionStatus, nil, func(e wire.Envelope) bool {
		return forSession(id)(e) && strings.Contains(string(e.Payload), `"mode":"local"`)
	})
	term.await("Hello phone, this is new.")
	term.await("? for shortcuts")
	term.send("and from the terminal")
	term.await("I remember the phone.")
	// What each turn used is counted once: the phone's from its stream,
	// the terminal's from the transcript, which holds both.
	var last wire.TurnComplete
	seenOrWait(c, wire.TypeTurnComplete, &last, func(e wire.Envelope) bool {
		return forSession(id)(e) && strings.Contains(string(e.Payload), `"output_tokens":9`)
	})
	if su := last.SessionUsage; su == nil || su.Turns != 2 || su.OutputTokens != 16 || su.InputTokens != 500 {
		t.Fatalf("the session's usage after the terminal's turn: %+v", su)
	}
	term.send("/exit")
	awaitExit(t, term.pid)
}
