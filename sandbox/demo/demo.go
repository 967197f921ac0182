// Package demo is tether's built-in demo agent: no network, no API key. It
// behaves like a small Claude Code session so that every flow of the daemon
// can be tried and tested on any machine: it streams a reply that quotes the
// prompt, and prompts of two forms ask to use a tool first:
//
//	run: COMMAND            asks for tool "Bash" with {"command": COMMAND} and,
//	                        once allowed, runs it with sh -c in the working
//	                        directory
//	write: PATH\nCONTENT    asks for tool "Write" with {"file_path", "content"}
//	                        and, once allowed, writes the file
//	plan: MARKDOWN          proposes MARKDOWN as its plan (tool
//	                        "ExitPlanMode"); approved, it leaves plan mode
//	ask: QUESTION | A | B   asks QUESTION with options A, B … (tool
//	                        "AskUserQuestion") and says what was answered
//	think: TEXT             thinks (a thinking block) before it answers
//	/help                   lists these (its one slash command)
//
// In an agent-to-agent run it also uses the run's tools, as a CLI agent
// does through tether's MCP server, when a line of its prompt (the
// last such line, the newest message) reads:
//
//	… send: TO TYPE[/SIGNAL] CONTENT   send_to_agent (TO "*" sends to all)
//	receive:                           receive_messages
//	status:                            bridge_status
//
// CONTENT runs to the end of the line and may itself hold a "send: ": the
// recipient then acts on it, so that one task scripts a whole loop.
//
// Its output has the shapes of Claude Code's stream-json with partial
// messages (system/init, stream_event deltas, assistant, user tool_result,
// result), so the daemon maps it exactly as it maps the real agent.
package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
)

// DefaultChunkDelay is the pause between streamed text chunks.
const DefaultChunkDelay = 10 * time.Millisecond

const (
	model        = "demo"
	chunkRunes   = 24
	maxOutput    = 64 << 10
	interruptMsg = "[Request interrupted by user]"
	// rejectMsg is Claude Code's tool_result text for a denial without a
	// reason.
	rejectMsg = "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed."
)

// ErrUnknownSession is a resume of a session the state directory does not
// know.
var ErrUnknownSession = errors.New("demo: unknown session")

// Options configures a demo agent.
type Options struct {
	// WorkDir is where commands run and relative paths resolve.
	WorkDir string
	// StateDir keeps one small transcript file a session; empty keeps
	// nothing, and then a session cannot be resumed.
	StateDir string
	// SessionID, when set, resumes that session from StateDir.
	SessionID string
	// ChunkDelay is the pause between streamed chunks; 0 means
	// DefaultChunkDelay, negative means none.
	ChunkDelay time.Duration
	// Settings are the agent's settings to start with: the demo only
	// reports its model and permission mode in its system/init.
	Settings agent.Settings
	// Run, when set, carries the run tools' calls of a session that takes
	// part in an agent-to-agent run.
	Run agent.RunCaller
}

// transcript is what a session keeps in StateDir.
type transcript struct {
	SessionID string   `json:"sessionId"`
	Prompts   []string `json:"prompts"`
}

// Agent is one demo conversation. It implements agent.Agent; one turn runs
// at a time.
type Agent struct {
	opts Options
	t    transcript

	mu       sync.Mutex
	settings agent.Settings
}

// New returns a demo agent, resuming opts.SessionID when set.
func New(opts Options) (*Agent, error) {
	if opts.ChunkDelay == 0 {
		opts.ChunkDelay = DefaultChunkDelay
	}
	a := &Agent{opts: opts, settings: opts.Settings}
	if opts.SessionID == "" {
		return a, nil
	}
	if opts.StateDir == "" {
		return nil, fmt.Errorf("%w: %s (no state directory)", ErrUnknownSession, opts.SessionID)
	}
	b, err := os.ReadFile(a.statePath(opts.SessionID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownSession, opts.SessionID)
	}
	if err != nil {
		return nil, fmt.Errorf("demo: read transcript: %w", err)
	}
	if err := json.Unmarshal(b, &a.t); err != nil {
		return nil, fmt.Errorf("demo: read transcript: %w", err)
	}
	if a.t.SessionID != opts.SessionID {
		return nil, fmt.Errorf("%w: %s (transcript names %s)", ErrUnknownSession, opts.SessionID, a.t.SessionID)
	}
	return a, nil
}

