package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

// TestDemoSessionGetsNoAgentSecrets gives the daemon an Anthropic key and
// runs `env` in a demo session, approved from the phone: the key is not in
// the demo's environment, so neither in the tool result the phone sees nor
// anywhere in the data directory, where the event log keeps it.
func TestDemoSessionGetsNoAgentSecrets(t *testing.T) {
	const secret = "sk-ant-daemon-secret-4242"
	d := newDaemonEnv(t, []string{"ANTHROPIC_API_KEY=" + secret, "CLAUDE_CODE_USE_BEDROCK=bedrock-4242", "OPENAI_API_KEY=openai-4242"})
	c, _ := d.phone(nil)
	const id = "env-leak"
	d.startSession(c, id, "ask")
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "run: env; echo env-done"})
	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	c.Send(wire.TypeApprovalResponse, "r1", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, nil)
	c.WaitFor(wire.TypeTurnComplete, nil, nil)
	if !tr.Result.Success || !strings.Contains(tr.Result.Content, "env-done") || !strings.Contains(tr.Result.Content, "PATH=") {
		t.Fatalf("tool_result %+v", tr)
	}
	for _, leak := range []string{"4242", "ANTHROPIC_", "CLAUDE_CODE_", "OPENAI_"} {
		if strings.Contains(tr.Result.Content, leak) {
			t.Errorf("the demo's environment holds %q:\n%s", leak, tr.Result.Content)
		}
	}
	var data string
	for _, kv := range d.env {
		if v, ok := strings.CutPrefix(kv, "TETHER_DATA="); ok {
			data = v
		}
	}
	filepath.WalkDir(data, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the key", p)
		}
		return nil
	})
}

// TestSessionCannotReachAHostUnixSocket listens on a Unix socket in the
// session's own working directory, as a dev server or database might, and
// has the session's approved command connect to it: the sandbox may not
// create a Unix socket, and the service sees no connection.
func TestSessionCannotReachAHostUnixSocket(t *testing.T) {
	d := newDaemon(t)
	sock := filepath.Join(d.project, "service.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var hits atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			conn.Write([]byte("HTTP/1.0 200 OK\r\n\r\nhost-service-answered"))
			conn.Close()
		}
	}()
	c, _ := d.phone(nil)
	const id = "unix-socket"
	d.sandboxedSession(c, id, "ask")
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "run: curl -sS --max-time 2 --unix-socket " + sock + " http://x/"})
	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	c.Send(wire.TypeApprovalResponse, "r1", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, nil)
	t.Logf("tool_result %+v", tr.Result)
	if tr.Result.Success || strings.Contains(tr.Result.Content, "host-service-answered") || hits.Load() != 0 {
		t.Errorf("the session reached the host's socket: %+v, %d connections", tr.Result, hits.Load())
	}
}

// sandboxedSession starts a demo session and waits until it is ready; on a
// machine without bubblewrap the test is skipped, since what it attacks is
// not there.
func (d *daemon) sandboxedSession(c *wstest.Client, id, policy string) wire.SessionReady {
	d.t.Helper()
	d.startSession(c, id, policy)
	var ready wire.SessionReady
	c.WaitFor(wire.TypeSessionReady, &ready, forSession(id))
	if ready.Sandbox == nil || !ready.Sandbox.Bubblewrap {
		d.t.Skip("no bubblewrap here")
	}
	return ready
}
