package wire

// TypeClaudeEvent is the type of "claude_event", both ways.
const TypeClaudeEvent = "claude_event"

// ClaudeEvent is the payload of "claude_event": one hook event of a Claude
// Code session observed through its hooks.
type ClaudeEvent struct {
	EventType string         `json:"event_type"`
	SessionID string         `json:"session_id"`
	Timestamp string         `json:"timestamp"`
	Payload   map[string]any `json:"payload"`
}

// ClientClaudeEvent is a claude_event the ReCursor app sends to the
// server: {type: git_pull | git_push, session_id}; its terminal events
// have no counterpart here.
type ClientClaudeEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	// The terminal events' fields, accepted and refused by type.
	WorkingDirectory string `json:"working_directory"`
	Data             string `json:"data"`
}