// SessionID implements agent.Agent.
func (a *Agent) SessionID() string { return a.t.SessionID }

// Turns is how many prompts the conversation has had, resumed ones included.
func (a *Agent) Turns() int { return len(a.t.Prompts) }

// Configure implements agent.Configurable: the next system/init reports
// the settings.
func (a *Agent) Configure(_ context.Context, s agent.Settings) (agent.Settings, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settings = s
	return s, nil
}

// Close implements agent.Agent; the demo holds nothing between turns.
func (a *Agent) Close() error { return nil }

func (a *Agent) statePath(id string) string {
	return filepath.Join(a.opts.StateDir, "demo-"+id+".json")
}

func (a *Agent) save() error {
	if a.opts.StateDir == "" {
		return nil
	}
	b, err := json.Marshal(a.t)
	if err != nil {
		return fmt.Errorf("demo: save transcript: %w", err)
	}
	tmp := a.statePath(a.t.SessionID) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("demo: save transcript: %w", err)
	}
	if err := os.Rename(tmp, a.statePath(a.t.SessionID)); err != nil {
		return fmt.Errorf("demo: save transcript: %w", err)
	}
	return nil
}

// turn is the state of one Query.
type turn struct {
	a       *Agent
	host    agent.Host
	start   time.Time
	turns   int // API round trips in this query, as num_turns counts them
	out     int // output "tokens" (chunks)
	denials []map[string]any
}

// Query implements agent.Agent.
func (a *Agent) Query(ctx context.Context, prompt string, host agent.Host) error {
	return a.QueryImages(ctx, prompt, nil, host)
}

// QueryImages implements agent.ImageAgent: the answer says what images came.
func (a *Agent) QueryImages(ctx context.Context, prompt string, images []agent.Image, host agent.Host) error {
	if a.t.SessionID == "" {
		a.t.SessionID = uuid()
	}
	a.t.Prompts = append(a.t.Prompts, prompt)
	t := &turn{a: a, host: host, start: time.Now()}
	a.mu.Lock()
	st := a.settings
	a.mu.Unlock()
	if st.Model == "" {
		st.Model = model
	}
	if st.PermissionMode == "" {
		st.PermissionMode = "default"
	}
	t.emit(map[string]any{
		"type": "system", "subtype": "init", "cwd": a.opts.WorkDir, "session_id": a.t.SessionID,
		"tools": []string{"Bash", "Write"}, "mcp_servers": []any{}, "model": st.Model,
		"permissionMode": st.PermissionMode, "slash_commands": []string{"help"}, "apiKeySource": "none",
		"claude_code_version": "tether-demo", "output_style": "default", "uuid": uuid(),
	})
	if err := a.save(); err != nil {
		return err
	}
	if a.opts.Run != nil {
		if call, ok := runCommand(prompt); ok {
			return t.runTool(ctx, a.opts.Run, call)
		}
	}
	switch {
	case strings.HasPrefix(prompt, "run: "):
		cmd := strings.TrimPrefix(prompt, "run: ")
		return t.tool(ctx, fmt.Sprintf("I will run %q in the working directory.", cmd), "Bash", map[string]any{"command": cmd})
	case strings.HasPrefix(prompt, "write: "):
		path, content, _ := strings.Cut(strings.TrimPrefix(prompt, "write: "), "\n")
		return t.tool(ctx, fmt.Sprintf("I will write %d bytes to %s.", len(content), path), "Write", map[string]any{"file_path": path, "content": content})
	case strings.HasPrefix(prompt, "plan: "):
		return t.tool(ctx, "Here is my plan.", "ExitPlanMode", map[string]any{"plan": strings.TrimPrefix(prompt, "plan: ")})
	case strings.HasPrefix(prompt, "ask: "):
		parts := strings.Split(strings.TrimPrefix(prompt, "ask: "), "|")
		var options []map[string]string
		for _, o := range parts[1:] {
			options = append(options, map[string]string{"label": strings.TrimSpace(o), "description": ""})
		}
		q := map[string]any{"question": strings.TrimSpace(parts[0]), "header": "Question", "options": options, "multiSelect": false}
		return t.tool(ctx, "I have a question.", "AskUserQuestion", map[string]any{"questions": []any{q}})
	case strings.HasPrefix(prompt, "think: "):
		t.think("Thinking about " + strings.TrimPrefix(prompt, "think: ") + ": a short answer will do.")
	case strings.TrimSpace(prompt) == "/help":
		return t.reply(ctx, helpText)
	}
	text := fmt.Sprintf("You said: %q. This is tether's demo agent, turn %d of this conversation. Try \"run: COMMAND\", or \"write: PATH\" then a newline and the file's content.", prompt, len(a.t.Prompts))
	for i, im := range images {
		b, _ := base64.StdEncoding.DecodeString(im.Data)
		text += fmt.Sprintf(" Image %d: %s, %d bytes.", i+1, im.MediaType, len(b))
	}
	return t.reply(ctx, text)
}

