package sandbox_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
)

func TestCommandRoundTrip(t *testing.T) {
	cmds := []sandbox.BridgeCommand{
		{Cmd: sandbox.CmdQuery, Prompt: "hi\nthere \"you\"", SessionID: "s", IncludePartialMessages: true},
		{Cmd: sandbox.CmdResume, SessionID: "abc"},
		{Cmd: sandbox.CmdInterrupt},
		{Cmd: sandbox.CmdShutdown},
		{Cmd: sandbox.CmdPing, ID: "7"},
		{Cmd: sandbox.CmdConfigure, ID: "c1", Settings: &agent.Settings{Model: "sonnet", PermissionMode: "plan", MaxThinkingTokens: 2048}},
		{Cmd: sandbox.CmdPermissionResponse, RequestID: "r", Decision: &agent.PermissionDecision{
			Behavior: "allow", UpdatedInput: json.RawMessage(`{"command":"ls"}`)}},
		{Cmd: sandbox.CmdRunReply, ID: "run-1", Result: json.RawMessage(`{"seq":1}`)},
		{Cmd: sandbox.CmdRunReply, ID: "run-2", Error: "no participant \"x\""},
		{Cmd: sandbox.CmdAck, Seq: 42},
	}
	var buf bytes.Buffer
	enc := sandbox.NewEncoder(&buf)
	for _, c := range cmds {
		if err := enc.Encode(c); err != nil {
			t.Fatal(err)
		}
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != len(cmds) {
		t.Fatalf("%d lines for %d commands", n, len(cmds))
	}
	dec := sandbox.NewDecoder(&buf, 0)
	for _, want := range cmds {
		got, err := dec.DecodeCommand()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}
	if _, err := dec.DecodeCommand(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last line: %v, want EOF", err)
	}
}

func TestEventRoundTrip(t *testing.T) {
	evs := []sandbox.Event{
		{Ev: sandbox.EvReady},
		{Ev: sandbox.EvMessage, Data: json.RawMessage(`{"type":"assistant","message":{"content":[]}}`)},
		{Ev: sandbox.EvError, Error: "boom", Code: sandbox.CodeBusy},
		{Ev: sandbox.EvDone, SessionID: "s", AgentSessionID: "a"},
		{Ev: sandbox.EvPermissionRequest, Request: &agent.PermissionRequest{RequestID: "r", ToolName: "Bash", Input: json.RawMessage(`{"command":"ls"}`), ToolUseID: "t"}},
		{Ev: sandbox.EvPermissionCancel, RequestID: "r"},
		{Ev: sandbox.EvPong, ID: "1"},
		{Ev: sandbox.EvConfigured, ID: "c1", Settings: &agent.Settings{Model: "sonnet"}},
		{Ev: sandbox.EvRunCall, ID: "run-1", Call: &agent.RunCall{Tool: agent.ToolSend, To: "reviewer", Type: "result", Content: "done", Signal: "DONE"}},
	}
	var buf bytes.Buffer
	enc := sandbox.NewEncoder(&buf)
	for _, e := range evs {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	dec := sandbox.NewDecoder(&buf, 0)
	for _, want := range evs {
		got, err := dec.DecodeEvent()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  error
	}{
		{"too long", `{"cmd":"query","prompt":"` + strings.Repeat("x", 200) + `"}` + "\n", sandbox.ErrLineTooLong},
		{"not json", "hello\n", sandbox.ErrMalformed},
		{"array", "[1]\n", sandbox.ErrMalformed},
		{"broken object", `{"cmd":` + "\n", sandbox.ErrMalformed},
		{"wrong type", `{"cmd":1}` + "\n", sandbox.ErrMalformed},
		{"unknown", `{"cmd":"dance"}` + "\n", sandbox.ErrUnknownCommand},
		{"no cmd", `{}` + "\n", sandbox.ErrUnknownCommand},
		{"query without prompt", `{"cmd":"query"}` + "\n", sandbox.ErrInvalid},
		{"resume without session", `{"cmd":"resume"}` + "\n", sandbox.ErrInvalid},
		{"configure without id", `{"cmd":"configure","settings":{}}` + "\n", sandbox.ErrInvalid},
		{"configure without settings", `{"cmd":"configure","id":"c"}` + "\n", sandbox.ErrInvalid},
		{"configure with bad settings", `{"cmd":"configure","id":"c","settings":{"model":5}}` + "\n", sandbox.ErrMalformed},
		{"answer without decision", `{"cmd":"permission_response","requestId":"r"}` + "\n", sandbox.ErrInvalid},
		{"answer with bad behavior", `{"cmd":"permission_response","requestId":"r","decision":{"behavior":"maybe"}}` + "\n", sandbox.ErrInvalid},
		{"run reply without id", `{"cmd":"run_reply","result":{}}` + "\n", sandbox.ErrInvalid},
		{"run reply without result or error", `{"cmd":"run_reply","id":"r"}` + "\n", sandbox.ErrInvalid},
		{"ack of a negative seq", `{"cmd":"ack","seq":-1}` + "\n", sandbox.ErrInvalid},
		{"run reply with a bad error", `{"cmd":"run_reply","id":"r","error":7}` + "\n", sandbox.ErrMalformed},
		{"no final newline", `{"cmd":"ping"}`, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.input
			if tt.want != io.ErrUnexpectedEOF {
				in += `{"cmd":"ping","id":"after"}` + "\n"
			}
			dec := sandbox.NewDecoder(strings.NewReader(in), 128)
			_, err := dec.DecodeCommand()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if tt.want == io.ErrUnexpectedEOF {
				return
			}
			// The decoder goes on with the next line.
			c, err := dec.DecodeCommand()
			if err != nil || c.ID != "after" {
				t.Errorf("next line: %+v, %v", c, err)
			}
		})
	}
}

func TestDecodeLongLinesAcrossBuffers(t *testing.T) {
	prompt := strings.Repeat("é", 200<<10) // longer than the reader's buffer
	var buf bytes.Buffer
	enc := sandbox.NewEncoder(&buf)
	for range 2 {
		if err := enc.Encode(sandbox.BridgeCommand{Cmd: sandbox.CmdQuery, Prompt: prompt}); err != nil {
			t.Fatal(err)
		}
	}
	dec := sandbox.NewDecoder(&buf, 1<<20)
	for range 2 {
		c, err := dec.DecodeCommand()
		if err != nil || c.Prompt != prompt {
			t.Fatalf("long prompt: %d bytes, %v", len(c.Prompt), err)
		}
	}
	dec = sandbox.NewDecoder(bytes.NewReader(bytes.Repeat([]byte("x"), 300<<10)), 1<<10)
	if _, err := dec.DecodeCommand(); !errors.Is(err, io.EOF) {
		t.Errorf("endless line at EOF: %v, want EOF after skipping", err)
	}
}

func TestEventValidation(t *testing.T) {
	tests := []struct {
		line string
		want error
	}{
		{`{"ev":"message"}`, sandbox.ErrInvalid},
		{`{"ev":"message","data":"text"}`, sandbox.ErrInvalid},
		{`{"ev":"error"}`, sandbox.ErrInvalid},
		{`{"ev":"permission_request","request":{}}`, sandbox.ErrInvalid},
		{`{"ev":"permission_cancel"}`, sandbox.ErrInvalid},
		{`{"ev":"configured","id":"c"}`, sandbox.ErrInvalid},
		{`{"ev":"configured","settings":{}}`, sandbox.ErrInvalid},
		{`{"ev":"run_call","call":{"tool":"bridge_status"}}`, sandbox.ErrInvalid},
		{`{"ev":"run_call","id":"r"}`, sandbox.ErrInvalid},
		{`{"ev":"run_call","id":"r","call":"send"}`, sandbox.ErrMalformed},
		{`{"ev":"party"}`, sandbox.ErrUnknownEvent},
	}
	for _, tt := range tests {
		dec := sandbox.NewDecoder(strings.NewReader(tt.line+"\n"), 0)
		if _, err := dec.DecodeEvent(); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.line, err, tt.want)
		}
	}
}

