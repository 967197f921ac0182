package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/wire"
)

// TestTetherClaudeUsage: what a `tether claude` session's API messages
// used reaches the phone as each turn's usage and the session's totals,
// with the mock's figures exactly. A turn typed in the terminal, of two
// API messages (the first written to the transcript as two lines, text
// and tool call), comes from the transcript, each message once. The
// phone's turn comes from the stream; once the terminal has the session
// back, its next turn counts only its own message: the phone's, which the
// transcript holds too, is not counted again. The transcript carries no
// cost: the terminal's turns add none.
func TestTetherClaudeUsage(t *testing.T) {
	bin := inTerminal(t)
	d := newDaemon(t)
	if code, _, errOut := runCmd(t, d.env, "hooks", "install", "--project", d.project); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	c, _ := d.phone(map[string]any{"capabilities": []string{"hook_approvals"}})
	used := func(in, out, cacheRead, cacheCreation int) *anthropicmock.Usage {
		return &anthropicmock.Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: cacheRead, CacheCreationInputTokens: cacheCreation}
	}
	api := anthropicmock.New(t, func(r *anthropicmock.Request) anthropicmock.Reply {
		// The user's last message decides (Claude Code may add a system
		// message after it).
		var text string
		var toolResult bool
		for i := len(r.Messages) - 1; i >= 0; i-- {
			if r.Messages[i].Role != "user" {
				continue
			}
			for _, b := range r.Messages[i].Content {
				text += b.Text
				toolResult = toolResult || b.Type == "tool_result"
			}
			break
		}
		switch {
		case r.HasText("user", "Write the title"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Usage")}, Usage: used(1, 1, 0, 0)}
		case toolResult:
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Written.")}, Usage: used(110, 5, 3100, 0)}
		case strings.Contains(text, "please write typed.txt"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{
				anthropicmock.Text("I'll write it."),
				anthropicmock.ToolUse("Bash", map[string]any{"command": "echo typed > typed.txt", "description": "Write the file"}),
			}, StopReason: "tool_use", Usage: used(100, 20, 3000, 400)}
		case strings.Contains(text, "phone says hi"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Hello phone.")}, Usage: used(200, 7, 5000, 50)}
		case strings.Contains(text, "please say bye"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Bye.")}, Usage: used(300, 9, 6000, 60)}
		}
		// What else Claude Code asks on the side is in no transcript.
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("?")}, Usage: used(9000, 9000, 9000, 9000)}
	})
	term, id := tetherClaude(t, d, c, api, bin)
	mode := func(m string) func(wire.Envelope) bool {
		return func(e wire.Envelope) bool {
			return forSession(id)(e) && strings.Contains(string(e.Payload), `"mode":"`+m+`"`)
		}
	}
	// figures reads a turn's usage and the session's totals.
	figures := func(tc wire.TurnComplete) (turn, session string) {
		t.Helper()
		var u wire.UsageTotals
		if err := json.Unmarshal(tc.Usage, &u); err != nil || tc.SessionUsage == nil {
			t.Fatalf("turn_complete without usage: %+v", tc)
		}
		s := tc.SessionUsage
		return fmt.Sprint(u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens),
			fmt.Sprint(s.Turns, s.InputTokens, s.OutputTokens, s.CacheReadInputTokens, s.CacheCreationInputTokens)
	}

	// The terminal's turn, from the transcript.
	term.send("please write typed.txt")
	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), "typed.txt") })
	c.Send(wire.TypeApprovalResponse, "yes", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	var local wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &local, func(e wire.Envelope) bool {
		return forSession(id)(e) && strings.Contains(string(e.Payload), "Written.")
	})
	if turn, session := figures(local); turn != "210 25 6100 400" || session != "1 210 25 6100 400" {
		t.Fatalf("the terminal's turn used %s, the session %s", turn, session)
	}
	if local.TurnCostUSD != 0 || local.SessionUsage.CostUSD != 0 {
		t.Fatalf("the terminal's turn cost %v, the session %v", local.TurnCostUSD, local.SessionUsage.CostUSD)
	}
	term.await("Written.")

	// The phone's turn, from the stream.
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "phone says hi"})
	var remote wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &remote, func(e wire.Envelope) bool {
		return forSession(id)(e) && strings.Contains(string(e.Payload), "Hello phone.")
	})
	if turn, session := figures(remote); turn != "200 7 5000 50" || session != "2 410 32 11100 450" {
		t.Fatalf("the phone's turn used %s, the session %s", turn, session)
	}
	// Cleared, only the resumed interface can show the answer again.
	term.awaitLine("● Hello phone.")
	term.clear()
	c.Send(wire.TypeTerminalHandback, "back", map[string]any{"session_id": id})
	term.await("Hello phone.")
	c.WaitFor(wire.TypeSessionStatus, nil, mode("local"))

	// The terminal's next turn counts its own message only.
	term.send("please say bye")
	var bye wire.TurnComplete
	c.WaitFor(wire.TypeTurnComplete, &bye, func(e wire.Envelope) bool { return forSession(id)(e) && strings.Contains(string(e.Payload), "Bye.") })
	if turn, session := figures(bye); turn != "300 9 6000 60" || session != "3 710 41 17100 510" {
		t.Fatalf("the terminal's turn after the phone's used %s, the session %s", turn, session)
	}
	if bye.TurnCostUSD != 0 || bye.SessionUsage.CostUSD != remote.SessionUsage.CostUSD {
		t.Fatalf("the terminal's turn cost %v, the session %v after %v", bye.TurnCostUSD, bye.SessionUsage.CostUSD, remote.SessionUsage.CostUSD)
	}

	// A phone that connects now finds the same totals in the session list.
	_, ack := d.phone(nil)
	for _, s := range ack.ActiveSessions {
		if s.SessionID == id {
			if u := s.Usage; u == nil || fmt.Sprint(u.Turns, u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens) != "3 710 41 17100 510" {
				t.Fatalf("active_sessions has %+v", u)
			}
			term.send("/exit")
			awaitExit(t, term.pid)
			return
		}
	}
	t.Fatalf("session %s is not in active_sessions %+v", id, ack.ActiveSessions)
}
