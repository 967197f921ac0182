package history

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/wire"
)

// A Codex rollout (docs/codex-observed.md) is JSON Lines, each line
// {timestamp, type, payload}: session_meta first (payload.id, payload.cwd),
// then the conversation as response_item lines (payload.type message with
// role and content blocks, function_call with name, arguments and call_id,
// function_call_output with call_id and output, and their custom_tool_call
// kin) and event_msg lines. The prompt as typed is read from an event_msg:
// item_completed of an item of type UserMessage (observed, Codex 0.169.0,
// testdata/rollout.jsonl), or user_message (earlier versions): the user
// response_items also carry the context Codex adds (<environment_context>
// and the like).

// codexLine is what the history reads of a rollout line.
type codexLine struct {
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Payload   struct {
		Type    string       `json:"type"`
		ID      string       `json:"id"`
		Cwd     string       `json:"cwd"`
		Role    string       `json:"role"`
		Message string       `json:"message"`
		Content []codexBlock `json:"content"`
		Item    *struct {
			Type    string       `json:"type"`
			ID      string       `json:"id"`
			Content []codexBlock `json:"content"`
		} `json:"item"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Input     json.RawMessage `json:"input"`
		CallID    string          `json:"call_id"`
		Output    json.RawMessage `json:"output"`
	} `json:"payload"`
}

type codexBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// prompt is the text of a line that is a prompt as typed; ok is false for
// any other line.
func (l *codexLine) prompt() (text string, ok bool) {
	p := &l.Payload
	switch {
	case l.Type != "event_msg":
		return "", false
	case p.Type == "user_message":
		return p.Message, true
	case p.Type == "item_completed" && p.Item != nil && p.Item.Type == "UserMessage":
		var texts []string
		for _, b := range p.Item.Content {
			if b.Type == "text" {
				texts = append(texts, b.Text)
			}
		}
		return strings.Join(texts, "\n"), true
	}
	return "", false
}

var (
	codexItem  = []byte(`"type":"response_item"`)
	codexEvent = []byte(`"type":"event_msg"`)
	codexMeta  = []byte(`"type":"session_meta"`)
	codexUser  = []byte(`"type":"user_message"`)
	codexTyped = []byte(`"type":"UserMessage"`)
)

// scanCodex reads a rollout's lines from offset from into s.
func scanCodex(r io.Reader, from int64, s *summary) (int64, error) {
	end, overlong, err := eachLine(r, from, func(line []byte, _ int64) bool {
		if len(bytes.TrimSpace(line)) == 0 {
			return true
		}
		item, event, meta := bytes.Contains(line, codexItem), bytes.Contains(line, codexEvent) && (bytes.Contains(line, codexUser) || bytes.Contains(line, codexTyped)), bytes.Contains(line, codexMeta)
		if !item && !event && !meta {
			if line[0] != '{' {
				s.malformed++
			}
			return true
		}
		var l codexLine
		if json.Unmarshal(line, &l) != nil {
			s.malformed++
			return true
		}
		if t, err := time.Parse(time.RFC3339Nano, l.Timestamp); err == nil {
			if s.started.IsZero() {
				s.started = t
			}
			s.last = t
		}
		switch {
		case l.Type == "session_meta" && s.cwd == "" && filepath.IsAbs(l.Payload.Cwd):
			s.cwd = filepath.Clean(l.Payload.Cwd)
		case l.Type == "event_msg":
			if text, ok := l.prompt(); ok {
				s.addPrompt(text)
				s.messages++
			}
		case l.Type == "response_item" && codexShown(&l):
			s.messages++
		}
		return true
	})
	s.overlong += overlong
	return end, err
}

// codexShown reports whether a response_item is part of the conversation
// as a live session shows it (the user's messages count through their
// user_message event instead).
func codexShown(l *codexLine) bool {
	switch l.Payload.Type {
	case "message":
		return l.Payload.Role == "assistant"
	case "function_call", "custom_tool_call", "function_call_output", "custom_tool_call_output":
		return true
	}
	return false
}

// codexEvents renders a rollout line as the events of a live session;
// at, the line's offset, names the messages that have no id of their own.
func codexEvents(historyID string, l *codexLine, at int64) []session.Entry {
	p := &l.Payload
	msgID := "codex-" + strconv.FormatInt(at, 10)
	if p.ID != "" {
		msgID = p.ID
	}
	if text, ok := l.prompt(); ok {
		if p.Item != nil && p.Item.ID != "" {
			msgID = p.Item.ID
		}
		return []session.Entry{{SessionID: historyID, Type: wire.TypeUserMessage, Payload: wire.UserMessage{SessionID: historyID, MessageID: msgID, Content: text, DeviceName: "terminal"}}}
	}
	switch {
	case l.Type != "response_item":
		return nil
	case p.Type == "message" && p.Role == "assistant":
		var text []string
		for _, b := range p.Content {
			if b.Type == "output_text" {
				text = append(text, b.Text)
			}
		}
		if strings.TrimSpace(strings.Join(text, "")) == "" {
			return nil
		}
		return []session.Entry{
			{SessionID: historyID, Type: wire.TypeStreamStart, Payload: wire.StreamStart{SessionID: historyID, MessageID: msgID}},
			{SessionID: historyID, Type: wire.TypeStreamChunk, Payload: wire.StreamChunk{SessionID: historyID, MessageID: msgID, Content: strings.Join(text, "\n")}},
			{SessionID: historyID, Type: wire.TypeStreamEnd, Payload: wire.StreamEnd{SessionID: historyID, MessageID: msgID, FinishReason: "stop"}},
		}
	case (p.Type == "function_call" || p.Type == "custom_tool_call") && p.CallID != "":
		params := p.Input
		if p.Type == "function_call" {
			params = json.RawMessage(p.Arguments)
		}
		if !json.Valid(params) || len(bytes.TrimSpace(params)) == 0 || bytes.TrimSpace(params)[0] != '{' {
			raw, _ := json.Marshal(map[string]any{"input": string(params)})
			params = raw
		}
		return []session.Entry{{SessionID: historyID, Type: wire.TypeToolCall, ID: "call-" + p.CallID, Payload: wire.ToolCall{
			SessionID: historyID, ToolCallID: p.CallID, Tool: p.Name, Params: params}}}
	case (p.Type == "function_call_output" || p.Type == "custom_tool_call_output") && p.CallID != "":
		var out string
		if json.Unmarshal(p.Output, &out) != nil {
			out = string(p.Output)
		}
		return []session.Entry{{SessionID: historyID, Type: wire.TypeToolResult, ID: "result-" + p.CallID, Payload: wire.ToolResult{
			SessionID: historyID, ToolCallID: p.CallID, Result: wire.ToolResultBody{Success: true, Content: out}}}}
	}
	return nil
}

// codexPage is claudePage for a rollout.
func codexPage(historyID string, r io.ReaderAt, size, before int64, limit int, modTime time.Time) (frames []json.RawMessage, from int64, more bool, err error) {
	return page(r, size, before, limit, modTime, func(raw []byte, at int64) ([]session.Entry, time.Time) {
		if !bytes.Contains(raw, codexItem) && !bytes.Contains(raw, codexEvent) {
			return nil, time.Time{}
		}
		var l codexLine
		if json.Unmarshal(raw, &l) != nil {
			return nil, time.Time{}
		}
		t, _ := time.Parse(time.RFC3339Nano, l.Timestamp)
		return codexEvents(historyID, &l, at), t
	})
}