// helpText is the demo's answer to /help.
const helpText = "tether's demo agent takes: \"run: COMMAND\" (asks to run it), \"write: PATH\" and a newline and the content (asks to write it), " +
	"\"plan: MARKDOWN\" (proposes a plan), \"ask: QUESTION | OPTION | OPTION\" (asks you), \"think: TEXT\" (thinks first); anything else it repeats."

// reply ends a turn with text.
func (t *turn) reply(ctx context.Context, text string) error {
	if _, ok := t.streamText(ctx, text); !ok {
		return t.interrupted()
	}
	t.stop("end_turn")
	t.result(text)
	return nil
}

// tool runs a turn that asks to use tool name with input.
func (t *turn) tool(ctx context.Context, intro, name string, input map[string]any) error {
	msgID, ok := t.streamText(ctx, intro)
	if !ok {
		return t.interrupted()
	}
	toolID := "toolu_demo" + strings.ToLower(rand.Text()[:12])
	raw, err := json.Marshal(input)
	if err != nil {
		return fmt.Errorf("demo: tool input: %w", err)
	}
	t.stream(map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "tool_use", "id": toolID, "name": name, "input": map[string]any{}}})
	half := len(raw) / 2
	for _, part := range []string{string(raw[:half]), string(raw[half:])} {
		t.stream(map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
	}
	t.assistant(msgID, map[string]any{"type": "tool_use", "id": toolID, "name": name, "input": json.RawMessage(raw)})
	t.stream(map[string]any{"type": "content_block_stop", "index": 1})
	t.stop("tool_use")

	dec, err := t.host.RequestPermission(ctx, agent.PermissionRequest{RequestID: uuid(), ToolName: name, Input: raw, ToolUseID: toolID})
	if err != nil {
		if ctx.Err() != nil {
			return t.interrupted()
		}
		return fmt.Errorf("demo: permission: %w", err)
	}
	var summary string
	if dec.Behavior != "allow" {
		content, useResult := rejectMsg, "User rejected tool use"
		if dec.Message != "" {
			content, useResult = dec.Message, "Error: "+dec.Message
		}
		t.denials = append(t.denials, map[string]any{"tool_name": name, "tool_use_id": toolID, "tool_input": json.RawMessage(raw)})
		t.toolResult(toolID, content, true, useResult)
		summary = "Understood, I did not use " + name + "."
	} else {
		if len(dec.UpdatedInput) > 0 {
			raw = dec.UpdatedInput
		}
		var res toolOutcome
		switch name {
		case "Bash":
			res = t.runBash(ctx, raw)
		case "ExitPlanMode":
			res = t.leavePlanMode()
		case "AskUserQuestion":
			res = answered(raw)
		default:
			res = t.write(raw)
		}
		if ctx.Err() != nil {
			return t.interrupted()
		}
		t.toolResult(toolID, res.content, res.isError, res.useResult)
		summary = res.summary
	}
	if _, ok := t.streamText(ctx, summary); !ok {
		return t.interrupted()
	}
	t.stop("end_turn")
	t.result(summary)
	return nil
}

// leavePlanMode is an approved plan: as Claude Code does, the agent leaves
// plan mode and says so.
func (t *turn) leavePlanMode() toolOutcome {
	t.a.mu.Lock()
	left := t.a.settings.PermissionMode == "plan"
	if left {
		t.a.settings.PermissionMode = "default"
	}
	t.a.mu.Unlock()
	if left {
		t.emit(map[string]any{"type": "system", "subtype": "status", "status": nil, "permissionMode": "default", "session_id": t.a.t.SessionID, "uuid": uuid()})
	}
	return toolOutcome{content: "User has approved your plan. You can now start coding.", useResult: map[string]any{}, summary: "The plan is approved: I will start."}
}

