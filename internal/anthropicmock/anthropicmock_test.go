package anthropicmock

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// sseEvent is one server-sent event as a client reads it.
type sseEvent struct {
	name string
	data map[string]any
}

// readSSE parses a text/event-stream body, checking that each event's name
// matches its data's type.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var (
		out  []sseEvent
		name string
	)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var data map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data); err != nil {
				t.Fatalf("event %s: data is not JSON: %v", name, err)
			}
			if data["type"] != name {
				t.Errorf("event %q carries data of type %v", name, data["type"])
			}
			out = append(out, sseEvent{name: name, data: data})
		case line == "":
		default:
			t.Errorf("unexpected stream line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const toolRequest = `{"model":"claude-test","stream":%v,"max_tokens":100,
	"system":[{"type":"text","text":"be brief"}],
	"tools":[{"name":"Bash","input_schema":{}}],
	"messages":[{"role":"user","content":"run it"}]}`

func toolReply() Reply {
	return Reply{Blocks: []Block{
		Text("Running ünïcödé text — over several deltas."),
		ToolUse("Bash", map[string]string{"command": "echo a > b && cat b", "description": "d"}),
	}}
}

func TestStreamedReply(t *testing.T) {
	t.Parallel()
	s := New(t, Queue(toolReply()))
	resp := post(t, s.URL+"/v1/messages?beta=true", fmt.Sprintf(toolRequest, true))
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	events := readSSE(t, resp.Body)

	var names []string
	text := map[float64]string{}
	for _, e := range events {
		if len(names) == 0 || names[len(names)-1] != e.name {
			names = append(names, e.name)
		}
		if e.name == "content_block_delta" {
			d := e.data["delta"].(map[string]any)
			idx := e.data["index"].(float64)
			switch d["type"] {
			case "text_delta":
				text[idx] += d["text"].(string)
			case "input_json_delta":
				text[idx] += d["partial_json"].(string)
			default:
				t.Errorf("delta type %v", d["type"])
			}
		}
	}
	want := []string{"message_start", "ping",
		"content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("event sequence = %v, want %v", names, want)
	}
	if got := text[0]; got != "Running ünïcödé text — over several deltas." {
		t.Errorf("text deltas join to %q", got)
	}
	if got := text[1]; got != `{"command":"echo a > b && cat b","description":"d"}` {
		t.Errorf("input_json deltas join to %q", got)
	}
	start := events[0].data["message"].(map[string]any)
	if start["model"] != "claude-test" || start["role"] != "assistant" || start["stop_reason"] != nil {
		t.Errorf("message_start message = %v", start)
	}
	var starts []map[string]any
	for _, e := range events {
		if e.name == "content_block_start" {
			starts = append(starts, e.data["content_block"].(map[string]any))
		}
	}
	if len(starts) != 2 || starts[0]["type"] != "text" || starts[0]["text"] != "" {
		t.Fatalf("content_block_start blocks = %v", starts)
	}
	tool := starts[1]
	if tool["type"] != "tool_use" || tool["name"] != "Bash" || !strings.HasPrefix(tool["id"].(string), "toolu_") {
		t.Errorf("tool_use content_block_start = %v", tool)
	}
	md := events[len(events)-2].data["delta"].(map[string]any)
	if md["stop_reason"] != "tool_use" {
		t.Errorf("stop_reason = %v, want tool_use", md["stop_reason"])
	}

	reqs := s.MessageRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d recorded message requests", len(reqs))
	}
	r := reqs[0]
	if r.RawQuery != "beta=true" || r.Model != "claude-test" || !r.Stream || !r.HasText("user", "run it") ||
		len(r.Tools) != 1 || r.Tools[0] != "Bash" || !strings.Contains(string(r.System), "be brief") {
		t.Errorf("recorded request = %+v", r)
	}
}

func TestPlainReply(t *testing.T) {
	t.Parallel()
	s := New(t, Queue(toolReply()))
	resp := post(t, s.URL+"/v1/messages", fmt.Sprintf(toolRequest, false))
	var msg struct {
		Type       string `json:"type"`
		Role       string `json:"role"`
		StopReason string `json:"stop_reason"`
		Content    []Block
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.Role != "assistant" || msg.StopReason != "tool_use" || len(msg.Content) != 2 ||
		msg.Content[0].Text != toolReply().Blocks[0].Text || msg.Content[1].Name != "Bash" || msg.Content[1].ID == "" {
		t.Errorf("reply = %+v", msg)
	}
}

// logTB records what the mock logs.
type logTB struct {
	testing.TB
	mu   sync.Mutex
	logs []string
}

func (l *logTB) Logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.logs = append(l.logs, fmt.Sprintf(format, args...))
}

func TestOtherEndpoints(t *testing.T) {
	t.Parallel()
	tb := &logTB{TB: t}
	s := New(tb, Queue())
	tests := []struct {
		method, path, body string
		status             int
		bodyHas            string
	}{
		{http.MethodHead, "/", "", http.StatusOK, ""},
		{http.MethodPost, "/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, http.StatusOK, `"input_tokens"`},
		{http.MethodPost, "/v1/messages", `{"messages":"not a list"}`, http.StatusBadRequest, "invalid_request_error"},
		{http.MethodGet, "/v1/models", "", http.StatusNotFound, "not_found_error"},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, s.URL+tt.path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.bodyHas) {
			t.Errorf("%s %s = %d %s, want %d containing %q", tt.method, tt.path, resp.StatusCode, b, tt.status, tt.bodyHas)
		}
	}
	if n := len(s.Requests()); n != len(tests) {
		t.Errorf("recorded %d requests, want %d", n, len(tests))
	}
	if n := len(s.MessageRequests()); n != 1 {
		t.Errorf("recorded %d message requests, want 1", n)
	}
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.logs) != 1 || !strings.Contains(tb.logs[0], "GET /v1/models") {
		t.Errorf("logged %q, want the unknown GET /v1/models", tb.logs)
	}
}

func TestQueue(t *testing.T) {
	t.Parallel()
	q := Queue(Reply{Blocks: []Block{Text("one")}}, Reply{Blocks: []Block{Text("two")}})
	for _, want := range []string{"one", "two", "anthropicmock: no scripted reply left"} {
		if got := q(&Request{}).Blocks[0].Text; got != want {
			t.Errorf("reply = %q, want %q", got, want)
		}
	}
}

func TestRequestHelpers(t *testing.T) {
	t.Parallel()
	r, err := ParseMessages([]byte(`{"messages":[
		{"role":"system","content":"sys"},
		{"role":"user","content":[{"type":"text","text":"go"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
		                           {"type":"tool_result","tool_use_id":"t2","content":"plain","is_error":true}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Texts("system"); len(got) != 1 || got[0] != "sys" {
		t.Errorf("system texts = %q", got)
	}
	res := r.ToolResults()
	if len(res) != 2 || res[0].ResultText() != "a\nb" || res[1].ResultText() != "plain" || !res[1].IsError {
		t.Errorf("tool results = %+v", res)
	}
	if r.LastMessage().Role != "user" || (&Request{}).LastMessage().Role != "" {
		t.Error("LastMessage wrong")
	}
	if _, err := ParseMessages([]byte(`{"messages":[{"role":"user","content":5}]}`)); err == nil {
		t.Error("numeric content parsed")
	}
}

func FuzzParseMessages(f *testing.F) {
	f.Add([]byte(fmt.Sprintf(toolRequest, true)))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}]}`))
	f.Add([]byte(`{"messages":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseMessages(body)
		if err != nil {
			return
		}
		for _, b := range r.ToolResults() {
			_ = b.ResultText()
		}
		_ = r.Texts("user")
		_ = r.LastMessage()
	})
}

