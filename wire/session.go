package wire

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// Session, chat, tool and notification message types.
const (
	TypeSessionStart       = "session_start"
	TypeSessionReady       = "session_ready"
	TypeSessionEnd         = "session_end"
	TypeMessage            = "message"
	TypeStreamStart        = "stream_start"
	TypeStreamChunk        = "stream_chunk"
	TypeStreamEnd          = "stream_end"
	TypeToolCall           = "tool_call"
	TypeToolResult         = "tool_result"
	TypeApprovalRequired   = "approval_required"
	TypeApprovalResponse   = "approval_response"
	TypeApprovalCancelled  = "approval_cancelled"      // extension
	TypeApprovalResolved   = "approval_resolved"       // extension
	TypeApprovalRules      = "approval_rules"          // extension
	TypeApprovalRulesResp  = "approval_rules_response" // extension
	TypeApprovalRulesClear = "approval_rules_clear"    // extension
	TypeTurnComplete       = "turn_complete"           // extension
	TypeSessionStatus      = "session_status"          // extension
	TypeInterrupt          = "interrupt"               // extension
	TypeNotification       = "notification"
	TypeNotificationAck    = "notification_ack"
	TypeReplayGap          = "replay_gap" // extension
	TypeClaudeEvent        = "claude_event"
	TypeUserMessage        = "user_message"               // extension
	TypeSessionHistory     = "session_history"            // extension
	TypeSessionHistoryResp = "session_history_response"   // extension
	TypeThinkingChunk      = "thinking_chunk"             // extension
	TypeSessionConfigure   = "session_configure"          // extension
	TypeSessionConfigResp  = "session_configure_response" // extension
	TypeSessionSettings    = "session_settings"           // extension
	TypeAgentInfo          = "agent_info"                 // extension
	TypeTerminalHandback   = "terminal_handback"          // extension
)

// SessionHistory is the payload of "session_history" (extension): a page of
// a session's logged events, the newest before BeforeSeq (0: the newest).
type SessionHistory struct {
	SessionID string `json:"session_id"`
	BeforeSeq int64  `json:"before_seq,omitempty"`
	// Limit is the most events in the page: 1 to MaxHistoryPage, default
	// DefaultHistoryPage.
	Limit int `json:"limit,omitempty"`
}

// Sizes of a session_history page.
const (
	DefaultHistoryPage = 200
	MaxHistoryPage     = 1000
	// MaxHistoryBytes bounds a page's frames (a page holds one event at
	// least).
	MaxHistoryBytes = 2 << 20
)

// SessionHistoryResponse is the payload of "session_history_response": the
// events as they were sent (whole frames, seq included), in seq order.
type SessionHistoryResponse struct {
	SessionID string            `json:"session_id"`
	Events    []json.RawMessage `json:"events"`
	// HasMore says older events remain: ask again with BeforeSeq the
	// first event's seq.
	HasMore bool `json:"has_more"`
}

// SessionStart is the payload of "session_start".
type SessionStart struct {
	Agent            string `json:"agent"`
	SessionID        string `json:"session_id"`
	WorkingDirectory string `json:"working_directory"`
	Resume           bool   `json:"resume"`
	// Policy is how permission questions are answered: "ask" (the
	// default), "auto_approve" or "auto_deny" (extension).
	Policy string `json:"policy,omitempty"`
	Title  string `json:"title,omitempty"`
	// Model, PermissionMode and MaxThinkingTokens are the agent's settings
	// (extension); empty or zero: the agent's own default.
	Model             string `json:"model,omitempty"`
	PermissionMode    string `json:"permission_mode,omitempty"`
	MaxThinkingTokens int    `json:"max_thinking_tokens,omitempty"`
}

// Permission modes a session's agent runs in (extension), as Claude Code
// names them.
const (
	ModeDefault     = "default"
	ModeAcceptEdits = "acceptEdits"
	ModePlan        = "plan"
	ModeBypass      = "bypassPermissions"
)

// PermissionModes are the modes a phone may ask for.
var PermissionModes = []string{ModeDefault, ModeAcceptEdits, ModePlan, ModeBypass}

// Bounds of a thinking budget; 0 is the agent's default.
const (
	MinThinkingTokens = 1024
	MaxThinkingTokens = 128000
)

var modelPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/\[\]-]{0,99}$`)

// ValidateSettings checks the agent settings a phone asks for: a model
// name of letters, digits and . _ : @ / [ ] - (as Claude Code's names and
// aliases are, "claude-opus-4-8[1m]", "sonnet"), one of PermissionModes,
// a thinking budget of 0 or MinThinkingTokens to MaxThinkingTokens.
func ValidateSettings(model, mode string, thinking int) error {
	if model != "" && !modelPattern.MatchString(model) {
		return Errorf(CodeInvalidMessage, "model must be 1 to 100 letters, digits or . _ : @ / [ ] -")
	}
	if mode != "" && !slices.Contains(PermissionModes, mode) {
		return Errorf(CodeInvalidMessage, "permission_mode must be one of %s", strings.Join(PermissionModes, ", "))
	}
	if thinking != 0 && (thinking < MinThinkingTokens || thinking > MaxThinkingTokens) {
		return Errorf(CodeInvalidMessage, "max_thinking_tokens must be 0 (the agent's default) or %d to %d", MinThinkingTokens, MaxThinkingTokens)
	}
	return nil
}

// SessionConfigure is the payload of "session_configure" (extension):
// the settings to change; an absent field stays as it is, an empty one
// goes back to the agent's default.
type SessionConfigure struct {
	SessionID         string  `json:"session_id"`
	Model             *string `json:"model"`
	PermissionMode    *string `json:"permission_mode"`
	MaxThinkingTokens *int    `json:"max_thinking_tokens"`
}

// SessionSettings is a session's agent settings: the payload of
// "session_configure_response" and of the "session_settings" event
// (extension).
type SessionSettings struct {
	SessionID         string `json:"session_id"`
	Model             string `json:"model"`
	PermissionMode    string `json:"permission_mode"`
	MaxThinkingTokens int    `json:"max_thinking_tokens"`
	// ChangedBy (events only) names the device that changed them, or is
	// "agent" when the agent did (leaving plan mode).
	ChangedBy string `json:"changed_by,omitempty"`
}

// AgentInfo is the payload of "agent_info" (extension): what the agent
// reports about itself, sent when it changes.
type AgentInfo struct {
	SessionID string `json:"session_id"`
	// Model is the model the agent runs, as it names it.
	Model          string `json:"model,omitempty"`
	PermissionMode string `json:"permission_mode,omitempty"`
	// Models are the models the agent offers, when it says.
	Models        []ModelInfo    `json:"models,omitempty"`
	SlashCommands []SlashCommand `json:"slash_commands,omitempty"`
	Version       string         `json:"version,omitempty"`
}

// ModelInfo is a model an agent offers: Value is what to send as model.
type ModelInfo struct {
	Value       string `json:"value"`
	DisplayName string `json:"display_name,omitempty"`
	Description string `json:"description,omitempty"`
}

// SlashCommand is a command the agent takes as a message "/name args".
type SlashCommand struct {
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	ArgumentHint string `json:"argument_hint,omitempty"`
}

// SessionReady is the payload of "session_ready".
type SessionReady struct {
	SessionID        string     `json:"session_id"`
	Agent            string     `json:"agent"`
	WorkingDirectory string     `json:"working_directory"`
	Branch           string     `json:"branch,omitempty"`
	Status           string     `json:"status"`
	Title            string     `json:"title,omitempty"`
	Resumed          bool       `json:"resumed,omitempty"`
	Sandbox          *Isolation `json:"sandbox,omitempty"`
	// Warnings are what the user should know about this session (extension).
	Warnings []string `json:"warnings,omitempty"`
	// Model, PermissionMode and MaxThinkingTokens are the settings its
	// agent runs with (extension).
	Model             string `json:"model,omitempty"`
	PermissionMode    string `json:"permission_mode,omitempty"`
	MaxThinkingTokens int    `json:"max_thinking_tokens,omitempty"`
}

// Isolation says which sandbox layers a session got (extension).
type Isolation struct {
	Bubblewrap bool `json:"bubblewrap"`
	Cgroup     int  `json:"cgroup"`
	Network    bool `json:"network"`
	// Egress are the destinations its proxy forwards to (extension).
	Egress   []string `json:"egress,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// SessionEnd is the payload of "session_end", both ways.
type SessionEnd struct {
	SessionID string `json:"session_id"`
	Reason    string `json:"reason,omitempty"`
	Error     string `json:"error,omitempty"`
}