// answered is an AskUserQuestion call the user answered, in Claude Code's
// words.
func answered(raw json.RawMessage) toolOutcome {
	var in struct {
		Answers map[string]string `json:"answers"`
	}
	// Unreadable input reads as no answers, which the reply then says.
	_ = json.Unmarshal(raw, &in)
	var said []string
	for q, a := range in.Answers {
		said = append(said, fmt.Sprintf("%q=%q", q, a))
	}
	slices.Sort(said)
	return toolOutcome{
		content:   "Your questions have been answered: " + strings.Join(said, ", ") + ". You can now continue with these answers in mind.",
		useResult: json.RawMessage(raw),
		summary:   "You answered " + strings.Join(said, ", ") + ".",
	}
}

// think streams a thinking block as its own assistant message.
func (t *turn) think(text string) {
	msgID := "msg_demo" + strings.ToLower(rand.Text()[:12])
	t.stream(map[string]any{"type": "message_start", "message": t.message(msgID, []any{})})
	t.stream(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
	t.stream(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "thinking_delta", "thinking": text}})
	t.assistant(msgID, map[string]any{"type": "thinking", "thinking": text, "signature": "demo"})
	t.stream(map[string]any{"type": "content_block_stop", "index": 0})
	t.stop("end_turn")
}

type toolOutcome struct {
	content   string
	isError   bool
	useResult any
	summary   string
}

func (t *turn) runBash(ctx context.Context, raw json.RawMessage) toolOutcome {
	var in struct {
		Command string `json:"command"`
	}
	if err := json.Unmarshal(raw, &in); err != nil || in.Command == "" {
		return toolOutcome{content: "Error: Bash needs a command", isError: true, useResult: "Error: Bash needs a command", summary: "The command was malformed."}
	}
	var stdout, stderr limitedBuffer
	cmd := exec.CommandContext(ctx, "sh", "-c", in.Command)
	cmd.Dir = t.a.opts.WorkDir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Start()
	if err == nil {
		// Commands go first when the sandbox runs out of memory, so that
		// the agent survives to report it. Best effort: children forked
		// before this write keep the default.
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", cmd.Process.Pid), []byte("1000"), 0)
		err = cmd.Wait()
	}
	if cmd.ProcessState == nil {
		msg := "Error: " + err.Error()
		return toolOutcome{content: msg, isError: true, useResult: msg, summary: "The command could not start."}
	}
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal()) // as a shell reports it
	}
	content := strings.TrimRight(stdout.String()+stderr.String(), "\n")
	if code != 0 {
		content = strings.TrimRight(fmt.Sprintf("Exit code %d\n%s", code, content), "\n")
	} else if content == "" {
		content = "(Bash completed with no output)"
	}
	return toolOutcome{
		content: content,
		isError: code != 0,
		useResult: map[string]any{"stdout": stdout.String(), "stderr": stderr.String(), "interrupted": false,
			"isImage": false, "noOutputExpected": false},
		summary: fmt.Sprintf("The command exited with code %d.", code),
	}
}

func (t *turn) write(raw json.RawMessage) toolOutcome {
	var in struct {
		FilePath string `json:"file_path"`
		Content  string `json:"content"`
	}
	if err := json.Unmarshal(raw, &in); err != nil || in.FilePath == "" {
		return toolOutcome{content: "Error: Write needs file_path", isError: true, useResult: "Error: Write needs file_path", summary: "The file path was missing."}
	}
	path := in.FilePath
	if !filepath.IsAbs(path) {
		path = filepath.Join(t.a.opts.WorkDir, path)
	}
	err := os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = os.WriteFile(path, []byte(in.Content), 0o644)
	}
	if err != nil {
		msg := "Error: " + err.Error()
		return toolOutcome{content: msg, isError: true, useResult: msg, summary: "I could not write " + path + "."}
	}
	return toolOutcome{
		content:   "File created successfully at: " + path,
		useResult: map[string]any{"type": "create", "filePath": path, "content": in.Content},
		summary:   "I wrote " + path + ".",
	}
}

