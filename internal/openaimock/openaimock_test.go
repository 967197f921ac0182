package openaimock

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestStreamedReply(t *testing.T) {
	t.Parallel()
	s := New(t, Queue(Reply{Items: []Item{Text("Hello ünïcödé, in deltas."), Command("echo hi"), Patch("*** Begin Patch\n*** End Patch\n"),
		ToolSearch("run tools"), NamespacedCall("mcp__tether", "receive_messages", map[string]any{})}}))
	body := `{"model":"gpt-5.5","stream":true,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},
		{"type":"function_call_output","call_id":"c1","output":"Output:\nok"}]}`
	resp, err := http.Post(s.URL+"/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	var names []string
	var text strings.Builder
	var items []map[string]any
	sc := bufio.NewScanner(resp.Body)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
			names = append(names, name)
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil || d["type"] != name {
				t.Fatalf("event %s data %s: %v", name, line, err)
			}
			if name == "response.output_text.delta" {
				text.WriteString(d["delta"].(string))
			}
			if name == "response.output_item.done" {
				items = append(items, d["item"].(map[string]any))
			}
		}
	}
	if text.String() != "Hello ünïcödé, in deltas." || names[0] != "response.created" || names[len(names)-1] != "response.completed" {
		t.Errorf("events %v, text %q", names, text.String())
	}
	if len(items) != 5 || items[1]["name"] != "exec_command" || items[1]["arguments"] != `{"cmd":"echo hi"}` ||
		items[2]["type"] != "custom_tool_call" || items[2]["call_id"] == items[1]["call_id"] ||
		items[3]["type"] != "tool_search_call" || items[3]["execution"] != "client" || items[3]["arguments"].(map[string]any)["query"] != "run tools" ||
		items[4]["namespace"] != "mcp__tether" || items[4]["name"] != "receive_messages" || items[4]["arguments"] != "{}" {
		t.Errorf("items %v", items)
	}
	r := s.Requests()
	if len(r) != 1 || !r[0].HasText("user", "hi") || r[0].Outputs()["c1"] != "Output:\nok" || r[0].Model != "gpt-5.5" || !r[0].Stream {
		t.Errorf("recorded %+v", r)
	}
	if q := Queue()(&Request{}); q.Items[0].text != "openaimock: no scripted reply left" {
		t.Errorf("empty queue answers %+v", q)
	}
}

func TestMalformedAndUnknownRequests(t *testing.T) {
	t.Parallel()
	s := New(t, Queue())
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{http.MethodPost, "/responses", `{"input":"not a list"}`, http.StatusBadRequest},
		{http.MethodPost, "/responses", `not json`, http.StatusBadRequest},
		{http.MethodGet, "/responses", ``, http.StatusNotFound},
		{http.MethodGet, "/models", ``, http.StatusNotFound},
	} {
		req, _ := http.NewRequest(c.method, s.URL+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s %q: %d, want %d", c.method, c.path, c.body, resp.StatusCode, c.status)
		}
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("recorded %d requests", n)
	}
}

func TestChunks(t *testing.T) {
	t.Parallel()
	if got := chunks("äbcdé", 2); strings.Join(got, "|") != "äb|cd|é" {
		t.Errorf("chunks = %q", got)
	}
}
