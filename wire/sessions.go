package wire

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// Session message types: starting, configuring, following and ending a
// session, and paging its logged events.
const (
	TypeSessionStart       = "session_start"
	TypeSessionReady       = "session_ready"
	TypeSessionEnd         = "session_end"
	TypeSessionStatus      = "session_status"             // extension
	TypeSessionHistory     = "session_history"            // extension
	TypeSessionHistoryResp = "session_history_response"   // extension
	TypeSessionConfigure   = "session_configure"          // extension
	TypeSessionConfigResp  = "session_configure_response" // extension
	TypeSessionSettings    = "session_settings"           // extension
	TypeAgentInfo          = "agent_info"                 // extension
	TypeTerminalHandback   = "terminal_handback"          // extension
	TypeReplayGap          = "replay_gap"                 // extension
)

// ReplayGap tells a client that events it asked for were pruned (extension).
type ReplayGap struct {
	RequestedAfter int64 `json:"requested_after"`
	OldestSeq      int64 `json:"oldest_seq"`
}

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
