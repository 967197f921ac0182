package anthropicmock

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ErrBadRequest is returned by ParseMessages for a body that is not a
// Messages API request.
var ErrBadRequest = errors.New("anthropicmock: bad messages request")

// Request is one request the mock received. The fields after Body are filled
// only for the Messages API endpoints.
type Request struct {
	// Method and Path are the HTTP method and URL path, e.g. "POST" and
	// "/v1/messages"; RawQuery is the query string without "?".
	Method, Path, RawQuery string
	// Header holds the request's headers.
	Header http.Header
	// Body is the request body as received.
	Body []byte
	// Received is when the request arrived.
	Received time.Time

	// Model is the requested model.
	Model string
	// Stream tells whether the client asked for server-sent events.
	Stream bool
	// System is the top-level system prompt, a string or an array of
	// blocks, as sent.
	System json.RawMessage
	// Messages is the conversation, with every string content normalised to
	// a single text block.
	Messages []Message
	// Tools lists the names of the tools offered to the model.
	Tools []string
}

// Message is one entry of a request's messages.
type Message struct {
	// Role is "user", "assistant" or, as Claude Code sends it, "system".
	Role string
	// Content holds the message's blocks.
	Content []Block
}

// Block is one content block of a message or of a reply.
type Block struct {
	// Type is "text", "tool_use", "tool_result", "thinking", …
	Type string `json:"type"`
	// Text is the text of a text block.
	Text string `json:"text,omitempty"`
	// Thinking is the text of a thinking block.
	Thinking string `json:"thinking,omitempty"`
	// ID and Name identify a tool_use block; Input is its input.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError belong to a tool_result block; Content
	// is a string or an array of blocks, as sent.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// Source is an image block's source ({"type":"base64",
	// "media_type":…,"data":…}), as sent.
	Source json.RawMessage `json:"source,omitempty"`
}

// ResultText returns the text of a tool_result block: its string content, or
// the texts of its text blocks joined by newlines.
func (b Block) ResultText() string {
	var s string
	if err := json.Unmarshal(b.Content, &s); err == nil {
		return s
	}
	var blocks []Block
	if err := json.Unmarshal(b.Content, &blocks); err != nil {
		return ""
	}
	texts := make([]string, 0, len(blocks))
	for _, c := range blocks {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// ParseMessages decodes the body of a Messages API request into a Request's
// Model, Stream, System, Messages and Tools.
func ParseMessages(body []byte) (*Request, error) {
	r := &Request{Body: body}
	if err := r.parse(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Request) parse() error {
	var raw struct {
		Model    string          `json:"model"`
		Stream   bool            `json:"stream"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	r.Model, r.Stream, r.System = raw.Model, raw.Stream, raw.System
	r.Messages = make([]Message, 0, len(raw.Messages))
	for i, m := range raw.Messages {
		blocks, err := parseContent(m.Content)
		if err != nil {
			return fmt.Errorf("%w: message %d: %w", ErrBadRequest, i, err)
		}
		r.Messages = append(r.Messages, Message{Role: m.Role, Content: blocks})
	}
	for _, t := range raw.Tools {
		r.Tools = append(r.Tools, t.Name)
	}
	return nil
}

func parseContent(raw json.RawMessage) ([]Block, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []Block{{Type: "text", Text: s}}, nil
	}
	var blocks []Block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, fmt.Errorf("content is neither a string nor blocks: %w", err)
	}
	return blocks, nil
}

// LastMessage returns the last entry of the conversation, or a zero Message
// when there is none.
func (r *Request) LastMessage() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}

// ToolResults returns every tool_result block in the conversation, oldest
// first.
func (r *Request) ToolResults() []Block {
	var out []Block
	for _, m := range r.Messages {
		for _, b := range m.Content {
			if b.Type == "tool_result" {
				out = append(out, b)
			}
		}
	}
	return out
}

// Texts returns the text of every text block of role's messages, oldest
// first.
func (r *Request) Texts(role string) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role != role {
			continue
		}
		for _, b := range m.Content {
			if b.Type == "text" {
				out = append(out, b.Text)
			}
		}
	}
	return out
}

// HasText tells whether any text block of role's messages contains sub.
func (r *Request) HasText(role, sub string) bool {
	for _, t := range r.Texts(role) {
		if strings.Contains(t, sub) {
			return true
		}
	}
	return false
}

func (r *Request) inputTokens() int {
	return len(r.Body)/4 + 1
}
