package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Payloads as the real Claude Code CLI 2.1.197 sends them
// (claude-code-observed.md), plus the events it did not fire there, built
// from claude-code-facts.md.
var payloads = map[string]string{
	EventSessionStart:      `{"session_id":"ee51c516-c9eb-4476-99e2-697f6332a2a4","transcript_path":"/home/dev/.claude/projects/-home-dev-project/ee51c516-c9eb-4476-99e2-697f6332a2a4.jsonl","cwd":"/home/dev/project","hook_event_name":"SessionStart","source":"startup"}`,
	EventUserPromptSubmit:  `{"session_id":"ee51c516-c9eb-4476-99e2-697f6332a2a4","transcript_path":"/home/dev/.claude/projects/-home-dev-project/ee51c516-c9eb-4476-99e2-697f6332a2a4.jsonl","cwd":"/home/dev/project","prompt_id":"0176ea6b-60b1-4739-a3a3-ee077c1448d1","permission_mode":"default","hook_event_name":"UserPromptSubmit","prompt":"please run the command"}`,
	EventPreToolUse:        `{"session_id":"ee51c516-c9eb-4476-99e2-697f6332a2a4","transcript_path":"/home/dev/.claude/projects/-home-dev-project/ee51c516-c9eb-4476-99e2-697f6332a2a4.jsonl","cwd":"/home/dev/project","prompt_id":"0176ea6b-60b1-4739-a3a3-ee077c1448d1","permission_mode":"default","effort":{"level":"high"},"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"echo hello-from-tool > out.txt","description":"Write marker file"},"tool_use_id":"toolu_icrp79oqvzr"}`,
	EventPermissionRequest: `{"session_id":"ee51c516-c9eb-4476-99e2-697f6332a2a4","transcript_path":"/home/dev/.claude/projects/-home-dev-project/ee51c516-c9eb-4476-99e2-697f6332a2a4.jsonl","cwd":"/home/dev/project","prompt_id":"0176ea6b-60b1-4739-a3a3-ee077c1448d1","permission_mode":"default","effort":{"level":"high"},"hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"echo hello-from-tool > out.txt","description":"Write marker file"},"permission_suggestions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"echo hello-from-tool *"}],"behavior":"allow","destination":"localSettings"},{"type":"addDirectories","directories":["/home/dev/project"],"destination":"session"}]}`,
	EventPostToolUse:       `{"session_id":"ee51c516-c9eb-4476-99e2-697f6332a2a4","transcript_path":"/home/dev/.claude/projects/-home-dev-project/ee51c516-c9eb-4476-99e2-697f6332a2a4.jsonl","cwd":"/home/dev/project","prompt_id":"0176ea6b-60b1-4739-a3a3-ee077c1448d1","permission_mode":"default","effort":{"level":"high"},"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"echo hello-from-tool > out.txt","description":"Write marker file"},"tool_response":{"stdout":"","stderr":"","interrupted":false,"isImage":false,"noOutputExpected":false},"tool_use_id":"toolu_icrp79oqvzr","duration_ms":42}`,
	EventStop:              `{"session_id":"ee51c516-c9eb-4476-99e2-697f6332a2a4","transcript_path":"/home/dev/.claude/projects/-home-dev-project/ee51c516-c9eb-4476-99e2-697f6332a2a4.jsonl","cwd":"/home/dev/project","prompt_id":"0176ea6b-60b1-4739-a3a3-ee077c1448d1","permission_mode":"default","effort":{"level":"high"},"hook_event_name":"Stop","stop_hook_active":false,"last_assistant_message":"done","background_tasks":[],"session_crons":[]}`,
	EventSessionEnd:        `{"session_id":"ee51c516-c9eb-4476-99e2-697f6332a2a4","transcript_path":"/home/dev/.claude/projects/-home-dev-project/ee51c516-c9eb-4476-99e2-697f6332a2a4.jsonl","cwd":"/home/dev/project","prompt_id":"0176ea6b-60b1-4739-a3a3-ee077c1448d1","hook_event_name":"SessionEnd","reason":"other"}`,
	EventNotification:      `{"session_id":"s1","transcript_path":"/t.jsonl","cwd":"/home/dev/project","permission_mode":"default","hook_event_name":"Notification","message":"Claude needs your permission to use Bash","notification_type":"permission_prompt"}`,
	EventSubagentStop:      `{"session_id":"s1","transcript_path":"/t.jsonl","cwd":"/home/dev/project","permission_mode":"default","hook_event_name":"SubagentStop","stop_hook_active":false}`,
	EventPreCompact:        `{"session_id":"s1","transcript_path":"/t.jsonl","cwd":"/home/dev/project","permission_mode":"default","hook_event_name":"PreCompact","trigger":"auto","custom_instructions":""}`,
}

