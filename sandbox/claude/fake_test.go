package claude

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
)

// The test binary doubles as a fake claude CLI: with TETHER_FAKE_CLAUDE set
// to a mode it speaks the stream-json protocol on its standard input and
// output, scripted for cases the real CLI cannot be made to produce at will.
func TestMain(m *testing.M) {
	if mode := os.Getenv("TETHER_FAKE_CLAUDE"); mode != "" {
		os.Exit(fakeClaude(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

const fakeSession = "fake-session-1"

// fakeClaude is the fake CLI's main. Modes:
//
//	echo       init, then a success result for every prompt
//	control    sends an unknown control_request and reports the answer in
//	           the result's "got"
//	withdraw   asks can_use_tool, cancels it, and reports what it read in
//	           the next 300 ms in the result's "got"
//	die        exits with status 3 after init unless started with --resume
//	deaf       ignores interrupts (no result) unless started with --resume
//	long       writes a 4 MiB assistant line and a line that is not JSON
//	stubborn   ignores SIGTERM and the end of its input
//	refuse     answers set_model with an error, exits at set_permission_mode
//	mute       never answers set_model
func fakeClaude(mode string, args []string) int {
	sid := fakeSession
	resumed := false
	if i := slices.Index(args, "--resume"); i >= 0 && i+1 < len(args) {
		sid, resumed = args[i+1], true
	}
	if mode == "stubborn" {
		signal.Ignore(syscall.SIGTERM)
	}
	in := make(chan []byte)
	go func() {
		defer close(in)
		br := bufio.NewReader(os.Stdin)
		for {
			b, err := br.ReadBytes('\n')
			if len(bytes.TrimSpace(b)) > 0 {
				in <- bytes.TrimSpace(b)
			}
			if err != nil {
				return
			}
		}
	}()
	out := bufio.NewWriter(os.Stdout)
	write := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		out.Write(append(b, '\n'))
		out.Flush()
	}
	result := func(got any) {
		write(map[string]any{"type": "result", "subtype": "success", "is_error": false, "session_id": sid, "got": got})
	}
	for b := range in {
		var msg struct {
			Type      string `json:"type"`
			RequestID string `json:"request_id"`
			Request   struct {
				Subtype string `json:"subtype"`
			} `json:"request"`
		}
		if err := json.Unmarshal(b, &msg); err != nil {
			continue
		}
		if msg.Type == "control_request" && mode == "refuse" && msg.Request.Subtype == "set_model" {
			write(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "error", "request_id": msg.RequestID, "error": "no such model"}})
		}
		if msg.Type == "control_request" && mode == "refuse" && msg.Request.Subtype == "set_permission_mode" {
			return 4
		}
		if msg.Type == "control_request" && mode == "mute" && msg.Request.Subtype == "set_model" {
			continue
		}
		if msg.Type != "user" {
			continue
		}
		write(map[string]any{"type": "system", "subtype": "init", "session_id": sid, "args": args, "pid": os.Getpid()})
		switch {
		case mode == "control":
			write(map[string]any{"type": "control_request", "request_id": "m1", "request": map[string]any{"subtype": "mystery"}})
			result(json.RawMessage(<-in))
		case mode == "withdraw":
			write(map[string]any{"type": "control_request", "request_id": "p1", "request": map[string]any{
				"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]string{"command": "true"}, "tool_use_id": "toolu_1"}})
			write(map[string]any{"type": "control_cancel_request", "request_id": "p1"})
			var got []string
			timeout := time.After(300 * time.Millisecond)
		collect:
			for {
				select {
				case l := <-in:
					got = append(got, string(l))
				case <-timeout:
					break collect
				}
			}
			result(got)
		case mode == "die" && !resumed:
			return 3
		case mode == "deaf" && !resumed:
			for range in {
			}
			return 0
		case mode == "long":
			write(map[string]any{"type": "assistant", "session_id": sid, "message": map[string]any{
				"content": []map[string]string{{"type": "text", "text": strings.Repeat("x", 4<<20)}}}})
			out.WriteString("this line is not json\n")
			result(nil)
		default:
			result(nil)
		}
	}
	if mode == "stubborn" {
		time.Sleep(time.Minute)
	}
	return 0
}

// newFake returns an adapter running the test binary as a fake CLI in mode.
func newFake(t *testing.T, mode string, opts Options) agent.Agent {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts.Bin = bin
	opts.Env = append(os.Environ(), "TETHER_FAKE_CLAUDE="+mode)
	opts.Logger = testLogger(t)
	a, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// fakeResult is the result line of the fake CLI.
type fakeResult struct {
	Type      string          `json:"type"`
	SessionID string          `json:"session_id"`
	Args      []string        `json:"args"`
	PID       int             `json:"pid"`
	Got       json.RawMessage `json:"got"`
}

// lines returns the emitted messages decoded as the fake's lines.
func (h *recHost) lines(t *testing.T) []fakeResult {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]fakeResult, len(h.msgs))
	for i, m := range h.msgs {
		if err := json.Unmarshal(m, &out[i]); err != nil {
			t.Fatalf("emitted message %d is not JSON: %v", i, err)
		}
	}
	return out
}

func lastGot(t *testing.T, h *recHost) json.RawMessage {
	t.Helper()
	ls := h.lines(t)
	if len(ls) == 0 || ls[len(ls)-1].Type != "result" {
		t.Fatalf("emitted %+v, want a result last", ls)
	}
	return ls[len(ls)-1].Got
}

func TestUnknownControlRequestRefused(t *testing.T) {
	t.Parallel()
	a := newFake(t, "control", Options{})
	h := &recHost{}
	query(t, a, "hi", h)
	var got struct {
		Type     string `json:"type"`
		Response struct {
			Subtype   string `json:"subtype"`
			RequestID string `json:"request_id"`
			Error     string `json:"error"`
		} `json:"response"`
	}
	if err := json.Unmarshal(lastGot(t, h), &got); err != nil {
		t.Fatal(err)
	}
	if got.Type != "control_response" || got.Response.Subtype != "error" || got.Response.RequestID != "m1" || !strings.Contains(got.Response.Error, "mystery") {
		t.Errorf("answer to an unknown control_request = %+v, want an error response for m1", got)
	}
	for _, l := range h.lines(t) {
		if l.Type == "control_request" {
			t.Error("the control_request was emitted")
		}
	}
}

func TestControlCancelWithdrawsPermission(t *testing.T) {
	t.Parallel()
	a := newFake(t, "withdraw", Options{})
	ended := make(chan error, 1)
	h := &recHost{decide: func(ctx context.Context, req agent.PermissionRequest) (agent.PermissionDecision, error) {
		<-ctx.Done()
		ended <- ctx.Err()
		return agent.PermissionDecision{Behavior: "allow"}, nil
	}}
	query(t, a, "hi", h)
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("permission ctx ended with %v, want context.Canceled", err)
	}
	reqs := h.requests()
	if len(reqs) != 1 || reqs[0].RequestID != "p1" || reqs[0].ToolUseID != "toolu_1" || string(reqs[0].Input) != `{"command":"true"}` {
		t.Errorf("permission requests = %+v", reqs)
	}
	var got []string
	if err := json.Unmarshal(lastGot(t, h), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("the CLI was sent %q after withdrawing, want nothing", got)
	}
}

func TestExitedProcessRestartsWithResume(t *testing.T) {
	t.Parallel()
	a := newFake(t, "die", Options{})
	err := a.Query(context.Background(), "first", &recHost{})
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("Query on a dying CLI = %v, want ErrExited with its status", err)
	}
	if got := a.SessionID(); got != fakeSession {
		t.Errorf("SessionID = %q, want %q from system/init", got, fakeSession)
	}
	h := &recHost{}
	query(t, a, "second", h)
	ls := h.lines(t)
	if len(ls) != 2 || !slices.Contains(ls[0].Args, "--resume") || !slices.Contains(ls[0].Args, fakeSession) {
		t.Errorf("restarted CLI's lines = %+v, want init with --resume %s and a result", ls, fakeSession)
	}
}

func TestInterruptTimeoutKillsAndRestarts(t *testing.T) {
	t.Parallel()
	a := newFake(t, "deaf", Options{InterruptTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	h := &recHost{}
	errc := make(chan error, 1)
	go func() { errc <- a.Query(ctx, "hi", h) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(h.lines(t)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	pid := h.lines(t)[0].PID
	start := time.Now()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Query = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Query did not return after the interrupt timeout")
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("Query returned %v after the interrupt, want about the 300ms timeout", took)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("deaf CLI pid %d still there (kill 0: %v)", pid, err)
	}
	h2 := &recHost{}
	query(t, a, "again", h2)
	if ls := h2.lines(t); len(ls) != 2 || !slices.Contains(ls[0].Args, "--resume") {
		t.Errorf("next turn's lines = %+v, want a resumed CLI", ls)
	}
}

func TestCloseEscalates(t *testing.T) {
	t.Parallel()
	a := newFake(t, "stubborn", Options{StopTimeout: 200 * time.Millisecond})
	h := &recHost{}
	query(t, a, "hi", h)
	pid := h.lines(t)[0].PID
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took < 400*time.Millisecond || took > 3*time.Second {
		t.Errorf("Close took %v, want two 200ms grace periods and a SIGKILL", took)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("stubborn CLI pid %d still there (kill 0: %v)", pid, err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := a.Query(context.Background(), "hi", h); !errors.Is(err, ErrClosed) {
		t.Errorf("Query after Close = %v, want ErrClosed", err)
	}
}

func TestLongLinesPassWhole(t *testing.T) {
	t.Parallel()
	a := newFake(t, "long", Options{})
	h := &recHost{}
	query(t, a, "hi", h)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.msgs) != 3 {
		t.Fatalf("emitted %d messages, want init, the long assistant line and the result (not the non-JSON line)", len(h.msgs))
	}
	var long struct {
		Message struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal(h.msgs[1], &long); err != nil {
		t.Fatalf("long line: %v", err)
	}
	if n := len(long.Message.Content[0].Text); n != 4<<20 {
		t.Errorf("long line's text has %d bytes, want %d", n, 4<<20)
	}
}

func TestQueryCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	a := newFake(t, "echo", Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Query(ctx, "hi", &recHost{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Query with a cancelled ctx = %v, want context.Canceled", err)
	}
	if got := a.SessionID(); got != "" {
		t.Errorf("SessionID = %q, want empty: no process should have started", got)
	}
}

func TestNewWithoutBin(t *testing.T) {
	t.Parallel()
	if _, err := New(Options{}); !errors.Is(err, ErrNoBin) {
		t.Errorf("New without Bin = %v, want ErrNoBin", err)
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	orig := json.RawMessage(`{"command":"ls"}`)
	tests := []struct {
		name string
		dec  agent.PermissionDecision
		err  error
		want permissionResult
	}{
		{"allow keeps input", agent.PermissionDecision{Behavior: "allow"}, nil, permissionResult{Behavior: "allow", UpdatedInput: orig}},
		{"allow null input", agent.PermissionDecision{Behavior: "allow", UpdatedInput: json.RawMessage("null")}, nil, permissionResult{Behavior: "allow", UpdatedInput: orig}},
		{"allow updated", agent.PermissionDecision{Behavior: "allow", UpdatedInput: json.RawMessage(`{"command":"pwd"}`)}, nil, permissionResult{Behavior: "allow", UpdatedInput: json.RawMessage(`{"command":"pwd"}`)}},
		{"allow non-object", agent.PermissionDecision{Behavior: "allow", UpdatedInput: json.RawMessage(`[1]`)}, nil, permissionResult{Behavior: "deny", Message: msgInvalidDecision}},
		{"deny message", agent.PermissionDecision{Behavior: "deny", Message: "no"}, nil, permissionResult{Behavior: "deny", Message: "no"}},
		{"deny default", agent.PermissionDecision{Behavior: "deny"}, nil, permissionResult{Behavior: "deny", Message: msgDenied}},
		{"unknown behavior", agent.PermissionDecision{Behavior: "maybe"}, nil, permissionResult{Behavior: "deny", Message: msgInvalidDecision}},
		{"cancelled", agent.PermissionDecision{}, fmt.Errorf("wrapped: %w", context.Canceled), permissionResult{Behavior: "deny", Message: msgInterrupted}},
		{"failed", agent.PermissionDecision{Behavior: "allow"}, errors.New("broker down"), permissionResult{Behavior: "deny", Message: msgNoDecision}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(orig, tt.dec, tt.err)
			if got.Behavior != tt.want.Behavior || got.Message != tt.want.Message || string(got.UpdatedInput) != string(tt.want.UpdatedInput) {
				t.Errorf("decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	a := newFake(t, "echo", Options{Settings: agent.Settings{Model: "claude-test-model", PermissionMode: "plan"}, ResumeID: "sess-0"})
	h := &recHost{}
	query(t, a, "hi", h)
	want := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--permission-prompt-tool", "stdio", "--include-partial-messages", "--model", "claude-test-model", "--permission-mode", "plan", "--resume", "sess-0"}
	if got := h.lines(t)[0].Args; !slices.Equal(got, want) {
		t.Errorf("CLI arguments = %q, want %q", got, want)
	}
}

// TestNewSessionIDThenResume: a conversation named before it exists
// starts under that id (--session-id), and a CLI started again later
// resumes it.
func TestNewSessionIDThenResume(t *testing.T) {
	t.Parallel()
	a := newFake(t, "die", Options{NewSessionID: "named-0"})
	h := &recHost{}
	if err := a.Query(context.Background(), "hi", h); !errors.Is(err, ErrExited) {
		t.Fatalf("Query on a dying CLI = %v, want ErrExited", err)
	}
	first := h.lines(t)[0].Args
	if i := slices.Index(first, "--session-id"); i < 0 || first[i+1] != "named-0" || slices.Contains(first, "--resume") {
		t.Fatalf("first CLI's arguments = %q", first)
	}
	h2 := &recHost{}
	query(t, a, "again", h2)
	again := h2.lines(t)[0].Args
	if i := slices.Index(again, "--resume"); i < 0 || slices.Contains(again, "--session-id") {
		t.Fatalf("the CLI started again: %q, want --resume", again)
	}
}

func TestConcurrentQueriesTakeTurns(t *testing.T) {
	t.Parallel()
	a := newFake(t, "echo", Options{})
	hosts := []*recHost{{}, {}, {}}
	errc := make(chan error, len(hosts))
	for i, h := range hosts {
		go func() { errc <- a.Query(context.Background(), fmt.Sprint("prompt ", i), h) }()
	}
	for range hosts {
		if err := <-errc; err != nil {
			t.Errorf("Query: %v", err)
		}
	}
	for i, h := range hosts {
		if ls := h.lines(t); len(ls) != 2 || ls[0].Type != "system" || ls[1].Type != "result" {
			t.Errorf("query %d saw %+v, want its own init and result", i, ls)
		}
	}
}

func TestConfigureRefused(t *testing.T) {
	t.Parallel()
	a := newFake(t, "refuse", Options{}).(agent.Configurable)
	query(t, a, "hi", &recHost{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := a.Configure(ctx, agent.Settings{Model: "nope"}); !errors.Is(err, ErrRefused) || got.Model != "" {
		t.Fatalf("refused set_model: %+v, %v", got, err)
	}
	// A CLI that exits instead of answering: the next one gets the
	// settings as arguments.
	want := agent.Settings{PermissionMode: "plan"}
	if got, err := a.Configure(ctx, want); err != nil || got != want {
		t.Fatalf("Configure of a CLI that exits: %+v, %v", got, err)
	}
	ad := a.(*adapter)
	ad.mu.Lock()
	p := ad.proc
	ad.mu.Unlock()
	p.waitErr()
	want = agent.Settings{PermissionMode: "acceptEdits"}
	if got, err := a.Configure(ctx, want); err != nil || got != want {
		t.Fatalf("Configure without a CLI: %+v, %v", got, err)
	}
	h := &recHost{}
	query(t, a, "again", h)
	if args := h.lines(t)[0].Args; !slices.Contains(args, "acceptEdits") {
		t.Errorf("restarted CLI's arguments = %q", args)
	}
	a.Close()
	if _, err := a.Configure(ctx, want); !errors.Is(err, ErrClosed) {
		t.Errorf("Configure after Close: %v", err)
	}
}

// TestConfigureUnanswered: a CLI that never answers a control request
// keeps Configure no longer than ControlTimeout, and the next turn runs.
func TestConfigureUnanswered(t *testing.T) {
	t.Parallel()
	a := newFake(t, "mute", Options{ControlTimeout: 200 * time.Millisecond}).(agent.Configurable)
	query(t, a, "hi", &recHost{})
	start := time.Now()
	if _, err := a.Configure(context.Background(), agent.Settings{Model: "m"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Configure of a CLI that does not answer: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Configure waited %v", d)
	}
	query(t, a, "again", &recHost{})
}
