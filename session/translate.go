package session

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// translator turns one session's agent messages (Claude Code stream-json,
// which the demo agent speaks too) into phone events. Only what belongs to
// the conversation crosses: text, tool calls, tool results and the turn's
// result; system messages, hook chatter and the like stay in the daemon.
type translator struct {
	sessionID string
	emit      func(Entry)
	now       func() time.Time

	msgID     string          // the assistant message being streamed
	open      bool            // a stream_start was sent for msgID
	streamed  map[string]bool // messages whose text arrived as deltas
	thought   map[string]bool // messages whose thinking arrived as deltas
	stop      string          // stop_reason of msgID
	tools     map[string]toolStart
	agentSess string
	// costBase is the agent process's running cost (total_cost_usd) at
	// the end of its previous turn: a turn's cost is what the total grew
	// by. Claude Code counts per process, so a new process starts again
	// at zero.
	costBase float64
	// onMode, when set, is told each permission mode the agent reports.
	onMode func(mode string)
	// info is what the agent said of itself; infoSent the last agent_info
	// sent, encoded, and richCommands says that info's slash commands came
	// with their descriptions (Claude Code's initialize response).
	info         wire.AgentInfo
	infoSent     []byte
	richCommands bool
	// oom, when set, counts the out-of-memory kills in the session's
	// sandbox and tells its memory limit: a command killed by it is
	// reported as such, not as "exit code 137".
	oom func() (kills uint64, limit int64)
}

type toolStart struct {
	name  string
	start time.Time
	kills uint64 // the sandbox's OOM kills when the tool started
}

func newTranslator(sessionID string, emit func(Entry), now func() time.Time) *translator {
	return &translator{sessionID: sessionID, emit: emit, now: now, streamed: map[string]bool{}, thought: map[string]bool{}, tools: map[string]toolStart{}}
}

