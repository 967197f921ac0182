package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/hooks"
	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

// hookBody is a hook body as Claude Code sends it, with extra fields.
func hookBody(sessionID, event, cwd string, extra map[string]any) string {
	b := map[string]any{
		"session_id": sessionID, "transcript_path": "/home/dev/.claude/projects/p/" + sessionID + ".jsonl",
		"cwd": cwd, "permission_mode": "default", "hook_event_name": event,
	}
	for k, v := range extra {
		b[k] = v
	}
	out, _ := json.Marshal(b)
	return string(out)
}

func bashInput(command string) map[string]any {
	return map[string]any{"tool_name": "Bash", "tool_input": map[string]any{"command": command, "description": "test"}, "tool_use_id": "toolu_" + strings.ReplaceAll(command, " ", "_")}
}

// postHook posts a hook body to the daemon's endpoint as Claude Code's
// http hook would, and returns the status and the body.
func (d *daemon) postHook(body string) (int, string) {
	d.t.Helper()
	token, err := hooks.ReadToken(dataDirOf(d.env))
	if err != nil {
		d.t.Fatal(err)
	}
	return d.postHookToken(body, token)
}

func (d *daemon) postHookToken(body, token string) (int, string) {
	d.t.Helper()
	cfg := hookClientConfig(d.info)
	req, _ := http.NewRequest(http.MethodPost, cfg.URL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: wstest.PinnedDialer(d.info.Fingerprint).TLSClientConfig}}
	resp, err := client.Do(req)
	if err != nil {
		d.t.Fatalf("hook POST: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// seenOrWait is WaitFor that also looks at the frames already read.
func seenOrWait(c *wstest.Client, typ string, v any, match func(wire.Envelope) bool) {
	c.T.Helper()
	for _, e := range c.Seen {
		if e.Type == typ && match(e) {
			wstest.Decode(c.T, e, v)
			return
		}
	}
	c.WaitFor(typ, v, match)
}

type hookResult struct {
	status int
	body   string
}

// postHookAsync posts while the test plays the phone.
func (d *daemon) postHookAsync(body string) <-chan hookResult {
	res := make(chan hookResult, 1)
	go func() {
		s, b := d.postHook(body)
		res <- hookResult{s, b}
	}()
	return res
}

func waitResult(t *testing.T, res <-chan hookResult) hookResult {
	t.Helper()
	select {
	case r := <-res:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the hook got no answer")
		return hookResult{}
	}
}

// hookOutput decodes the decision JSON of an answer.
type hookOutput struct {
	HookSpecificOutput *struct {
		HookEventName            string
		PermissionDecision       string
		PermissionDecisionReason string
		UpdatedInput             map[string]any
		Decision                 *struct {
			Behavior     string
			UpdatedInput map[string]any
			Message      string
		}
	}
}

func decodeOutput(t *testing.T, r hookResult) hookOutput {
	t.Helper()
	var out hookOutput
	if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &out) != nil {
		t.Fatalf("hook answer %d %q", r.status, r.body)
	}
	return out
}

func TestHookEventsReachPhones(t *testing.T) {
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const sid = "7c0e5f9a-1111-4c2e-9e51-5d2b3f6a0c01"
	events := []struct {
		name  string
		extra map[string]any
	}{
		{hooks.EventSessionStart, map[string]any{"source": "startup"}},
		{hooks.EventUserPromptSubmit, map[string]any{"prompt": "read the readme"}},
		{hooks.EventPreToolUse, map[string]any{"tool_name": "Read", "tool_input": map[string]any{"file_path": filepath.Join(d.project, "README.md")}, "tool_use_id": "toolu_read"}},
		{hooks.EventPostToolUse, map[string]any{"tool_name": "Read", "tool_input": map[string]any{"file_path": filepath.Join(d.project, "README.md")}, "tool_use_id": "toolu_read", "tool_response": "# readme"}},
		{hooks.EventNotification, map[string]any{"message": "Claude is waiting for your input", "notification_type": "idle_prompt"}},
		{hooks.EventPreCompact, map[string]any{"trigger": "auto", "custom_instructions": ""}},
		{hooks.EventSubagentStop, map[string]any{"stop_hook_active": false}},
		{hooks.EventStop, map[string]any{"stop_hook_active": false, "last_assistant_message": "It says hello."}},
	}
	for _, ev := range events {
		if status, body := d.postHook(hookBody(sid, ev.name, d.project, ev.extra)); status != http.StatusOK || body != "{}\n" {
			t.Fatalf("%s: %d %q", ev.name, status, body)
		}
		var ce wire.ClaudeEvent
		c.WaitFor(wire.TypeClaudeEvent, &ce, nil)
		want := ev.name
		if ev.name == hooks.EventStop {
			want = "TurnComplete"
		}
		if ce.EventType != want || ce.SessionID != sid || ce.Payload["hook_event_name"] != ev.name || ce.Payload["cwd"] != d.project {
			t.Fatalf("claude_event for %s = %+v", ev.name, ce)
		}
	}
	var tr wire.ToolResult
	seenOrWait(c, wire.TypeToolResult, &tr, forSession(sid))
	if tr.ToolCallID != "toolu_read" || tr.Result.Content != "# readme" {
		t.Fatalf("tool_result = %+v", tr)
	}
	_, ack := d.phone(nil)
	found := false
	for _, s := range ack.ActiveSessions {
		if s.SessionID == sid {
			found = s.Source == "hooks" && s.WorkingDirectory == d.project
		}
	}
	if !found {
		t.Fatalf("the observed session is not in active_sessions: %+v", ack.ActiveSessions)
	}
	if status, body := d.postHook(hookBody(sid, hooks.EventSessionEnd, d.project, map[string]any{"reason": "prompt_input_exit"})); status != 200 || body != "{}\n" {
		t.Fatalf("SessionEnd: %d %q", status, body)
	}
	var end wire.SessionEnd
	c.WaitFor(wire.TypeSessionEnd, &end, forSession(sid))
}

func TestHookDecisionsFromThePhone(t *testing.T) {
	d := newDaemon(t)
	c, _ := d.phone(nil)
	cases := []struct {
		event    string
		response map[string]any
		check    func(hookOutput) bool
	}{
		{hooks.EventPreToolUse, map[string]any{"decision": "approved"}, func(o hookOutput) bool {
			h := o.HookSpecificOutput
			return h.HookEventName == "PreToolUse" && h.PermissionDecision == "allow" && h.UpdatedInput == nil
		}},
		{hooks.EventPreToolUse, map[string]any{"decision": "rejected", "reason": "not on main"}, func(o hookOutput) bool {
			h := o.HookSpecificOutput
			return h.PermissionDecision == "deny" && strings.Contains(h.PermissionDecisionReason, "not on main")
		}},
		{hooks.EventPreToolUse, map[string]any{"decision": "modified", "modifications": map[string]any{"command": "rm -rf build/tmp"}}, func(o hookOutput) bool {
			h := o.HookSpecificOutput
			return h.PermissionDecision == "allow" && h.UpdatedInput["command"] == "rm -rf build/tmp" && h.UpdatedInput["description"] == "test"
		}},
		{hooks.EventPermissionRequest, map[string]any{"decision": "approved"}, func(o hookOutput) bool {
			h := o.HookSpecificOutput
			return h.HookEventName == "PermissionRequest" && h.Decision.Behavior == "allow"
		}},
		{hooks.EventPermissionRequest, map[string]any{"decision": "rejected", "reason": "no"}, func(o hookOutput) bool {
			h := o.HookSpecificOutput
			return h.Decision.Behavior == "deny" && strings.Contains(h.Decision.Message, "no")
		}},
		{hooks.EventPermissionRequest, map[string]any{"decision": "modified", "modifications": map[string]any{"command": "rm -rf build/tmp"}}, func(o hookOutput) bool {
			h := o.HookSpecificOutput
			return h.Decision.Behavior == "allow" && h.Decision.UpdatedInput["command"] == "rm -rf build/tmp"
		}},
	}
	for i, tc := range cases {
		sid := "decisions-" + string(rune('a'+i))
		res := d.postHookAsync(hookBody(sid, tc.event, d.project, bashInput("rm -rf build")))
		var ar wire.ApprovalRequired
		c.WaitFor(wire.TypeApprovalRequired, &ar, forSession(sid))
		if ar.Source != "hooks" || ar.Tool != "Bash" || ar.RiskLevel != "high" || !strings.Contains(string(ar.Params), "rm -rf build") {
			t.Fatalf("approval_required = %+v", ar)
		}
		select {
		case r := <-res:
			t.Fatalf("answered before the phone: %+v", r)
		default:
		}
		resp := map[string]any{"session_id": sid, "tool_call_id": ar.ToolCallID}
		for k, v := range tc.response {
			resp[k] = v
		}
		c.Send(wire.TypeApprovalResponse, "r", resp)
		if out := decodeOutput(t, waitResult(t, res)); out.HookSpecificOutput == nil || !tc.check(out) {
			t.Fatalf("%s %v: answer %+v", tc.event, tc.response, out.HookSpecificOutput)
		}
	}
}

func TestHookTwoPhonesRace(t *testing.T) {
	d := newDaemon(t)
	a, _ := d.phone(nil)
	b, _ := d.phone(nil)
	const sid = "race"
	res := d.postHookAsync(hookBody(sid, hooks.EventPreToolUse, d.project, bashInput("git push --force")))
	var ar wire.ApprovalRequired
	a.WaitFor(wire.TypeApprovalRequired, &ar, forSession(sid))
	b.WaitFor(wire.TypeApprovalRequired, nil, forSession(sid))
	decisions := []string{"approved", "rejected"}
	var wg sync.WaitGroup
	for i, c := range []*wstest.Client{a, b} {
		wg.Go(func() {
			c.Send(wire.TypeApprovalResponse, "race", map[string]any{"session_id": sid, "tool_call_id": ar.ToolCallID, "decision": decisions[i]})
		})
	}
	wg.Wait()
	out := decodeOutput(t, waitResult(t, res))
	var winner string
	refused := 0
	for i, c := range []*wstest.Client{a, b} {
		c.Send(wire.TypeHeartbeatPing, "sync", nil)
		c.WaitFor(wire.TypeHeartbeatPong, nil, func(e wire.Envelope) bool { return e.ID == "sync" })
		lost := false
		for _, e := range c.Seen {
			if e.Type == wire.TypeError && e.ID == "race" {
				lost = true
			}
		}
		if lost {
			refused++
		} else {
			winner = decisions[i]
		}
	}
	want := map[string]string{"approved": "allow", "rejected": "deny"}[winner]
	if refused != 1 || out.HookSpecificOutput.PermissionDecision != want {
		t.Fatalf("%d refused, winner %q, hook answer %+v", refused, winner, out.HookSpecificOutput)
	}
}

func TestHookWaitsAcrossAPhoneReconnect(t *testing.T) {
	d := newDaemon(t)
	a, _ := d.phone(nil)
	const sid = "reconnect"
	res := d.postHookAsync(hookBody(sid, hooks.EventPermissionRequest, d.project, bashInput("curl https://example.invalid/x | sh")))
	var ar wire.ApprovalRequired
	a.WaitFor(wire.TypeApprovalRequired, &ar, forSession(sid))
	a.WS.Close()
	time.Sleep(100 * time.Millisecond)
	select {
	case r := <-res:
		t.Fatalf("the question ended when the phone went away: %+v", r)
	default:
	}
	b, ack := d.phone(nil)
	if len(ack.PendingApprovals) != 1 || !strings.Contains(string(ack.PendingApprovals[0]), ar.ToolCallID) {
		t.Fatalf("pending_approvals = %s", ack.PendingApprovals)
	}
	b.Send(wire.TypeApprovalResponse, "late", map[string]any{"session_id": sid, "tool_call_id": ar.ToolCallID, "decision": "rejected", "reason": "never pipe to sh"})
	out := decodeOutput(t, waitResult(t, res))
	if d := out.HookSpecificOutput.Decision; d == nil || d.Behavior != "deny" || !strings.Contains(d.Message, "never pipe to sh") {
		t.Fatalf("answer %+v", out.HookSpecificOutput)
	}
}

func TestHookWithoutAPhone(t *testing.T) {
	d := newDaemon(t)
	cases := []struct {
		name, event string
		extra       map[string]any
		want        string
	}{
		{"PreToolUse high risk", hooks.EventPreToolUse, bashInput("rm -rf /tmp/x"), "ask"},
		{"PreToolUse low risk", hooks.EventPreToolUse, map[string]any{"tool_name": "Grep", "tool_input": map[string]any{"pattern": "x"}}, ""},
		{"PermissionRequest", hooks.EventPermissionRequest, bashInput("rm -rf /tmp/x"), ""},
	}
	for _, c := range cases {
		status, body := d.postHook(hookBody("nophone", c.event, d.project, c.extra))
		out := decodeOutput(t, hookResult{status, body})
		switch {
		case c.want == "" && body != "{}\n":
			t.Errorf("%s: %q, want {}", c.name, body)
		case c.want != "" && (out.HookSpecificOutput == nil || out.HookSpecificOutput.PermissionDecision != c.want):
			t.Errorf("%s: %q, want %s", c.name, body, c.want)
		}
	}
}

func TestHookEndpointRefusals(t *testing.T) {
	d := newDaemon(t)
	good := hookBody("refusals", hooks.EventStop, d.project, nil)
	cases := []struct {
		name, token, body string
		status            int
		code              string
	}{
		{"wrong token", strings.Repeat("0", 64), good, 401, hooks.CodeUnauthorized},
		{"not JSON", "", "{", 400, hooks.CodeInvalidJSON},
		{"no session", "", `{"hook_event_name":"Stop"}`, 400, hooks.CodeMissingField},
		{"unknown event", "", `{"session_id":"s","hook_event_name":"Lunch"}`, 400, hooks.CodeUnknownEvent},
		{"too large", "", `{"a":"` + strings.Repeat("x", hooks.MaxBody) + `"}`, 413, hooks.CodeTooLarge},
	}
	token, _ := hooks.ReadToken(dataDirOf(d.env))
	for _, c := range cases {
		tok := c.token
		if tok == "" {
			tok = token
		}
		status, body := d.postHookToken(c.body, tok)
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal([]byte(body), &e); status != c.status || e.Error.Code != c.code {
			t.Errorf("%s: %d %s", c.name, status, body)
		}
	}
}

// hookProcess runs `tether hook` as Claude Code does: a process, the hook
// JSON on stdin.
func hookProcess(t *testing.T, env []string, stdin string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "hook")
	cmd.Env = append(env, "TETHER_TEST_AS_TETHER=1")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func TestHookCommand(t *testing.T) {
	d := newDaemon(t)
	pre := hookBody("cmd", hooks.EventPreToolUse, d.project, bashInput("rm -rf dist"))
	code, out, stderr := hookProcess(t, d.env, pre)
	if code != 0 || !strings.Contains(out, `"permissionDecision":"ask"`) {
		t.Fatalf("daemon up: %d %q %s", code, out, stderr)
	}
	code, out, _ = hookProcess(t, d.env, "not json")
	if code != 0 || out != "" {
		t.Fatalf("bad input: %d %q", code, out)
	}
	d.stop()
	code, out, stderr = hookProcess(t, d.env, pre)
	if code != 0 || out != "" || !strings.Contains(stderr, "no decision") {
		t.Fatalf("daemon down: %d %q %q", code, out, stderr)
	}
	// A data directory where no daemon ever ran.
	env := []string{"TETHER_DATA=" + t.TempDir(), "HOME=" + t.TempDir()}
	if code, out, _ = hookProcess(t, env, pre); code != 0 || out != "" {
		t.Fatalf("never started: %d %q", code, out)
	}
}

func TestHooksInstallCommand(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(t.TempDir(), "data")
	project := t.TempDir()
	env := []string{"HOME=" + home, "TETHER_DATA=" + data}
	settings := filepath.Join(project, ".claude", "settings.json")
	os.MkdirAll(filepath.Dir(settings), 0o755)
	os.WriteFile(settings, []byte(`{"permissions":{"allow":["Bash(ls:*)"]}}`), 0o600)

	code, out, errOut := runCmd(t, env, "hooks", "install", "--project", project)
	if code != 0 || !strings.Contains(out, settings) {
		t.Fatalf("install: %d %s %s", code, out, errOut)
	}
	b, _ := os.ReadFile(settings)
	exe, _ := os.Executable()
	if !strings.Contains(string(b), exe+" hook --data "+data+" "+hooks.Marker) || !strings.Contains(string(b), "Bash(ls:*)") {
		t.Fatalf("settings: %s", b)
	}
	if code, out, _ = runCmd(t, env, "hooks", "install", "--project", project); code != 0 || !strings.Contains(out, "already") {
		t.Fatalf("again: %d %s", code, out)
	}
	if code, out, _ = runCmd(t, env, "hooks", "uninstall", "--project", project); code != 0 || !strings.Contains(out, "Removed") {
		t.Fatalf("uninstall: %d %s", code, out)
	}
	if b, _ := os.ReadFile(settings); !strings.Contains(string(b), "Bash(ls:*)") || strings.Contains(string(b), "hook") {
		t.Fatalf("after uninstall: %s", b)
	}
	// The user's settings, with an explicit command.
	if code, _, errOut = runCmd(t, env, "hooks", "install", "--command", "tether hook"); code != 0 {
		t.Fatalf("user install: %s", errOut)
	}
	if b, err := os.ReadFile(filepath.Join(home, ".claude", "settings.json")); err != nil || !strings.Contains(string(b), `"tether hook `+hooks.Marker+`"`) {
		t.Fatalf("user settings: %s %v", b, err)
	}
	if code, _, errOut = runCmd(t, env, "hooks", "install", "--project", filepath.Join(project, "missing")); code != 2 || !strings.Contains(errOut, "not a directory") {
		t.Fatalf("missing project: %d %s", code, errOut)
	}
	os.WriteFile(settings, []byte(`["not", "an", "object"]`), 0o644)
	if code, _, errOut = runCmd(t, env, "hooks", "install", "--project", project); code != 1 || !strings.Contains(errOut, "not in Claude Code's format") {
		t.Fatalf("bad settings: %d %s", code, errOut)
	}

	code, out, _ = runCmd(t, env, "hooks", "token")
	tok, err := hooks.ReadToken(data)
	if code != 0 || err != nil || strings.TrimSpace(out) != tok {
		t.Fatalf("token: %d %q %q %v", code, out, tok, err)
	}
	if code, out2, _ := runCmd(t, env, "hooks", "token"); code != 0 || out2 != out {
		t.Fatal("the token changed")
	}
}

// TestClaudeCodeInATerminal installs the hooks into a project, runs the
// real Claude Code CLI there as a developer would (no sandbox), and answers
// its tool calls from a phone: approved, the command really runs; rejected,
// it really does not, and Claude hears why.
func TestClaudeCodeInATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the real CLI")
	}
	bin := anthropicmock.ClaudeBin(t)
	d := newDaemon(t)
	if code, _, errOut := runCmd(t, d.env, "hooks", "install", "--project", d.project); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	c, _ := d.phone(nil)
	for _, tc := range []struct {
		name, file, decision string
	}{
		{"approved", "approved.txt", "approved"},
		{"rejected", "rejected.txt", "rejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := anthropicmock.New(t, anthropicmock.Queue(
				anthropicmock.Reply{Blocks: []anthropicmock.Block{
					anthropicmock.Text("I'll write the file."),
					anthropicmock.ToolUse("Bash", map[string]any{"command": "echo from-claude > " + tc.file, "description": "Write the file"}),
				}, StopReason: "tool_use"},
				anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Finished.")}},
			))
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "-p", "please write "+tc.file)
			cmd.Dir = d.project
			// The daemon's user: it follows transcripts under their ~/.claude.
			cmd.Env = append(api.ClaudeEnv(envMap(d.env)["HOME"]), "TETHER_TEST_AS_TETHER=1")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()

			var ar wire.ApprovalRequired
			c.WaitFor(wire.TypeApprovalRequired, &ar, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), tc.file) })
			if ar.Source != "hooks" || ar.Tool != "Bash" || ar.SessionID == "" {
				t.Fatalf("approval_required = %+v", ar)
			}
			c.Send(wire.TypeApprovalResponse, "r-"+tc.name, map[string]any{"session_id": ar.SessionID, "tool_call_id": ar.ToolCallID,
				"decision": tc.decision, "reason": "not in this project"})
			if err := <-done; err != nil {
				t.Fatalf("claude: %v\n%s", err, out.String())
			}
			_, statErr := os.Stat(filepath.Join(d.project, tc.file))
			reqs := api.MessageRequests()
			results := reqs[len(reqs)-1].ToolResults()
			if len(results) != 1 {
				t.Fatalf("the model got %d tool results", len(results))
			}
			got, _ := json.Marshal(results[0])
			switch tc.decision {
			case "approved":
				if b, err := os.ReadFile(filepath.Join(d.project, tc.file)); err != nil || string(b) != "from-claude\n" {
					t.Fatalf("the approved command did not run: %q %v\n%s", b, err, out.String())
				}
				var tr wire.ToolResult
				c.WaitFor(wire.TypeToolResult, &tr, forSession(ar.SessionID))
				if tr.ToolCallID != ar.ToolCallID || !tr.Result.Success {
					t.Fatalf("tool_result = %+v", tr)
				}
			case "rejected":
				if !os.IsNotExist(statErr) {
					t.Fatalf("the rejected command ran\n%s", out.String())
				}
				if !strings.Contains(string(got), "not in this project") {
					t.Fatalf("Claude was not told why: %s", got)
				}
			}
			var turn wire.TurnComplete
			c.WaitFor(wire.TypeTurnComplete, &turn, forSession(ar.SessionID))
			if turn.Result != "Finished." {
				t.Fatalf("turn_complete = %+v", turn)
			}
			// The whole conversation, from the transcript and the hooks, in
			// order and each once: the prompt, the text before the tool,
			// the tool and its result (a rejected call's from the
			// transcript alone: no PostToolUse fires for it), the closing
			// text.
			result := "tool_result ok"
			if tc.decision == "rejected" {
				result = "tool_result failed"
				var tr wire.ToolResult
				seenOrWait(c, wire.TypeToolResult, &tr, forSession(ar.SessionID))
				if tr.ToolCallID != ar.ToolCallID || tr.Tool != "Bash" || !strings.Contains(tr.Result.Error, "not in this project") {
					t.Fatalf("the rejected call's tool_result = %+v", tr)
				}
			}
			if got, want := conversation(c.Seen, ar.SessionID), []string{
				"user_message please write " + tc.file, "stream_chunk I'll write the file.", "tool_call", result, "stream_chunk Finished.", "turn_complete",
			}; !slices.Equal(got, want) {
				t.Fatalf("the phone saw\n %q\nwant\n %q", got, want)
			}
		})
	}
}

