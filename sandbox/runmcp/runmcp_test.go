package runmcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/sandbox/runmcp"
)

// daemon stands in for the daemon behind the sandbox bridge: it records
// the calls and answers each with the tool's name, or fails a send to
// "nobody".
type daemon struct {
	mu    sync.Mutex
	calls []agent.RunCall
}

func (d *daemon) Call(_ context.Context, c agent.RunCall) (json.RawMessage, error) {
	d.mu.Lock()
	d.calls = append(d.calls, c)
	d.mu.Unlock()
	if c.To == "nobody" {
		return nil, errors.New(`no participant "nobody" in this run`)
	}
	return json.Marshal(map[string]string{"answered": c.Tool})
}

func (d *daemon) seen() []agent.RunCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// relay serves the relay on the loopback and returns its address.
func relay(t *testing.T, d *daemon, token string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { runmcp.ServeRelay(ctx, ln, token, d, slog.New(slog.DiscardHandler)); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// TestToolsOverMCP drives the MCP server as an agent's CLI does, through
// the relay: the three tools are listed, a send reaches the daemon as the
// agent gave it, and a refusal comes back as a tool error.
func TestToolsOverMCP(t *testing.T) {
	t.Parallel()
	d := &daemon{}
	ctx := t.Context()
	relayClient, err := runmcp.Dial(ctx, relay(t, d, "secret"), "secret")
	if err != nil {
		t.Fatal(err)
	}
	defer relayClient.Close()
	st, ct := mcp.NewInMemoryTransports()
	server := runmcp.NewServer(relayClient, "test")
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-cli"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if want := []string{agent.ToolStatus, agent.ToolReceive, agent.ToolSend}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: agent.ToolSend, Arguments: map[string]any{
		"to": "reviewer", "type": "result", "content": "done", "signal": "DONE"}})
	if err != nil || res.IsError {
		t.Fatalf("send_to_agent: %v %+v", err, res)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != `{"answered":"send_to_agent"}` {
		t.Fatalf("send_to_agent answered %s", text)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: agent.ToolReceive}); err != nil {
		t.Fatal(err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: agent.ToolSend, Arguments: map[string]any{
		"to": "nobody", "type": "chat", "content": "hi"}})
	if err != nil || !res.IsError {
		t.Fatalf("a refused send: %v %+v, want a tool error", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: agent.ToolSend, Arguments: map[string]any{"to": "reviewer"}})
	if err == nil && !res.IsError {
		t.Fatalf("a send without type or content was taken: %+v", res)
	}
	want := []agent.RunCall{
		{Tool: agent.ToolSend, To: "reviewer", Type: "result", Content: "done", Signal: "DONE"},
		{Tool: agent.ToolReceive},
		{Tool: agent.ToolSend, To: "nobody", Type: "chat", Content: "hi"},
	}
	if got := d.seen(); !slices.Equal(got, want) {
		t.Fatalf("the daemon saw %+v, want %+v", got, want)
	}
}

// TestRelayRefusesWithoutToken: a process that finds the relay's port but
// not its token gets nothing through.
func TestRelayRefusesWithoutToken(t *testing.T) {
	t.Parallel()
	d := &daemon{}
	addr := relay(t, d, "secret")
	c, err := runmcp.Dial(t.Context(), addr, "guess")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call(t.Context(), agent.RunCall{Tool: agent.ToolStatus}); err == nil {
		t.Fatal("a call without the token was answered")
	}
	if len(d.seen()) != 0 {
		t.Fatalf("the daemon saw %+v", d.seen())
	}
}

// TestRelayBadLines: a line that is not a request is answered with an
// error, and the connection goes on.
func TestRelayBadLines(t *testing.T) {
	t.Parallel()
	d := &daemon{}
	conn, err := net.Dial("tcp", relay(t, d, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "secret\n")
	r := bufio.NewReader(conn)
	for _, bad := range []string{`hello`, `[1]`, `{"call":{"tool":"bridge_status"}}`, `{"id":"1","call":{"tool":"rm -rf"}}`, `{"id":"2","call":"x"}`} {
		io.WriteString(conn, bad+"\n")
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var reply runmcp.Reply
		if json.Unmarshal(line, &reply) != nil || reply.Error == "" {
			t.Fatalf("%s: answered %s", bad, line)
		}
	}
	io.WriteString(conn, `{"id":"ok","call":{"tool":"bridge_status"}}`+"\n")
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	reply, err := runmcp.DecodeReply(line)
	if err != nil || reply.ID != "ok" || string(reply.Result) != `{"answered":"bridge_status"}` {
		t.Fatalf("after the bad lines: %s %v", line, err)
	}
}

// FuzzDecodeRequest: the relay's decoder never panics, and what it takes
// names a known tool and encodes to a line it takes again.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{`{"id":"1","call":{"tool":"send_to_agent","to":"a","type":"chat","content":"x"}}`, `{"id":"1","call":{"tool":"x"}}`, `{}`, `[]`, `{"id":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := runmcp.DecodeRequest(b)
		if err != nil {
			return
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if r2, err := runmcp.DecodeRequest(again); err != nil || r2 != r {
			t.Fatalf("%+v encodes to %s, which decodes to %+v, %v", r, again, r2, err)
		}
	})
}

// FuzzDecodeReply: the same for replies, which `tether mcp` reads.
func FuzzDecodeReply(f *testing.F) {
	for _, s := range []string{`{"id":"1","result":{"seq":1}}`, `{"id":"1","error":"no"}`, `{"id":"1"}`, `{"result":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := runmcp.DecodeReply(b)
		if err != nil {
			return
		}
		if r.ID == "" || r.Error == "" && !json.Valid(r.Result) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