// SessionStatus reports a session's status changing (extension).
type SessionStatus struct {
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	// Sandbox is "stopped" when the session's sandbox was stopped while
	// the session goes on (it starts again on the next message), with
	// Reason saying why ("idle_timeout") (extension).
	Sandbox string `json:"sandbox,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Mode is a terminal session's (source "terminal"): "local" while the
	// user types in the terminal, "remote" while the phone drives it
	// (extension).
	Mode string `json:"mode,omitempty"`
}

// TerminalHandback is the payload of "terminal_handback" (extension): the
// phone gives a terminal session (source "terminal") back to its terminal,
// after the running turn, or at once with Interrupt.
type TerminalHandback struct {
	SessionID string `json:"session_id"`
	Interrupt bool   `json:"interrupt,omitempty"`
}

// Message is the payload of "message" from the client.
type Message struct {
	SessionID string `json:"session_id"`
	Content   string `json:"content"`
	Role      string `json:"role,omitempty"`
	// Attachments are images sent with the message (extension).
	Attachments []Attachment `json:"attachments,omitempty"`
}

// UserMessage is the payload of "user_message" (extension): a message a
// session runs, as an event of the log, so that every device shows the
// whole conversation.
type UserMessage struct {
	SessionID string `json:"session_id"`
	// MessageID is the id of the client's message frame, by which the
	// sender recognizes its own message.
	MessageID  string `json:"message_id,omitempty"`
	Content    string `json:"content"`
	DeviceID   string `json:"device_id,omitempty"`
	DeviceName string `json:"device_name,omitempty"`
	SentAt     string `json:"sent_at"`
	// Attachments are the message's images, as sent.
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Interrupt is the payload of "interrupt" (extension).
type Interrupt struct {
	SessionID string `json:"session_id"`
}

// StreamStart is the payload of "stream_start".
type StreamStart struct {
	SessionID string `json:"session_id"`
	MessageID string `json:"message_id"`
}

// StreamChunk is the payload of "stream_chunk".
type StreamChunk struct {
	SessionID string `json:"session_id"`
	MessageID string `json:"message_id"`
	Content   string `json:"content"`
	IsToolUse bool   `json:"is_tool_use"`
}

// ThinkingChunk is the payload of "thinking_chunk" (extension): a piece of
// the agent's thinking, streamed as it thinks, in the assistant message
// MessageID, before the message's text.
type ThinkingChunk struct {
	SessionID string `json:"session_id"`
	MessageID string `json:"message_id"`
	Content   string `json:"content"`
}

// StreamEnd is the payload of "stream_end".
type StreamEnd struct {
	SessionID    string `json:"session_id"`
	MessageID    string `json:"message_id"`
	FinishReason string `json:"finish_reason"`
}

// ToolCall is the payload of "tool_call".
type ToolCall struct {
	SessionID   string          `json:"session_id"`
	ToolCallID  string          `json:"tool_call_id"`
	Tool        string          `json:"tool"`
	Params      json.RawMessage `json:"params"`
	Description string          `json:"description,omitempty"`
}

// ToolResultBody is a tool's outcome.
type ToolResultBody struct {
	Success    bool   `json:"success"`
	Content    string `json:"content"`
	Error      string `json:"error,omitempty"`
	Diff       string `json:"diff,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// OutOfMemory says the sandbox's memory limit killed the command
	// (extension); MemoryLimitBytes is that limit.
	OutOfMemory      bool  `json:"out_of_memory,omitempty"`
	MemoryLimitBytes int64 `json:"memory_limit_bytes,omitempty"`
}

// ToolResult is the payload of "tool_result".
type ToolResult struct {
	SessionID  string         `json:"session_id"`
	ToolCallID string         `json:"tool_call_id"`
	Tool       string         `json:"tool"`
	Result     ToolResultBody `json:"result"`
}

// ApprovalRequired is the payload of "approval_required".
type ApprovalRequired struct {
	SessionID   string          `json:"session_id"`
	ToolCallID  string          `json:"tool_call_id"`
	Tool        string          `json:"tool"`
	Params      json.RawMessage `json:"params"`
	Description string          `json:"description"`
	RiskLevel   string          `json:"risk_level"`
	Source      string          `json:"source"`
	RequestID   string          `json:"request_id,omitempty"`
	ExpiresAt   string          `json:"expires_at,omitempty"`
	// RememberScope says what approving with remember "session" would
	// approve from then on (extension).
	RememberScope string `json:"remember_scope,omitempty"`
	// Kind is "plan" (the agent proposes the plan in params.plan) or
	// "question" (it asks params.questions) for the calls addressed to
	// the user (extension); absent for a tool call.
	Kind string `json:"kind,omitempty"`
}