// FuzzDecodeCommand checks that the decoder never panics, that what it
// accepts is valid, and that it encodes to a line that decodes the same.
func FuzzDecodeCommand(f *testing.F) {
	for _, s := range []string{
		`{"cmd":"query","prompt":"hi","sessionId":"s","includePartialMessages":true}`,
		`{"cmd":"permission_response","requestId":"r","decision":{"behavior":"deny","message":"no"}}`,
		`{"cmd":"ping","id":"1"}` + "\n" + `{"cmd":"shutdown"}`,
		`{"cmd":"resume","sessionId":"x"}`, "\n\n", `[`, `{"cmd":"ack","seq":7}`,
		`{"cmd":"configure","id":"c","settings":{"model":"sonnet","permissionMode":"plan","maxThinkingTokens":1024}}`, `{"cmd":"query","prompt":"\u2028"}`,
	} {
		f.Add([]byte(s + "\n"))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		dec := sandbox.NewDecoder(bytes.NewReader(in), 256)
		for range 8 {
			c, err := dec.DecodeCommand()
			if err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					return
				}
				continue
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("accepted an invalid command %+v: %v", c, err)
			}
			var buf bytes.Buffer
			if err := sandbox.NewEncoder(&buf).Encode(c); err != nil {
				t.Fatal(err)
			}
			again, err := sandbox.NewDecoder(&buf, 0).DecodeCommand()
			if err != nil || !reflect.DeepEqual(again, c) {
				t.Fatalf("re-decoded %+v (%v), want %+v", again, err, c)
			}
		}
	})
}

// FuzzDecodeEvent checks the event decoder the same way.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"ev":"ready"}`, `{"ev":"message","data":{"type":"result","subtype":"success"}}`,
		`{"ev":"permission_request","request":{"requestId":"r","toolName":"Bash","input":{"command":"ls"}}}`,
		`{"ev":"done","sessionId":"s","agentSessionId":"a"}`, `{"ev":"error","error":"x","code":"busy"}`,
		`{"ev":"configured","id":"c","settings":{"model":"sonnet"}}`,
	} {
		f.Add([]byte(s + "\n"))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		dec := sandbox.NewDecoder(bytes.NewReader(in), 256)
		for range 8 {
			e, err := dec.DecodeEvent()
			if err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					return
				}
				continue
			}
			if err := e.Validate(); err != nil {
				t.Fatalf("accepted an invalid event %+v: %v", e, err)
			}
			var buf bytes.Buffer
			if err := sandbox.NewEncoder(&buf).Encode(e); err != nil {
				t.Fatal(err)
			}
			if _, err := sandbox.NewDecoder(&buf, 0).DecodeEvent(); err != nil {
				t.Fatalf("re-decoding %s: %v", buf.Bytes(), err)
			}
		}
	})
}
