// Package hooks connects Claude Code sessions that a developer started in a
// terminal to tether through Claude Code's hooks: the daemon's endpoint
// (Server, POST /hooks/event), the command hook client (RunHook, what
// `tether hook` runs), the hook secret (LoadOrCreateToken) and the hook
// configuration in Claude Code's settings files (Install, Uninstall).
//
// The endpoint knows nothing of sessions or phones: it checks, decodes and
// answers, and hands every event to a Broker that the session layer
// implements.
package hooks

import (
	"context"
	"encoding/json"
	"time"
)

// Path is where the daemon serves the hook endpoint.
const Path = "/hooks/event"

// DefaultTimeout is the hook timeout, in seconds, that Install writes into
// Claude Code's settings: how long Claude Code waits for `tether hook`.
const DefaultTimeout = 600

// DefaultWait is how long Server holds a question for a phone before it
// answers "ask"; a little under DefaultTimeout so that Claude Code hears the
// answer before it gives up on the hook.
const DefaultWait = 570 * time.Second

// DefaultClientTimeout is how long RunHook waits for the daemon: a little
// over DefaultWait, still under DefaultTimeout.
const DefaultClientTimeout = DefaultWait + 15*time.Second

// MaxBody is the largest hook body the endpoint and the client accept.
const MaxBody = 1 << 20

// Claude Code's hook event names (hook_event_name).
const (
	EventPreToolUse        = "PreToolUse"
	EventPostToolUse       = "PostToolUse"
	EventPermissionRequest = "PermissionRequest"
	EventNotification      = "Notification"
	EventUserPromptSubmit  = "UserPromptSubmit"
	EventStop              = "Stop"
	EventSubagentStop      = "SubagentStop"
	EventPreCompact        = "PreCompact"
	EventSessionStart      = "SessionStart"
	EventSessionEnd        = "SessionEnd"
)

// Events lists every hook event the endpoint accepts, in the order Install
// writes them.
var Events = []string{
	EventSessionStart, EventUserPromptSubmit, EventPreToolUse, EventPermissionRequest,
	EventPostToolUse, EventNotification, EventStop, EventSubagentStop, EventPreCompact, EventSessionEnd,
}

// toolEvents are the events about one tool call; they carry tool_name and
// match on it.
var toolEvents = map[string]bool{EventPreToolUse: true, EventPermissionRequest: true, EventPostToolUse: true}

// Event is one Claude Code hook event as received.
type Event struct {
	SessionID      string // Claude Code's session_id
	Name           string // hook_event_name
	Cwd            string
	TranscriptPath string
	PermissionMode string
	ToolName       string // PreToolUse, PermissionRequest, PostToolUse
	ToolInput      json.RawMessage
	ToolUseID      string
	ToolResponse   json.RawMessage // PostToolUse
	Raw            json.RawMessage // the whole body as received
}

// Decision is the answer to a tool question.
type Decision string

// The decisions a Broker can give.
const (
	DecisionNone  Decision = "" // no opinion: Claude Code decides as if there were no hook
	DecisionAllow Decision = "allow"
	DecisionDeny  Decision = "deny"
	DecisionAsk   Decision = "ask" // fall back to Claude Code's own terminal prompt
)

// Answer is the broker's answer to a PreToolUse or PermissionRequest.
type Answer struct {
	Decision     Decision
	Reason       string          // for deny (reaches Claude) and ask
	UpdatedInput json.RawMessage // for allow with modified parameters
}

// Broker is what the hook endpoint needs from the session layer.
type Broker interface {
	// Observe records every hook event (the observed session is created on its
	// first event and ended on SessionEnd) and forwards it to phones.
	Observe(ctx context.Context, ev Event) error
	// Ask holds a PreToolUse or PermissionRequest until a phone answers or ctx
	// ends (the hook's HTTP request was cancelled, or the wait ran out), and
	// applies the policy (risk levels, no phone connected → DecisionAsk, low-risk
	// PreToolUse → DecisionNone). Observe is called first for the same event.
	Ask(ctx context.Context, ev Event) (Answer, error)
}
