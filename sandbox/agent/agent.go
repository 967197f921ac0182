// Package agent defines what the sandbox bridge asks of an agent adapter and
// what an adapter may ask of the bridge. Adapters live in packages of their
// own (sandbox/demo, sandbox/claude); the bridge in package sandbox runs them.
package agent

import (
	"context"
	"encoding/json"
)

// Agent is one agent conversation inside a sandbox bridge. An adapter per
// agent kind (the built-in demo, the claude CLI, …) implements it.
type Agent interface {
	// Query runs one turn with prompt. The agent's own messages, shaped as
	// Claude Code's stream-json output, go to host.Emit as they happen;
	// permission questions go to host.RequestPermission. Query returns when
	// the turn is over. Cancelling ctx interrupts the turn: the adapter stops
	// the agent's current work and returns promptly, emitting whatever result
	// message the agent itself produces for an interrupted turn.
	Query(ctx context.Context, prompt string, host Host) error
	// SessionID is the agent's own conversation id, empty before the first
	// turn; passing it back when the bridge starts resumes the conversation.
	SessionID() string
	// Close ends the agent and releases its processes.
	Close() error
}

// ImageAgent is an Agent that also takes images with a prompt (the phone's
// camera, a screenshot). The bridge refuses a query with images for an
// agent that is not one.
type ImageAgent interface {
	Agent
	// QueryImages runs one turn as Query does, the images sent with the
	// prompt (which may then be empty).
	QueryImages(ctx context.Context, prompt string, images []Image, host Host) error
}

// Image is an image sent with a prompt, as Claude's image content blocks
// carry it.
type Image struct {
	// MediaType is image/jpeg, image/png, image/gif or image/webp.
	MediaType string `json:"mediaType"`
	// Data is the image's bytes, standard base64.
	Data string `json:"data"`
}

// Host is what an Agent can ask of the bridge that runs it.
type Host interface {
	// Emit passes one raw agent message on, untranslated.
	Emit(msg json.RawMessage)
	// RequestPermission asks the daemon whether a tool may run and blocks
	// until it answers or ctx ends (an agent withdrawing its question
	// cancels ctx).
	RequestPermission(ctx context.Context, req PermissionRequest) (PermissionDecision, error)
}

// PermissionRequest is an agent's question whether it may run a tool.
type PermissionRequest struct {
	// RequestID pairs the question with its answer.
	RequestID string `json:"requestId"`
	// ToolName is the agent's name for the tool, e.g. "Bash" or "Write".
	ToolName string `json:"toolName"`
	// Input is the tool's input as the agent means to call it.
	Input json.RawMessage `json:"input"`
	// ToolUseID is the id of the tool_use block this question is about.
	ToolUseID string `json:"toolUseId,omitempty"`
}

// PermissionDecision answers a PermissionRequest, in the shape of Claude
// Code's permission responses.
type PermissionDecision struct {
	// Behavior is "allow" or "deny".
	Behavior string `json:"behavior"`
	// UpdatedInput, when allowing, replaces the tool's input.
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	// Message, when denying, tells the agent why.
	Message string `json:"message,omitempty"`
}

// Settings are what an agent runs with; a zero field is the agent's own
// default.
type Settings struct {
	// Model is the agent's model, by name or alias ("sonnet").
	Model string `json:"model,omitempty"`
	// PermissionMode is "default", "acceptEdits", "plan" or
	// "bypassPermissions" (Claude Code's names).
	PermissionMode string `json:"permissionMode,omitempty"`
	// MaxThinkingTokens is the thinking budget of each model request.
	MaxThinkingTokens int `json:"maxThinkingTokens,omitempty"`
}

// Configurable is an Agent whose settings can change while it runs.
type Configurable interface {
	Agent
	// Configure makes s the agent's settings and returns them as the
	// agent now has them. It may be called while a turn runs; the agent
	// applies each setting when it applies it (Claude Code: a new model
	// from its next turn).
	Configure(ctx context.Context, s Settings) (Settings, error)
}

// The tools of an agent-to-agent run, as an agent uses them: the names of
// the spec's MCP tools.
const (
	ToolSend    = "send_to_agent"
	ToolReceive = "receive_messages"
	ToolStatus  = "bridge_status"
)

// MaxRunContent is the longest content a run's message may carry; the
// daemon refuses a longer one, and the sandbox does not send it.
const MaxRunContent = 256 << 10

// RunCall is an agent's use of one of its run's tools. The daemon knows
// which participant sent it: the agent names only the recipient.
type RunCall struct {
	// Tool is ToolSend, ToolReceive or ToolStatus.
	Tool string `json:"tool"`
	// To, Type, Content and Signal are the message to send (ToolSend): To
	// empty is a broadcast.
	To      string `json:"to,omitempty"`
	Type    string `json:"type,omitempty"`
	Content string `json:"content,omitempty"`
	Signal  string `json:"signal,omitempty"`
}

// RunCaller carries an agent's run tool calls to the daemon and returns
// its answer, a JSON object.
type RunCaller interface {
	Call(ctx context.Context, call RunCall) (json.RawMessage, error)
}

// MCPServer is a stdio MCP server an agent's CLI can start, as Claude
// Code's --mcp-config names one.
type MCPServer struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env,omitempty"`
}

// Run is what an agent taking part in a run is given: its name there, its
// tools called in process (Calls), and the same tools as an MCP server for
// an agent that runs a CLI (Server).
type Run struct {
	Member string
	Calls  RunCaller
	Server MCPServer
}