// conversation lists a session's user messages, text, tool calls, tool
// results (ok or failed) and turn ends as a phone saw them, from its first
// prompt.
func conversation(seen []wire.Envelope, sessionID string) []string {
	var out []string
	for _, e := range seen {
		if !forSession(sessionID)(e) {
			continue
		}
		var p struct {
			Content string
			Result  wire.ToolResultBody
		}
		json.Unmarshal(e.Payload, &p)
		switch e.Type {
		case wire.TypeUserMessage, wire.TypeStreamChunk:
			out = append(out, e.Type+" "+p.Content)
		case wire.TypeToolCall, wire.TypeTurnComplete:
			out = append(out, e.Type)
		case wire.TypeToolResult:
			if p.Result.Success {
				out = append(out, e.Type+" ok")
			} else {
				out = append(out, e.Type+" failed")
			}
		}
	}
	return out
}

func TestHookClientConfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, open, _ := net.SplitHostPort(ln.Addr().String())
	closed := func() string {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		defer l.Close()
		_, p, _ := net.SplitHostPort(l.Addr().String())
		return p
	}()
	cases := []struct {
		info       runtimeInfo
		url, name  string
		fp         string
		serverName string
	}{
		{runtimeInfo{URL: "wss://127.0.0.1:7420/ws", Listen: "127.0.0.1:7420", Fingerprint: "sha256:ab"}, "https://127.0.0.1:7420/hooks/event", "loopback", "sha256:ab", "127.0.0.1"},
		{runtimeInfo{URL: "ws://127.0.0.1:7420/ws", Listen: "127.0.0.1:7420"}, "http://127.0.0.1:7420/hooks/event", "tls off", "", "127.0.0.1"},
		{runtimeInfo{URL: "wss://[::1]:7420/ws", Listen: "[::1]:7420"}, "https://[::1]:7420/hooks/event", "ipv6 loopback", "", "::1"},
		{runtimeInfo{URL: "wss://192.168.1.5:7420/ws", Listen: "[::]:7420"}, "https://127.0.0.1:7420/hooks/event", "unspecified", "", "192.168.1.5"},
		{runtimeInfo{URL: "wss://box.tail1234.ts.net:" + open + "/ws", Listen: "100.64.0.7:" + open}, "https://127.0.0.1:" + open + "/hooks/event", "tailnet plus loopback", "", "box.tail1234.ts.net"},
		{runtimeInfo{URL: "wss://192.168.1.5:" + closed + "/ws", Listen: "192.168.1.5:" + closed}, "https://192.168.1.5:" + closed + "/hooks/event", "a specific address only", "", "192.168.1.5"},
	}
	for _, c := range cases {
		got := hookClientConfig(c.info)
		if got.URL != c.url || got.Fingerprint != c.fp || got.ServerName != c.serverName {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

// TestHookDoesNotWaitOnTheReCursorApp: with only the ReCursor app
// connected (it shows hook questions but never answers them), a terminal's
// question goes back to it at once; once a client that answers them (it
// says so at auth) connects, the question waits for its answer.
func TestHookDoesNotWaitOnTheReCursorApp(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	app := scanAppCode(t, d)
	appConn, _ := connectApp(t, app)
	defer appConn.WS.Close()
	const sid = "terminal"
	status, body := d.postHook(hookBody(sid, hooks.EventPreToolUse, d.project, bashInput("rm -rf build")))
	if out := decodeOutput(t, hookResult{status, body}); out.HookSpecificOutput == nil || out.HookSpecificOutput.PermissionDecision != "ask" {
		t.Fatalf("with only the app connected: %q", body)
	}
	c, _ := d.phone(nil)
	res := d.postHookAsync(hookBody(sid, hooks.EventPreToolUse, d.project, bashInput("rm -rf dist")))
	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), "rm -rf dist") })
	c.Send(wire.TypeApprovalResponse, "r", map[string]any{"session_id": sid, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	if out := decodeOutput(t, waitResult(t, res)); out.HookSpecificOutput == nil || out.HookSpecificOutput.PermissionDecision != "allow" {
		t.Fatalf("answered by a capable client: %+v", out.HookSpecificOutput)
	}
}

// TestClaudeCodeInteractiveInTmux drives the real claude CLI's terminal
// UI, as a developer would, in a tmux window: with `tether hooks install`,
// the phone sees the typed prompt, the assistant's text, the tool call,
// approves it, and sees the result and the answer, in order; the terminal
// shows the same turn.
func TestClaudeCodeInteractiveInTmux(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the real CLI in a terminal")
	}
	t.Parallel()
	d, c, term := newTerminal(t)
	term.send("please write typed.txt")

	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), "typed.txt") })
	c.Send(wire.TypeApprovalResponse, "yes", map[string]any{"session_id": ar.SessionID, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, forSession(ar.SessionID))
	c.WaitFor(wire.TypeTurnComplete, nil, forSession(ar.SessionID))
	term.await("Finished.")
	if b, err := os.ReadFile(filepath.Join(d.project, "typed.txt")); err != nil || string(b) != "typed\n" {
		t.Fatalf("the approved command did not run: %q %v", b, err)
	}
	if !tr.Result.Success || tr.ToolCallID != ar.ToolCallID {
		t.Fatalf("tool_result = %+v", tr)
	}
	if got, want := conversation(c.Seen, ar.SessionID), []string{
		"user_message please write typed.txt", "stream_chunk I'll write the file.", "tool_call", "tool_result ok", "stream_chunk Finished.", "turn_complete",
	}; !slices.Equal(got, want) {
		t.Fatalf("the phone saw\n %q\nwant\n %q", got, want)
	}
}

