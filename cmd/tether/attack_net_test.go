package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/wire"
)

// hostService is a service on the host's loopback (a database, a dev
// server, tether itself) that counts the connections it gets.
func hostService(t *testing.T) (addr string, hits *atomic.Int32) {
	hits = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("host-service-answered"))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), hits
}

// TestDemoSessionReachesNoNetwork: a demo session's approved command tries
// the daemon's own port (its /pair page among it) and a service on the
// host's loopback: the sandbox has a loopback of its own, nothing answers.
func TestDemoSessionReachesNoNetwork(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	svc, hits := hostService(t)
	c, _ := d.phone(nil)
	const id = "no-network"
	ready := d.sandboxedSession(c, id, "auto_approve")
	if ready.Sandbox.Network || len(ready.Sandbox.Egress) != 0 {
		t.Fatalf("the demo's sandbox claims a network: %+v", ready.Sandbox)
	}
	_, port, _ := net.SplitHostPort(d.info.Listen)
	tr := runApproved(t, c, id, "curl -sk --max-time 3 https://127.0.0.1:"+port+"/healthz; curl -s --max-time 3 http://"+svc+"/; echo tried")
	if !strings.Contains(tr.Result.Content, "tried") || strings.Contains(tr.Result.Content, `"status"`) || strings.Contains(tr.Result.Content, "host-service-answered") || hits.Load() != 0 {
		t.Fatalf("the sandbox reached the host: %q, %d hits", tr.Result.Content, hits.Load())
	}
}

// TestClaudeCodeEgressOnlyToItsAPI runs the real Claude Code CLI, whose
// API is a mock on the host's loopback: the session works through the
// egress proxy, while the command the model asks for reaches neither
// another service on the same loopback through the proxy (403) nor
// around it (no route: the sandbox's loopback is its own).
func TestClaudeCodeEgressOnlyToItsAPI(t *testing.T) {
	t.Parallel()
	bin := anthropicmock.ClaudeBin(t)
	svc, hits := hostService(t)
	script := "curl -s --max-time 3 http://" + svc + "/; curl -s --noproxy '*' --max-time 3 http://" + svc + "/; echo tried"
	api := anthropicmock.New(t, anthropicmock.Queue(
		anthropicmock.Reply{Blocks: []anthropicmock.Block{
			anthropicmock.ToolUse("Bash", map[string]any{"command": script, "description": "reach out"}),
		}, StopReason: "tool_use"},
		anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("Done.")}},
	))
	d := newDaemonEnv(t, []string{"ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-mock-not-a-key"}, "--claude-bin", bin)
	c, _ := d.phone(nil)
	const id = "claude-egress"
	c.Send(wire.TypeSessionStart, "start", map[string]any{"agent": "claude-code", "session_id": id, "working_directory": d.project, "policy": "auto_approve"})
	var ready wire.SessionReady
	c.WaitFor(wire.TypeSessionReady, &ready, nil)
	if ready.Sandbox == nil || !ready.Sandbox.Bubblewrap {
		t.Skip("no bubblewrap here")
	}
	if want := strings.TrimPrefix(api.URL, "http://"); len(ready.Sandbox.Egress) != 1 || ready.Sandbox.Egress[0] != want {
		t.Fatalf("egress %v, want only the API %s", ready.Sandbox.Egress, want)
	}
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "reach out"})
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, nil)
	c.WaitFor(wire.TypeTurnComplete, nil, nil)
	if !strings.Contains(tr.Result.Content, "tried") || !strings.Contains(tr.Result.Content, "may not reach") ||
		strings.Contains(tr.Result.Content, "host-service-answered") || hits.Load() != 0 {
		t.Fatalf("the command's output %q, %d hits on the host service", tr.Result.Content, hits.Load())
	}
	if !strings.Contains(streamed(c), "Done.") {
		t.Fatalf("the session did not finish through its API: %q", streamed(c))
	}
}
