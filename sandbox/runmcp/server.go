package runmcp

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tetherdev/tether/sandbox/agent"
)

// ServerName is the MCP server's name: Claude Code calls its tools
// mcp__tether__send_to_agent and so on.
const ServerName = "tether"

// ToolNames are the tools' names as Claude Code calls them.
var ToolNames = []string{
	"mcp__" + ServerName + "__" + agent.ToolSend,
	"mcp__" + ServerName + "__" + agent.ToolReceive,
	"mcp__" + ServerName + "__" + agent.ToolStatus,
}

type sendArgs struct {
	To      string `json:"to" jsonschema:"the participant to send to, by name; empty sends to every other participant"`
	Type    string `json:"type" jsonschema:"task, result, review, signal or chat"`
	Content string `json:"content" jsonschema:"the message"`
	Signal  string `json:"signal,omitempty" jsonschema:"DONE when your work is complete, PASS or FAIL when you review; empty otherwise"`
}

// NewServer returns the MCP server of the run tools, answering through
// calls.
func NewServer(calls agent.RunCaller, version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Title: "tether agent-to-agent run", Version: version}, nil)
	text := func(ctx context.Context, call agent.RunCall) (*mcp.CallToolResult, any, error) {
		res, err := calls.Call(ctx, call)
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(res)}}}, nil, nil
	}
	mcp.AddTool(s, &mcp.Tool{Name: agent.ToolSend,
		Description: "Send a message to another participant of this tether run (a task, your result, a review, a signal or a chat). " +
			"The same message sent twice is stored once: the answer then says duplicate."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sendArgs) (*mcp.CallToolResult, any, error) {
			return text(ctx, agent.RunCall{Tool: agent.ToolSend, To: in.To, Type: in.Type, Content: in.Content, Signal: in.Signal})
		})
	mcp.AddTool(s, &mcp.Tool{Name: agent.ToolReceive,
		Description: "Receive the messages of this tether run sent to you (or to everyone) that you have not seen yet."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return text(ctx, agent.RunCall{Tool: agent.ToolReceive})
		})
	mcp.AddTool(s, &mcp.Tool{Name: agent.ToolStatus,
		Description: "This tether run's status: messages by participant and type, whether DONE was signalled, PASS and FAIL counts."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return text(ctx, agent.RunCall{Tool: agent.ToolStatus})
		})
	return s
}