// TestClaudeCodeInteractiveAcrossADaemonRestart: the daemon restarts while
// a terminal session goes on. The next turn reaches the phone from where
// the transcript was read to, nothing of the turn before again; its command
// fails, and the phone sees that result, which only the transcript holds.
func TestClaudeCodeInteractiveAcrossADaemonRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the real CLI in a terminal")
	}
	t.Parallel()
	d, c, term := newTerminal(t)
	approve := func(c *wstest.Client, file string) string {
		t.Helper()
		var ar wire.ApprovalRequired
		c.WaitFor(wire.TypeApprovalRequired, &ar, func(e wire.Envelope) bool { return strings.Contains(string(e.Payload), file) })
		c.Send(wire.TypeApprovalResponse, "yes-"+file, map[string]any{"session_id": ar.SessionID, "tool_call_id": ar.ToolCallID, "decision": "approved"})
		c.WaitFor(wire.TypeTurnComplete, nil, forSession(ar.SessionID))
		return ar.SessionID
	}
	term.send("please write typed.txt")
	id := approve(c, "typed.txt")
	term.await("Finished.")
	last := c.Seen[len(c.Seen)-1].Seq

	d.stop()
	d.start()
	c2, _ := d.phone(map[string]any{"last_seq": last})
	term.send("please copy missing.txt")
	approve(c2, "missing.txt")
	term.await("It failed.")
	if got, want := conversation(c2.Seen, id), []string{
		"user_message please copy missing.txt", "stream_chunk I'll copy it.", "tool_call", "tool_result failed", "stream_chunk It failed.", "turn_complete",
	}; !slices.Equal(got, want) {
		t.Fatalf("after the restart the phone saw\n %q\nwant\n %q", got, want)
	}
}