func FuzzChunks(f *testing.F) {
	f.Add("hello world", 3)
	f.Add("ünïcödé", 1)
	f.Fuzz(func(t *testing.T, s string, size int) {
		if size < 1 || size > 64 {
			return
		}
		parts := chunks(s, size)
		if strings.Join(parts, "") != s {
			t.Fatalf("chunks(%q, %d) = %q do not join back", s, size, parts)
		}
		for _, p := range parts[:len(parts)-1] {
			if p == "" {
				t.Fatalf("empty chunk in %q", parts)
			}
		}
		if utf8.ValidString(s) {
			for _, p := range parts {
				if !utf8.ValidString(p) {
					t.Fatalf("chunk %q splits a rune", p)
				}
			}
		}
	})
}

func TestThinkingReply(t *testing.T) {
	t.Parallel()
	s := New(t, Queue(Reply{Blocks: []Block{Thinking("Ponder ünïcödé at length."), Text("ok")}}, Reply{Blocks: []Block{Thinking("whole")}}))
	events := readSSE(t, post(t, s.URL+"/v1/messages", fmt.Sprintf(toolRequest, true)).Body)
	var thinking, sig string
	for _, e := range events {
		switch e.name {
		case "content_block_start":
			if b := e.data["content_block"].(map[string]any); e.data["index"].(float64) == 0 && (b["type"] != "thinking" || b["thinking"] != "" || b["signature"] != "") {
				t.Errorf("thinking block start = %v", b)
			}
		case "content_block_delta":
			d := e.data["delta"].(map[string]any)
			switch d["type"] {
			case "thinking_delta":
				thinking += d["thinking"].(string)
			case "signature_delta":
				sig = d["signature"].(string)
			}
		}
	}
	if thinking != "Ponder ünïcödé at length." || sig == "" {
		t.Errorf("thinking %q, signature %q", thinking, sig)
	}
	resp := post(t, s.URL+"/v1/messages", fmt.Sprintf(toolRequest, false))
	var msg struct {
		Content []map[string]any `json:"content"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || len(msg.Content) != 1 || msg.Content[0]["thinking"] != "whole" || msg.Content[0]["signature"] == "" {
		t.Errorf("plain thinking reply = %+v, %v", msg, err)
	}
}
