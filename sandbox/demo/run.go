package demo

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tetherdev/tether/sandbox/agent"
)

// runCommand finds the last line of prompt that asks for a run tool (a
// turn may quote several messages; the newest comes last): "receive:" or
// "status:" alone, or "send: " anywhere in it (a quoted message starts
// with who sent it).
func runCommand(prompt string) (agent.RunCall, bool) {
	var call agent.RunCall
	found := false
	for line := range strings.Lines(prompt) {
		line = strings.TrimSpace(line)
		switch {
		case line == "receive:":
			call, found = agent.RunCall{Tool: agent.ToolReceive}, true
		case line == "status:":
			call, found = agent.RunCall{Tool: agent.ToolStatus}, true
		case strings.Contains(line, "send: "):
			_, cmd, _ := strings.Cut(line, "send: ")
			f := strings.SplitN(cmd, " ", 3)
			if len(f) < 3 {
				continue
			}
			to := f[0]
			if to == "*" {
				to = ""
			}
			typ, signal, _ := strings.Cut(f[1], "/")
			call, found = agent.RunCall{Tool: agent.ToolSend, To: to, Type: typ, Signal: signal, Content: f[2]}, true
		}
	}
	return call, found
}

// runTool uses a run tool as Claude Code uses an MCP server's (a tool_use
// of mcp__tether__NAME and its tool_result, asked of nobody: tether
// allows its own run tools), then says what came back.
func (t *turn) runTool(ctx context.Context, calls agent.RunCaller, call agent.RunCall) error {
	name := "mcp__tether__" + call.Tool
	msgID, ok := t.streamText(ctx, "I will use "+call.Tool+".")
	if !ok {
		return t.interrupted()
	}
	input := map[string]string{}
	if call.Tool == agent.ToolSend {
		input = map[string]string{"to": call.To, "type": call.Type, "content": call.Content, "signal": call.Signal}
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return fmt.Errorf("demo: tool input: %w", err)
	}
	toolID := "toolu_demo" + strings.ToLower(rand.Text()[:12])
	t.assistant(msgID, map[string]any{"type": "tool_use", "id": toolID, "name": name, "input": json.RawMessage(raw)})
	t.stop("tool_use")
	res, err := calls.Call(ctx, call)
	if ctx.Err() != nil {
		return t.interrupted()
	}
	summary := call.Tool + " answered: " + string(res)
	if err != nil {
		t.toolResult(toolID, err.Error(), true, "Error: "+err.Error())
		summary = call.Tool + " failed: " + err.Error()
	} else {
		t.toolResult(toolID, string(res), false, json.RawMessage(res))
	}
	if _, ok := t.streamText(ctx, summary); !ok {
		return t.interrupted()
	}
	t.stop("end_turn")
	t.result(summary)
	return nil
}