// terminal is the real claude CLI's terminal UI in a window of a tmux
// server of the test's own, working in a daemon's project with
// `tether hooks install` done, against a mock API: a prompt that names a
// file gets a text and a Bash call writing it (or copying from it, when
// the prompt says copy), a tool result gets "Finished." (or "It failed.").
type terminal struct {
	t    *testing.T
	sock string
	pid  int // the window's process
}

// newTerminal starts a daemon, a phone that answers terminal questions (as
// the web client says it does: the terminal's questions wait for it) and
// the terminal, at its prompt.
func newTerminal(t *testing.T) (*daemon, *wstest.Client, *terminal) {
	bin := anthropicmock.ClaudeBin(t)
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is missing: run scripts/install-deps")
	}
	d := newDaemon(t)
	if code, _, errOut := runCmd(t, d.env, "hooks", "install", "--project", d.project); code != 0 {
		t.Fatalf("install: %s", errOut)
	}
	c, _ := d.phone(map[string]any{"capabilities": []string{"hook_approvals"}})
	// The terminal UI also asks the model for the session's title.
	api := anthropicmock.New(t, func(r *anthropicmock.Request) anthropicmock.Reply {
		last := r.LastMessage()
		var text string
		var result *anthropicmock.Block
		for _, b := range last.Content {
			switch b.Type {
			case "text":
				text += b.Text
			case "tool_result":
				result = &b
			}
		}
		switch {
		case r.HasText("user", "Write the title"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Write typed.txt")}}
		case result != nil && result.IsError:
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("It failed.")}}
		case result != nil:
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Finished.")}}
		case strings.Contains(text, "please copy missing.txt"):
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{
				anthropicmock.Text("I'll copy it."),
				anthropicmock.ToolUse("Bash", map[string]any{"command": "cat missing.txt > copy.txt", "description": "Copy the file"}),
			}, StopReason: "tool_use"}
		case len(last.Content) > 0:
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{
				anthropicmock.Text("I'll write the file."),
				anthropicmock.ToolUse("Bash", map[string]any{"command": "echo typed > typed.txt", "description": "Write the file"}),
			}, StopReason: "tool_use"}
		}
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("?")}}
	})
	home := envMap(d.env)["HOME"]
	term := openTerminal(t, d, append(append(api.ClaudeEnv(home), "TETHER_TEST_AS_TETHER=1"), bin))
	term.await("? for shortcuts")
	return d, c, term
}

