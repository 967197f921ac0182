package openaimock

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Request is one POST /v1/responses the mock received.
type Request struct {
	// Model is the request's model.
	Model string
	// Stream tells whether the client asked for server-sent events.
	Stream bool
	// Input is the conversation the client sent, item by item.
	Input []InputItem
	// Body is the whole request body.
	Body []byte
	// Header is the request's headers.
	Header http.Header
}

// InputItem is one item of a request's input: a message, a tool call or a
// tool's output.
type InputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Name    string          `json:"name"`
	Output  json.RawMessage `json:"output"`
}

// ParseRequest decodes a Responses API request body.
func ParseRequest(body []byte) (*Request, error) {
	var raw struct {
		Model  string      `json:"model"`
		Stream bool        `json:"stream"`
		Input  []InputItem `json:"input"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("openaimock: request: %w", err)
	}
	return &Request{Model: raw.Model, Stream: raw.Stream, Input: raw.Input, Body: body}, nil
}

// Texts returns the text of every message of role in the input, in order.
func (r *Request) Texts(role string) []string {
	var out []string
	for _, it := range r.Input {
		if it.Type == "message" && it.Role == role {
			out = append(out, contentText(it.Content))
		}
	}
	return out
}

// HasText reports whether a message of role contains s.
func (r *Request) HasText(role, s string) bool {
	for _, t := range r.Texts(role) {
		if strings.Contains(t, s) {
			return true
		}
	}
	return false
}

// Outputs returns the output of every tool call in the input (function
// and custom tools), by call id.
func (r *Request) Outputs() map[string]string {
	out := map[string]string{}
	for _, it := range r.Input {
		if it.Type == "function_call_output" || it.Type == "custom_tool_call_output" {
			out[it.CallID] = contentText(it.Output)
		}
	}
	return out
}

// contentText reads a message's content or a tool's output: a string, or
// parts carrying text.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