// agentMessage is the union of the stream-json fields the translator reads.
type agentMessage struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Event     *struct {
		Type    string `json:"type"`
		Message *struct {
			ID string `json:"id"`
		} `json:"message"`
		ContentBlock *struct {
			Type string `json:"type"`
		} `json:"content_block"`
		Delta *struct {
			Type       string `json:"type"`
			Text       string `json:"text"`
			Thinking   string `json:"thinking"`
			StopReason string `json:"stop_reason"`
		} `json:"delta"`
	} `json:"event"`
	Message *struct {
		ID      string         `json:"id"`
		Content []contentBlock `json:"content"`
	} `json:"message"`
	// system/init and system/status
	Model          string          `json:"model"`
	PermissionMode string          `json:"permissionMode"`
	Version        string          `json:"claude_code_version"`
	SlashCommands  json.RawMessage `json:"slash_commands"`
	// control_response
	Response json.RawMessage `json:"response"`
	// result
	IsError      bool            `json:"is_error"`
	Result       string          `json:"result"`
	NumTurns     int             `json:"num_turns"`
	DurationMS   int64           `json:"duration_ms"`
	TotalCostUSD float64         `json:"total_cost_usd"`
	Usage        json.RawMessage `json:"usage"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// handle translates one raw agent message.
func (t *translator) handle(raw json.RawMessage) {
	var m agentMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return
	}
	switch m.Type {
	case "system":
		if m.Subtype == "init" && m.SessionID != "" {
			t.agentSess = m.SessionID
		}
		if m.Subtype == "init" {
			t.init(&m)
		}
		if (m.Subtype == "init" || m.Subtype == "status") && m.PermissionMode != "" && t.onMode != nil {
			t.onMode(m.PermissionMode)
		}
	case "control_response":
		t.capabilities(m.Response)
	case "stream_event":
		t.streamEvent(&m)
	case "assistant":
		t.assistant(&m)
	case "user":
		t.user(&m)
	case "result":
		t.result(&m)
	}
}

func (t *translator) streamEvent(m *agentMessage) {
	ev := m.Event
	if ev == nil {
		return
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			t.msgID, t.open, t.stop = ev.Message.ID, false, ""
		}
	case "content_block_delta":
		switch {
		case ev.Delta == nil:
		case ev.Delta.Type == "text_delta" && ev.Delta.Text != "":
			t.streamed[t.msgID] = true
			t.chunk(t.msgID, ev.Delta.Text)
		case ev.Delta.Type == "thinking_delta" && ev.Delta.Thinking != "":
			t.thought[t.msgID] = true
			t.thinking(t.msgID, ev.Delta.Thinking)
		}
	case "message_delta":
		if ev.Delta != nil {
			t.stop = ev.Delta.StopReason
		}
	case "message_stop":
		t.end(finishReason(t.stop))
	}
}

func (t *translator) chunk(msgID, text string) {
	if !t.open || t.msgID != msgID {
		t.end("stop")
		t.msgID, t.open = msgID, true
		t.emit(Entry{SessionID: t.sessionID, Type: wire.TypeStreamStart, Payload: wire.StreamStart{SessionID: t.sessionID, MessageID: msgID}})
	}
	t.emit(Entry{SessionID: t.sessionID, Type: wire.TypeStreamChunk, Payload: wire.StreamChunk{SessionID: t.sessionID, MessageID: msgID, Content: text}})
}

// thinking passes a piece of the agent's thinking on, as its own event: a
// phone shows it apart from the answer (and folds it away).
func (t *translator) thinking(msgID, text string) {
	t.emit(Entry{SessionID: t.sessionID, Type: wire.TypeThinkingChunk, Payload: wire.ThinkingChunk{SessionID: t.sessionID, MessageID: msgID, Content: text}})
}

func (t *translator) end(reason string) {
	if !t.open {
		return
	}
	t.open = false
	t.emit(Entry{SessionID: t.sessionID, Type: wire.TypeStreamEnd, Payload: wire.StreamEnd{SessionID: t.sessionID, MessageID: t.msgID, FinishReason: reason}})
}

func finishReason(stop string) string {
	switch stop {
	case "tool_use":
		return "tool_call"
	case "max_tokens":
		return "length"
	case "", "end_turn", "stop_sequence":
		return "stop"
	default:
		return stop
	}
}

func (t *translator) assistant(m *agentMessage) {
	if m.Message == nil {
		return
	}
	id := m.Message.ID
	for _, b := range m.Message.Content {
		switch b.Type {
		case "text":
			// Without partial messages the text arrives whole, here.
			if !t.streamed[id] && b.Text != "" {
				t.chunk(id, b.Text)
			}
		case "thinking":
			if !t.thought[id] && b.Thinking != "" {
				t.thinking(id, b.Thinking)
			}
		case "tool_use":
			ts := toolStart{name: b.Name, start: t.now()}
			if t.oom != nil {
				ts.kills, _ = t.oom()
			}
			t.tools[b.ID] = ts
			params := b.Input
			if len(params) == 0 {
				params = json.RawMessage("{}")
			}
			t.emit(Entry{SessionID: t.sessionID, Type: wire.TypeToolCall, ID: "call-" + b.ID, Payload: wire.ToolCall{
				SessionID: t.sessionID, ToolCallID: b.ID, Tool: b.Name, Params: params, Description: describe(b.Name, params),
			}})
		}
	}
	if !t.streamed[id] {
		t.end("stop")
	}
}

func (t *translator) user(m *agentMessage) {
	if m.Message == nil {
		return
	}
	for _, b := range m.Message.Content {
		if b.Type != "tool_result" {
			continue
		}
		ts, ok := t.tools[b.ToolUseID]
		delete(t.tools, b.ToolUseID)
		var dur int64
		if ok {
			dur = t.now().Sub(ts.start).Milliseconds()
		}
		body := wire.ToolResultBody{Success: !b.IsError, Content: blockText(b.Content), DurationMS: dur}
		if b.IsError {
			body.Error = body.Content
		}
		if t.oom != nil && ok {
			if kills, limit := t.oom(); kills > ts.kills {
				body.Success, body.OutOfMemory, body.MemoryLimitBytes = false, true, limit
				body.Error = fmt.Sprintf("Out of memory: killed at the sandbox's memory limit of %s (--sandbox-memory-mb).", formatBytes(limit))
			}
		}
		t.emit(Entry{SessionID: t.sessionID, Type: wire.TypeToolResult, ID: "result-" + b.ToolUseID, Payload: wire.ToolResult{
			SessionID: t.sessionID, ToolCallID: b.ToolUseID, Tool: ts.name, Result: body,
		}})
	}
}

func (t *translator) result(m *agentMessage) {
	reason := "stop"
	if m.IsError {
		reason = "error"
	}
	t.end(reason)
	if m.SessionID != "" {
		t.agentSess = m.SessionID
	}
	t.streamed, t.thought = map[string]bool{}, map[string]bool{}
	cost := m.TotalCostUSD - t.costBase
	if cost < 0 {
		// The total went down: a new agent process counts from zero.
		cost = max(m.TotalCostUSD, 0)
	}
	t.costBase = m.TotalCostUSD
	t.emit(Entry{SessionID: t.sessionID, Type: wire.TypeTurnComplete, Payload: wire.TurnComplete{
		SessionID: t.sessionID, Subtype: m.Subtype, IsError: m.IsError, Result: m.Result, NumTurns: m.NumTurns,
		DurationMS: m.DurationMS, TotalCostUSD: m.TotalCostUSD, Usage: m.Usage, TurnCostUSD: cost,
	}})
}

// Bounds of what agent_info passes on of the agent's lists.
const (
	maxListed      = 500
	maxDescription = 200 // runes
)

// init reads what an agent's system/init says of it, and sends agent_info
// when that changed.
func (t *translator) init(m *agentMessage) {
	t.info.SessionID = t.sessionID
	t.info.Model, t.info.PermissionMode, t.info.Version = m.Model, m.PermissionMode, m.Version
	var names []string
	if !t.richCommands && json.Unmarshal(m.SlashCommands, &names) == nil {
		t.info.SlashCommands = nil
		for _, n := range names[:min(len(names), maxListed)] {
			t.info.SlashCommands = append(t.info.SlashCommands, wire.SlashCommand{Name: n})
		}
	}
	b, _ := json.Marshal(t.info)
	if string(b) == string(t.infoSent) {
		return
	}
	t.infoSent = b
	t.emit(Entry{SessionID: t.sessionID, Type: wire.TypeAgentInfo, Payload: t.info})
}

// capabilities reads Claude Code's answer to the initialize a new process
// is sent: the models it offers and its slash commands with their
// descriptions. A new process also counts its cost from zero.
func (t *translator) capabilities(raw json.RawMessage) {
	var outer struct {
		Response json.RawMessage `json:"response"`
	}
	_ = json.Unmarshal(raw, &outer) // an answer without a response offers no models
	var r struct {
		Models []struct {
			Value       string `json:"value"`
			DisplayName string `json:"displayName"`
			Description string `json:"description"`
		} `json:"models"`
		Commands []struct {
			Name         string `json:"name"`
			Description  string `json:"description"`
			ArgumentHint string `json:"argumentHint"`
		} `json:"commands"`
	}
	if json.Unmarshal(outer.Response, &r) != nil || r.Models == nil && r.Commands == nil {
		return
	}
	t.costBase = 0
	t.info.Models = nil
	for _, md := range r.Models[:min(len(r.Models), maxListed)] {
		t.info.Models = append(t.info.Models, wire.ModelInfo{Value: md.Value, DisplayName: md.DisplayName, Description: cut(md.Description)})
	}
	if r.Commands != nil {
		t.richCommands = true
		t.info.SlashCommands = nil
		for _, c := range r.Commands[:min(len(r.Commands), maxListed)] {
			t.info.SlashCommands = append(t.info.SlashCommands, wire.SlashCommand{Name: c.Name, Description: cut(c.Description), ArgumentHint: cut(c.ArgumentHint)})
		}
	}
}

// cut shortens s to maxDescription runes.
func cut(s string) string {
	if utf8.RuneCountInString(s) <= maxDescription {
		return s
	}
	r := []rune(s)
	return string(r[:maxDescription-1]) + "…"
}

// turnUsage reads a turn's usage (the result message's "usage", which
// Claude Code counts per turn) as one turn's share of a session's totals.
func turnUsage(tc wire.TurnComplete) store.Usage {
	var u struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	}
	_ = json.Unmarshal(tc.Usage, &u) // a turn without usage counts no tokens
	return store.Usage{Turns: 1, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadInputTokens, CacheCreationTokens: u.CacheCreationInputTokens, CostUSD: tc.TurnCostUSD}
}

// usageTotals is a session's usage as the phone sees it.
func usageTotals(u store.Usage) *wire.UsageTotals {
	return &wire.UsageTotals{Turns: u.Turns, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadInputTokens: u.CacheReadTokens, CacheCreationInputTokens: u.CacheCreationTokens, CostUSD: u.CostUSD}
}

// formatBytes writes n in the largest binary unit that keeps it whole.
func formatBytes(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// blockText reads a tool_result's content: a string, or blocks of text.
func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return string(raw)
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type == "text" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// describe is a one-line description of a tool call for the phone.
func describe(tool string, params json.RawMessage) string {
	var p struct {
		Description string `json:"description"`
		Command     string `json:"command"`
		FilePath    string `json:"file_path"`
		Pattern     string `json:"pattern"`
		URL         string `json:"url"`
	}
	_ = json.Unmarshal(params, &p) // parameters without these fields get the generic summary
	switch {
	case p.Description != "":
		return p.Description
	case p.Command != "":
		return "Run " + p.Command
	case p.FilePath != "":
		return tool + " " + p.FilePath
	case p.Pattern != "":
		return tool + " " + p.Pattern
	case p.URL != "":
		return tool + " " + p.URL
	}
	return tool
}
