package codex

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tetherdev/tether/internal/openaimock"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/sandbox/runmcp"
)

// envTestMCP makes the test binary the run tools' MCP server, as `tether
// mcp` is in a sandbox: Codex starts it over stdio.
const envTestMCP = "TETHER_CODEX_TEST_MCP"

func TestMain(m *testing.M) {
	if os.Getenv(envTestMCP) != "" {
		os.Exit(serveMCP())
	}
	os.Exit(m.Run())
}

func serveMCP() int {
	ctx := context.Background()
	c, err := runmcp.Dial(ctx, os.Getenv(runmcp.EnvAddr), os.Getenv(runmcp.EnvToken))
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	defer c.Close()
	if err := runmcp.NewServer(c, "test").Run(ctx, &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// runDaemon answers the run tools' calls as the daemon would, recording
// them.
type runDaemon struct {
	mu    sync.Mutex
	calls []agent.RunCall
}

func (d *runDaemon) Call(_ context.Context, c agent.RunCall) (json.RawMessage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, c)
	if c.Tool == agent.ToolSend {
		return json.RawMessage(`{"id":"m2","seq":2}`), nil
	}
	return json.RawMessage(`{"messages":[{"from":"lead","type":"task","content":"Write a greeting."}]}`), nil
}

func (d *runDaemon) seen() []agent.RunCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// emitHook is a host that calls onEmit with each message it records.
type emitHook struct {
	*host
	onEmit func(map[string]any)
}

func (h emitHook) Emit(m json.RawMessage) {
	h.host.Emit(m)
	var v map[string]any
	json.Unmarshal(m, &v)
	h.onEmit(v)
}

// TestRunToolsThroughMCP: a run's tools, given as an MCP server, are found
// by the model with tool_search and called in Codex's namespace for them;
// no approval is asked; the host sees each call as Claude Code would show
// it (mcp__tether__NAME, its arguments, the server's text) and the model
// gets the daemon's answers. The relay's token is on no command line, and
// an interrupted turn leaves the server running for the next.
func TestRunToolsThroughMCP(t *testing.T) {
	t.Parallel()
	d := &runDaemon{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const token = "relay-token-for-the-test"
	go runmcp.ServeRelay(ctx, ln, token, d, nil)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	send := map[string]any{"to": "reviewer", "type": "result", "content": "The greeting is written.", "signal": "DONE"}
	api := openaimock.New(t, openaimock.Queue(
		openaimock.Reply{Items: []openaimock.Item{openaimock.ToolSearch("tether run messages")}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.NamespacedCall("mcp__tether", agent.ToolReceive, map[string]any{})}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.NamespacedCall("mcp__tether", agent.ToolSend, send)}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Sent to the reviewer.")}},
		// The second turn, interrupted while it streams.
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("A slow answer, interrupted while it streams.")}, Delay: time.Second},
		// The third: the server still answers.
		openaimock.Reply{Items: []openaimock.Item{openaimock.NamespacedCall("mcp__tether", agent.ToolStatus, map[string]any{})}},
		openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Status read.")}},
	))
	a := newAdapterWith(t, api, t.TempDir(), "", map[string]agent.MCPServer{runmcp.ServerName: {Command: exe,
		Env: map[string]string{envTestMCP: "1", runmcp.EnvAddr: ln.Addr().String(), runmcp.EnvToken: token}}})
	h := &host{decide: func(_ context.Context, r agent.PermissionRequest) (agent.PermissionDecision, error) {
		t.Errorf("asked about %s %s", r.ToolName, r.Input)
		return agent.PermissionDecision{Behavior: "deny"}, nil
	}}
	if err := a.Query(context.Background(), "You are the implementer of a tether run.", h); err != nil {
		t.Fatal(err)
	}
	if args := a.(*adapter).proc.cmd.Args; strings.Contains(strings.Join(args, " "), token) {
		t.Errorf("the relay's token is on the app-server's command line: %q", args)
	}
	if got := d.seen(); len(got) != 2 || got[0].Tool != agent.ToolReceive ||
		got[1] != (agent.RunCall{Tool: agent.ToolSend, To: "reviewer", Type: "result", Content: "The greeting is written.", Signal: "DONE"}) {
		t.Fatalf("the daemon got %+v", got)
	}
	var uses []string
	for _, m := range h.msgs {
		if m["type"] != "assistant" {
			continue
		}
		for _, b := range m["message"].(map[string]any)["content"].([]any) {
			if b := b.(map[string]any); b["type"] == "tool_use" {
				in, _ := json.Marshal(b["input"])
				uses = append(uses, b["name"].(string)+" "+string(in))
			}
		}
	}
	if want := []string{"mcp__tether__receive_messages {}",
		`mcp__tether__send_to_agent {"content":"The greeting is written.","signal":"DONE","to":"reviewer","type":"result"}`}; !slices.Equal(uses, want) {
		t.Errorf("tool_use %q, want %q", uses, want)
	}
	res := h.toolResults()
	if len(res) != 2 || res[0]["content"] != `{"messages":[{"from":"lead","type":"task","content":"Write a greeting."}]}` || res[0]["is_error"] != false ||
		res[1]["content"] != `{"id":"m2","seq":2}` || res[1]["is_error"] != false {
		t.Errorf("tool_result %v", res)
	}
	reqs := api.Requests()
	if outs := strings.Join(mapValues(reqs[3].Outputs()), "\n"); !strings.Contains(outs, `{"id":"m2","seq":2}`) || !strings.Contains(outs, "Write a greeting.") {
		t.Errorf("the model got %q", outs)
	}

	tctx, stop := context.WithCancel(context.Background())
	defer stop()
	slow := emitHook{host: &host{}, onEmit: func(m map[string]any) {
		if ev, ok := m["event"].(map[string]any); ok && ev["type"] == "content_block_delta" {
			stop()
		}
	}}
	if err := a.Query(tctx, "answer slowly", slow); err == nil {
		t.Fatal("the interrupted turn returned no error")
	}
	h2 := &host{decide: h.decide}
	if err := a.Query(context.Background(), "the run's status?", h2); err != nil {
		t.Fatal(err)
	}
	if got := d.seen(); len(got) != 3 || got[2].Tool != agent.ToolStatus {
		t.Fatalf("after the interrupt the daemon got %+v", got)
	}
	if res := h2.toolResults(); len(res) != 1 || res[0]["is_error"] != false {
		t.Errorf("bridge_status after the interrupt: %v", res)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