// fakeBroker records events and answers questions from a function.
type fakeBroker struct {
	mu       sync.Mutex
	observed []Event
	asked    []Event
	// ask answers a question; nil answers DecisionNone.
	ask        func(ctx context.Context, ev Event) (Answer, error)
	observeErr error
}

func (f *fakeBroker) Observe(_ context.Context, ev Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observed = append(f.observed, ev)
	return f.observeErr
}

func (f *fakeBroker) Ask(ctx context.Context, ev Event) (Answer, error) {
	f.mu.Lock()
	f.asked = append(f.asked, ev)
	ask := f.ask
	f.mu.Unlock()
	if ask == nil {
		return Answer{}, nil
	}
	return ask(ctx, ev)
}

func (f *fakeBroker) counts() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.observed), len(f.asked)
}

// newServer serves s on a loopback httptest server.
func newServer(t *testing.T, b Broker, mod func(*Server)) *httptest.Server {
	t.Helper()
	s := &Server{Broker: b, Token: testToken, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(s)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

func post(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEveryEventIsAcceptedAndObserved(t *testing.T) {
	t.Parallel()
	for name, body := range payloads {
		t.Run(name, func(t *testing.T) {
			fb := &fakeBroker{}
			ts := newServer(t, fb, nil)
			status, resp := post(t, ts.URL+Path, testToken, body)
			if status != http.StatusOK || resp != "{}\n" {
				t.Fatalf("%d %q", status, resp)
			}
			obs, asked := fb.counts()
			wantAsked := 0
			if name == EventPreToolUse || name == EventPermissionRequest {
				wantAsked = 1
			}
			if obs != 1 || asked != wantAsked {
				t.Fatalf("observed %d, asked %d", obs, asked)
			}
			ev := fb.observed[0]
			if ev.Name != name || ev.SessionID == "" || ev.Cwd != "/home/dev/project" || string(ev.Raw) != body {
				t.Fatalf("event = %+v", ev)
			}
			if toolEvents[name] && (ev.ToolName != "Bash" || !strings.Contains(string(ev.ToolInput), "hello-from-tool")) {
				t.Fatalf("tool event = %+v", ev)
			}
			if name == EventPostToolUse && (ev.ToolUseID != "toolu_icrp79oqvzr" || !strings.Contains(string(ev.ToolResponse), "stdout")) {
				t.Fatalf("PostToolUse = %+v", ev)
			}
			if name == EventPreToolUse && (ev.PermissionMode != "default" || !strings.HasSuffix(ev.TranscriptPath, ".jsonl")) {
				t.Fatalf("PreToolUse = %+v", ev)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	pre := payloads[EventPreToolUse]
	cases := []struct {
		name   string
		method string
		auth   string
		body   string
		status int
		code   string
	}{
		{"no token", "POST", "", pre, 401, CodeUnauthorized},
		{"wrong token", "POST", "Bearer " + strings.Repeat("0", 64), pre, 401, CodeUnauthorized},
		{"token prefix", "POST", "Bearer " + testToken[:63], pre, 401, CodeUnauthorized},
		{"basic scheme", "POST", "Basic " + testToken, pre, 401, CodeUnauthorized},
		{"GET", "GET", "Bearer " + testToken, "", 405, CodeMethodNotAllowed},
		{"PUT", "PUT", "Bearer " + testToken, pre, 405, CodeMethodNotAllowed},
		{"too large", "POST", "Bearer " + testToken, `{"x":"` + strings.Repeat("a", MaxBody) + `"}`, 413, CodeTooLarge},
		{"empty", "POST", "Bearer " + testToken, "", 400, CodeInvalidJSON},
		{"not json", "POST", "Bearer " + testToken, "hello", 400, CodeInvalidJSON},
		{"array", "POST", "Bearer " + testToken, `[` + pre + `]`, 400, CodeInvalidJSON},
		{"null", "POST", "Bearer " + testToken, `null`, 400, CodeInvalidJSON},
		{"truncated", "POST", "Bearer " + testToken, pre[:len(pre)-1], 400, CodeInvalidJSON},
		{"trailing data", "POST", "Bearer " + testToken, pre + `{}`, 400, CodeInvalidJSON},
		{"session_id a number", "POST", "Bearer " + testToken, `{"session_id":1,"hook_event_name":"Stop"}`, 400, CodeInvalidJSON},
		{"tool_name an object", "POST", "Bearer " + testToken, `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":{}}`, 400, CodeInvalidJSON},
		{"no event name", "POST", "Bearer " + testToken, `{"session_id":"s"}`, 400, CodeMissingField},
		{"no session", "POST", "Bearer " + testToken, `{"hook_event_name":"Stop"}`, 400, CodeMissingField},
		{"PreToolUse without tool", "POST", "Bearer " + testToken, `{"session_id":"s","hook_event_name":"PreToolUse"}`, 400, CodeMissingField},
		{"PermissionRequest without tool", "POST", "Bearer " + testToken, `{"session_id":"s","hook_event_name":"PermissionRequest","tool_input":{}}`, 400, CodeMissingField},
		{"PostToolUse without tool", "POST", "Bearer " + testToken, `{"session_id":"s","hook_event_name":"PostToolUse"}`, 400, CodeMissingField},
		{"unknown event", "POST", "Bearer " + testToken, `{"session_id":"s","hook_event_name":"PostLunch"}`, 400, CodeUnknownEvent},
		{"event in lower case", "POST", "Bearer " + testToken, `{"session_id":"s","hook_event_name":"pretooluse","tool_name":"Bash"}`, 400, CodeUnknownEvent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fb := &fakeBroker{}
			ts := newServer(t, fb, nil)
			req, _ := http.NewRequest(c.method, ts.URL+Path, strings.NewReader(c.body))
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e errorBody
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("error body: %v", err)
			}
			if resp.StatusCode != c.status || e.Error.Code != c.code || e.Error.Message == "" || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("%d %+v", resp.StatusCode, e)
			}
			if obs, _ := fb.counts(); obs != 0 {
				t.Fatal("a refused request reached the broker")
			}
		})
	}
}

func TestEmptyTokenRefusesEverything(t *testing.T) {
	t.Parallel()
	ts := newServer(t, &fakeBroker{}, func(s *Server) { s.Token = "" })
	req, _ := http.NewRequest(http.MethodPost, ts.URL+Path, strings.NewReader(payloads[EventStop]))
	req.Header.Set("Authorization", "Bearer ")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestPeerAddress(t *testing.T) {
	t.Parallel()
	cases := []struct {
		remote string
		allow  []string
		ok     bool
	}{
		{"127.0.0.1:5000", nil, true},
		{"127.8.9.10:5000", nil, true},
		{"[::1]:5000", nil, true},
		{"[::ffff:127.0.0.1]:5000", nil, true},
		{"192.168.1.20:5000", nil, false},
		{"[fd7a:115c:a1e0::1]:5000", nil, false},
		{"192.168.1.20:5000", []string{"192.168.1.0/24"}, true},
		{"192.168.2.20:5000", []string{"192.168.1.0/24"}, false},
		{"127.0.0.1:5000", []string{"192.168.1.0/24"}, false},
		{"100.101.102.103:5000", []string{"100.64.0.0/10", "127.0.0.1/32"}, true},
		{"not an address", nil, false},
	}
	for _, c := range cases {
		s := &Server{Broker: &fakeBroker{}, Token: testToken, Logger: slog.New(slog.DiscardHandler)}
		for _, p := range c.allow {
			s.AllowFrom = append(s.AllowFrom, netip.MustParsePrefix(p))
		}
		req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(payloads[EventStop]))
		req.RemoteAddr = c.remote
		req.Header.Set("Authorization", "Bearer "+testToken)
		// A forwarding header never counts.
		req.Header.Set("X-Forwarded-For", "127.0.0.1")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if got := rec.Code == http.StatusOK; got != c.ok || (!c.ok && rec.Code != http.StatusForbidden) {
			t.Errorf("%s allow %v: %d %s", c.remote, c.allow, rec.Code, rec.Body)
		}
	}
}

func TestDecisions(t *testing.T) {
	t.Parallel()
	upd := json.RawMessage(`{"command":"echo edited > out.txt"}`)
	cases := []struct {
		event string
		ans   Answer
		want  string
	}{
		{EventPreToolUse, Answer{}, `{}`},
		{EventPreToolUse, Answer{Decision: DecisionAllow}, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}`},
		{EventPreToolUse, Answer{Decision: DecisionAllow, UpdatedInput: upd}, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"echo edited > out.txt"}}}`},
		{EventPreToolUse, Answer{Decision: DecisionDeny, Reason: "not on a Friday"}, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"not on a Friday"}}`},
		{EventPreToolUse, Answer{Decision: DecisionAsk, Reason: "no phone"}, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"no phone"}}`},
		{EventPermissionRequest, Answer{}, `{}`},
		{EventPermissionRequest, Answer{Decision: DecisionAllow}, `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}`},
		{EventPermissionRequest, Answer{Decision: DecisionAllow, UpdatedInput: upd}, `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedInput":{"command":"echo edited > out.txt"}}}}`},
		{EventPermissionRequest, Answer{Decision: DecisionDeny, Reason: "rejected on the phone"}, `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"rejected on the phone"}}}`},
		{EventPermissionRequest, Answer{Decision: DecisionAsk, Reason: "no phone"}, `{}`},
		// Answers that cannot be expressed fail open.
		{EventPreToolUse, Answer{Decision: "maybe"}, `{}`},
		{EventPreToolUse, Answer{Decision: DecisionDeny, UpdatedInput: upd}, `{}`},
		{EventPermissionRequest, Answer{Decision: DecisionAllow, UpdatedInput: json.RawMessage(`[1]`)}, `{}`},
		{EventPermissionRequest, Answer{Decision: DecisionAllow, UpdatedInput: json.RawMessage(`{"a":`)}, `{}`},
	}
	for _, c := range cases {
		t.Run(c.event+"/"+string(c.ans.Decision), func(t *testing.T) {
			fb := &fakeBroker{ask: func(context.Context, Event) (Answer, error) { return c.ans, nil }}
			ts := newServer(t, fb, nil)
			status, resp := post(t, ts.URL+Path, testToken, payloads[c.event])
			if status != http.StatusOK || strings.TrimSpace(resp) != c.want {
				t.Fatalf("%d %s\nwant %s", status, resp, c.want)
			}
		})
	}
}

func TestBrokerFailuresFailOpen(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	cases := []struct {
		name string
		fb   *fakeBroker
	}{
		{"observe fails", &fakeBroker{observeErr: errors.New("disk full"), ask: func(context.Context, Event) (Answer, error) {
			return Answer{Decision: DecisionDeny}, nil
		}}},
		{"ask fails", &fakeBroker{ask: func(context.Context, Event) (Answer, error) {
			return Answer{Decision: DecisionDeny}, errors.New("store: locked")
		}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logs.Reset()
			ts := newServer(t, c.fb, func(s *Server) { s.Logger = logger })
			status, resp := post(t, ts.URL+Path, testToken, payloads[EventPreToolUse])
			if status != http.StatusOK || resp != "{}\n" {
				t.Fatalf("%d %q", status, resp)
			}
			if !strings.Contains(logs.String(), "level=WARN") || strings.Contains(resp, "locked") {
				t.Fatalf("log %q, answer %q", logs.String(), resp)
			}
		})
	}
}

func TestWaitRunsOutToAsk(t *testing.T) {
	t.Parallel()
	held := make(chan time.Duration, 1)
	fb := &fakeBroker{ask: func(ctx context.Context, ev Event) (Answer, error) {
		start := time.Now()
		<-ctx.Done()
		held <- time.Since(start)
		return Answer{}, ctx.Err()
	}}
	ts := newServer(t, fb, func(s *Server) { s.Wait = 150 * time.Millisecond })
	for _, c := range []struct{ event, want string }{
		{EventPreToolUse, `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"no answer from the phone"}}`},
		{EventPermissionRequest, `{}`},
	} {
		status, resp := post(t, ts.URL+Path, testToken, payloads[c.event])
		if d := <-held; status != http.StatusOK || strings.TrimSpace(resp) != c.want || d < 150*time.Millisecond {
			t.Fatalf("%s: %d %s after %v", c.event, status, resp, d)
		}
	}
}

func TestClaudeGivingUpCancelsTheQuestion(t *testing.T) {
	t.Parallel()
	asked := make(chan struct{})
	cancelled := make(chan error, 1)
	fb := &fakeBroker{ask: func(ctx context.Context, ev Event) (Answer, error) {
		close(asked)
		<-ctx.Done()
		cancelled <- ctx.Err()
		return Answer{}, ctx.Err()
	}}
	ts := newServer(t, fb, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+Path, strings.NewReader(payloads[EventPermissionRequest]))
	req.Header.Set("Authorization", "Bearer "+testToken)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-asked
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("request: %v", err)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Ask's context ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Ask was not cancelled when the hook's request went away")
	}
}

func TestAnswerWhileHeld(t *testing.T) {
	t.Parallel()
	answer := make(chan Answer)
	fb := &fakeBroker{ask: func(ctx context.Context, ev Event) (Answer, error) {
		select {
		case a := <-answer:
			return a, nil
		case <-ctx.Done():
			return Answer{}, ctx.Err()
		}
	}}
	ts := newServer(t, fb, nil)
	type result struct {
		status int
		body   string
	}
	res := make(chan result, 1)
	go func() {
		s, b := post(t, ts.URL+Path, testToken, payloads[EventPreToolUse])
		res <- result{s, b}
	}()
	select {
	case r := <-res:
		t.Fatalf("answered before the phone did: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	answer <- Answer{Decision: DecisionDeny, Reason: "nope"}
	r := <-res
	if r.status != 200 || !strings.Contains(r.body, `"permissionDecision":"deny"`) || !strings.Contains(r.body, "nope") {
		t.Fatalf("%+v", r)
	}
}