// streamText streams text as one assistant message with a text block and
// returns the message id; false when ctx ended first.
func (t *turn) streamText(ctx context.Context, text string) (string, bool) {
	t.turns++
	msgID := "msg_demo" + strings.ToLower(rand.Text()[:12])
	t.stream(map[string]any{"type": "message_start", "message": t.message(msgID, []any{})})
	t.stream(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	runes := []rune(text)
	for i := 0; i < len(runes); i += chunkRunes {
		if i > 0 && t.a.opts.ChunkDelay > 0 {
			select {
			case <-ctx.Done():
				return msgID, false
			case <-time.After(t.a.opts.ChunkDelay):
			}
		}
		if ctx.Err() != nil {
			return msgID, false
		}
		t.out++
		t.stream(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": string(runes[i:min(i+chunkRunes, len(runes))])}})
	}
	t.assistant(msgID, map[string]any{"type": "text", "text": text})
	t.stream(map[string]any{"type": "content_block_stop", "index": 0})
	return msgID, true
}

func (t *turn) message(id string, content []any) map[string]any {
	return map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": nil, "stop_sequence": nil, "usage": t.usage(),
	}
}

func (t *turn) usage() map[string]any {
	return map[string]any{"input_tokens": 0, "output_tokens": t.out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

func (t *turn) stop(reason string) {
	t.stream(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": reason, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": t.out}})
	t.stream(map[string]any{"type": "message_stop"})
}

func (t *turn) assistant(msgID string, block map[string]any) {
	m := t.message(msgID, []any{block})
	m["context_management"] = nil
	t.emit(map[string]any{"type": "assistant", "message": m, "parent_tool_use_id": nil, "session_id": t.a.t.SessionID, "uuid": uuid()})
}

func (t *turn) stream(event map[string]any) {
	t.emit(map[string]any{"type": "stream_event", "event": event, "session_id": t.a.t.SessionID, "parent_tool_use_id": nil, "uuid": uuid()})
}

func (t *turn) toolResult(toolID, content string, isError bool, useResult any) {
	t.emit(map[string]any{
		"type": "user",
		"message": map[string]any{"role": "user", "content": []any{map[string]any{
			"tool_use_id": toolID, "type": "tool_result", "content": content, "is_error": isError,
		}}},
		"parent_tool_use_id": nil, "session_id": t.a.t.SessionID, "uuid": uuid(),
		"timestamp": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), "tool_use_result": useResult,
	})
}

// interrupted ends an interrupted turn as Claude Code does.
func (t *turn) interrupted() error {
	t.emit(map[string]any{
		"type": "user", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": interruptMsg}}},
		"parent_tool_use_id": nil, "session_id": t.a.t.SessionID, "uuid": uuid(),
		"timestamp": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
	})
	t.emit(t.resultMsg("error_during_execution", ""))
	return nil
}

func (t *turn) result(text string) {
	t.emit(t.resultMsg("success", text))
}

func (t *turn) resultMsg(subtype, text string) map[string]any {
	m := map[string]any{
		"type": "result", "subtype": subtype, "is_error": subtype != "success",
		"duration_ms": time.Since(t.start).Milliseconds(), "duration_api_ms": 0,
		"num_turns": t.turns, "session_id": t.a.t.SessionID, "total_cost_usd": 0,
		"usage": t.usage(), "permission_denials": t.denials, "uuid": uuid(),
	}
	if t.denials == nil {
		m["permission_denials"] = []any{}
	}
	if subtype == "success" {
		m["result"], m["stop_reason"], m["terminal_reason"] = text, "end_turn", "completed"
	} else {
		m["stop_reason"], m["terminal_reason"] = nil, "aborted_streaming"
	}
	return m
}

func (t *turn) emit(v map[string]any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value above is a plain map of strings, numbers and slices.
		panic(fmt.Sprintf("demo: marshal message: %v", err))
	}
	t.host.Emit(b)
}

// limitedBuffer keeps the first maxOutput bytes written to it.
type limitedBuffer struct {
	bytes.Buffer
	dropped bool
}

// Write keeps what fits and drops the rest, never failing.
func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - l.Len(); room < len(p) {
		l.dropped = true
		l.Buffer.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return l.Buffer.Write(p)
}

// String returns what was kept, marked when some was dropped.
func (l *limitedBuffer) String() string {
	if l.dropped {
		return l.Buffer.String() + "\n[output truncated]"
	}
	return l.Buffer.String()
}

// uuid returns a random version 4 UUID.
func uuid() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
