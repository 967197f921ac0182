package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/sandbox/runmcp"
)

// runCallWait bounds how long a run tool call waits for the daemon.
const runCallWait = time.Minute

// errNoDaemon is a run tool call made while no daemon is connected.
var errNoDaemon = errors.New("sandbox: no daemon to carry the run tool call")

// runCalls carries an agent's run tool calls to the daemon as run_call
// events and hands each run_reply to the call waiting for it.
type runCalls struct {
	mu      sync.Mutex
	b       *bridge
	next    uint64
	waiting map[string]chan BridgeCommand
}

func (r *runCalls) setBridge(b *bridge) {
	r.mu.Lock()
	r.b = b
	r.mu.Unlock()
}

// Call implements agent.RunCaller.
func (r *runCalls) Call(ctx context.Context, call agent.RunCall) (json.RawMessage, error) {
	// One too long would not fit the socket's line; the daemon refuses it.
	if len(call.Content) > agent.MaxRunContent {
		return nil, fmt.Errorf("the content of %d bytes is over the %d a message may carry", len(call.Content), agent.MaxRunContent)
	}
	ch := make(chan BridgeCommand, 1)
	r.mu.Lock()
	b := r.b
	r.next++
	id := "run-" + strconv.FormatUint(r.next, 10)
	r.waiting[id] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiting, id)
		r.mu.Unlock()
	}()
	if b == nil {
		return nil, errNoDaemon
	}
	if err := b.send(Event{Ev: EvRunCall, ID: id, Call: &call}); err != nil {
		return nil, err
	}
	t := time.NewTimer(runCallWait)
	defer t.Stop()
	select {
	case reply := <-ch:
		if reply.Error != "" {
			return nil, errors.New(reply.Error)
		}
		return reply.Result, nil
	case <-t.C:
		return nil, fmt.Errorf("sandbox: the daemon did not answer the %s call in %s", call.Tool, runCallWait)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// answer hands a run_reply to its call, and reports whether one waited.
func (r *runCalls) answer(cmd BridgeCommand) bool {
	r.mu.Lock()
	ch, ok := r.waiting[cmd.ID]
	delete(r.waiting, cmd.ID)
	r.mu.Unlock()
	if ok {
		ch <- cmd
	}
	return ok
}

// serveRunTools starts the relay that `tether mcp` reaches the run's tools
// through (package runmcp): on the loopback of the sandbox's network
// namespace, with a token of its own. It serves until ctx ends.
func serveRunTools(ctx context.Context, member string, calls *runCalls, log *slog.Logger) (*agent.Run, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: run tools: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sandbox: run tools: %w", err)
	}
	token := rand.Text()
	go runmcp.ServeRelay(ctx, ln, token, calls, log)
	return &agent.Run{Member: member, Calls: calls, Server: agent.MCPServer{
		Command: exe, Args: []string{"mcp"},
		Env: map[string]string{runmcp.EnvAddr: ln.Addr().String(), runmcp.EnvToken: token},
	}}, nil
}