// openTerminal runs command (an environment's assignments, then the
// program and its arguments) in a tmux window in the daemon's project,
// as a user who has used Claude Code before: no onboarding, the project
// trusted, the API key accepted.
func openTerminal(t *testing.T, d *daemon, command []string) *terminal {
	home := envMap(d.env)["HOME"]
	key := "sk-ant-mock-not-a-key"
	seed, _ := json.Marshal(map[string]any{
		"hasCompletedOnboarding": true,
		"customApiKeyResponses":  map[string]any{"approved": []string{key[len(key)-20:]}, "rejected": []string{}},
		"projects":               map[string]any{d.project: map[string]any{"hasTrustDialogAccepted": true}},
	})
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), seed, 0o600); err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, sock: "tether-test-" + strings.ToLower(rand.Text()[:10])}
	term.tmux(append([]string{"new-session", "-d", "-s", "dev", "-x", "160", "-y", "45", "-c", d.project, "env"}, command...)...)
	// The pane runs the command itself (env execs it): the test ends once
	// it has exited, so that nothing writes into the test's directories
	// while they are removed.
	pid, err := strconv.Atoi(strings.TrimSpace(term.tmux("display-message", "-p", "-t", "dev", "#{pane_pid}")))
	if err != nil {
		t.Fatal(err)
	}
	term.pid = pid
	t.Cleanup(func() {
		exec.Command("tmux", "-L", term.sock, "kill-server").Run()
		awaitExit(t, pid)
	})
	return term
}

func (term *terminal) tmux(args ...string) string {
	term.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", term.sock}, args...)...).CombinedOutput()
	if err != nil {
		term.t.Fatalf("tmux %v: %v %s", args, err, out)
	}
	return string(out)
}

// send types a line into the terminal and presses Enter.
func (term *terminal) send(line string) {
	term.t.Helper()
	term.tmux("send-keys", "-t", "dev", line, "Enter")
}

// await waits until the terminal shows want.
func (term *terminal) await(want string) {
	term.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(term.tmux("capture-pane", "-p", "-t", "dev"), want) {
		select {
		case <-tick.C:
		case <-deadline:
			term.t.Fatalf("the terminal never showed %q:\n%s", want, term.tmux("capture-pane", "-p", "-t", "dev"))
		}
	}
}

// awaitExit waits until the process pid has exited (it is gone, or a
// zombie nobody reaped yet).
func awaitExit(t *testing.T, pid int) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	for {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		// The state follows the command, which is in parentheses.
		if err != nil || strings.HasPrefix(string(stat[bytes.LastIndexByte(stat, ')')+1:]), " Z") {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Errorf("process %d did not exit", pid)
			return
		}
	}
}
