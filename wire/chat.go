package wire

import "encoding/json"

// Chat message types: the user's messages, the agent's streamed answer,
// its tool calls and the end of its turn.
const (
	TypeMessage       = "message"
	TypeUserMessage   = "user_message" // extension
	TypeStreamStart   = "stream_start"
	TypeStreamChunk   = "stream_chunk"
	TypeStreamEnd     = "stream_end"
	TypeThinkingChunk = "thinking_chunk" // extension
	TypeToolCall      = "tool_call"
	TypeToolResult    = "tool_result"
	TypeTurnComplete  = "turn_complete" // extension
	TypeInterrupt     = "interrupt"     // extension
)

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