// ApprovalResponse is the payload of "approval_response".
type ApprovalResponse struct {
	SessionID     string          `json:"session_id"`
	ToolCallID    string          `json:"tool_call_id"`
	Decision      string          `json:"decision"`
	Modifications json.RawMessage `json:"modifications"`
	Reason        string          `json:"reason,omitempty"`
	// Remember "session" approves the same tool with the same shape of
	// input for the rest of the session (extension).
	Remember string `json:"remember,omitempty"`
	// Answers answer a "question" approval, approved: the answer to each
	// question by its text (extension).
	Answers map[string]string `json:"answers,omitempty"`
}

// ApprovalResolved tells phones a question was answered (extension), so
// that other phones dismiss it.
type ApprovalResolved struct {
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	Decision   string `json:"decision"`
}

// ApprovalRule is a remembered approval (extension).
type ApprovalRule struct {
	Tool   string   `json:"tool"`
	Prefix string   `json:"prefix,omitempty"`
	Path   string   `json:"path,omitempty"`
	Keys   []string `json:"keys,omitempty"`
	// MaxRisk is the highest risk level the rule approves: the level of
	// the call it was remembered from.
	MaxRisk string `json:"max_risk,omitempty"`
}

// ApprovalRules is the payload of approval_rules, approval_rules_clear and
// approval_rules_response (extension).
type ApprovalRules struct {
	SessionID string         `json:"session_id"`
	Rules     []ApprovalRule `json:"rules"`
}

// ApprovalCancelled tells phones a question went away (extension).
type ApprovalCancelled struct {
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	Reason     string `json:"reason"`
}

// TurnComplete carries an agent turn's final result (extension).
type TurnComplete struct {
	SessionID    string          `json:"session_id"`
	Subtype      string          `json:"subtype"`
	IsError      bool            `json:"is_error"`
	Result       string          `json:"result,omitempty"`
	NumTurns     int             `json:"num_turns"`
	DurationMS   int64           `json:"duration_ms"`
	TotalCostUSD float64         `json:"total_cost_usd"`
	Usage        json.RawMessage `json:"usage,omitempty"`
	// TurnCostUSD is what this turn cost, when the agent reports a cost
	// (extension); TotalCostUSD is the agent process's running total.
	TurnCostUSD float64 `json:"turn_cost_usd"`
	// SessionUsage is the session's usage over all its turns, this one
	// included (extension).
	SessionUsage *UsageTotals `json:"session_usage,omitempty"`
}

// UsageTotals counts what a session's turns used (extension).
type UsageTotals struct {
	Turns                    int64   `json:"turns"`
	InputTokens              int64   `json:"input_tokens"`
	OutputTokens             int64   `json:"output_tokens"`
	CacheReadInputTokens     int64   `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64   `json:"cache_creation_input_tokens"`
	CostUSD                  float64 `json:"cost_usd"`
}

// Notification is the payload of "notification".
type Notification struct {
	NotificationID   string         `json:"notification_id"`
	SessionID        string         `json:"session_id"`
	NotificationType string         `json:"notification_type"`
	Title            string         `json:"title"`
	Body             string         `json:"body"`
	Priority         string         `json:"priority"`
	Data             map[string]any `json:"data"`
}

// NotificationAck is the payload of "notification_ack".
type NotificationAck struct {
	NotificationIDs []string `json:"notification_ids"`
}

// ReplayGap tells a client that events it asked for were pruned (extension).
type ReplayGap struct {
	RequestedAfter int64 `json:"requested_after"`
	OldestSeq      int64 `json:"oldest_seq"`
}

// File and git message types.
const (
	TypeFileList          = "file_list"
	TypeFileListResponse  = "file_list_response"
	TypeFileRead          = "file_read"
	TypeFileReadResponse  = "file_read_response"
	TypeGitStatusRequest  = "git_status_request"
	TypeGitStatusResponse = "git_status_response"
	TypeGitDiff           = "git_diff"
	TypeGitDiffResponse   = "git_diff_response"
	TypeGitCommit         = "git_commit"
	TypeGitCommitResponse = "git_commit_response" // extension
)

// ClaudeEvent is the payload of "claude_event": one hook event of a Claude
// Code session observed through its hooks.
type ClaudeEvent struct {
	EventType string         `json:"event_type"`
	SessionID string         `json:"session_id"`
	Timestamp string         `json:"timestamp"`
	Payload   map[string]any `json:"payload"`
}
