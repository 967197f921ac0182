package session

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
)

// blockingRuns answers every run tool call once release is closed.
type blockingRuns struct{ release chan struct{} }

func (b blockingRuns) Member(context.Context, string) (string, error) { return "implementer", nil }

func (b blockingRuns) Call(ctx context.Context, _ string, _ agent.RunCall) (json.RawMessage, error) {
	<-b.release
	return json.RawMessage(`{"ok":true}`), nil
}

// TestRunCallsAreBounded: an agent that floods its socket with run tool
// calls has maxRunCalls of them answered at a time; the others are refused
// at once, and every call gets its answer.
func TestRunCallsAreBounded(t *testing.T) {
	t.Parallel()
	daemonSide, bridgeSide := net.Pipe()
	defer bridgeSide.Close()
	go io.WriteString(bridgeSide, `{"ev":"ready"}`+"\n")
	sb, err := sandbox.Attach(context.Background(), daemonSide, "runs-test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	replies := make(chan sandbox.BridgeCommand, 16)
	go func() {
		dec := sandbox.NewDecoder(bridgeSide, 0)
		for {
			c, err := dec.DecodeCommand()
			if err != nil {
				close(replies)
				return
			}
			if c.Cmd == sandbox.CmdRunReply {
				replies <- c
			}
		}
	}()
	runs := blockingRuns{release: make(chan struct{})}
	m := &Manager{cfg: Config{Runs: runs, Logger: slog.New(slog.DiscardHandler)}}
	s := &sess{m: m, rec: store.Session{ID: "s1"}, sb: spawned{sb}, runCalls: make(chan struct{}, maxRunCalls)}
	const calls = maxRunCalls + 3
	for i := range calls {
		s.runCall(sandbox.Event{Ev: sandbox.EvRunCall, ID: strconv.Itoa(i), Call: &agent.RunCall{Tool: agent.ToolStatus}})
	}
	for range calls - maxRunCalls {
		if r := <-replies; r.Error == "" {
			t.Fatalf("a call past the bound was answered %s", r.Result)
		}
	}
	close(runs.release)
	for range maxRunCalls {
		if r := <-replies; r.Error != "" || string(r.Result) != `{"ok":true}` {
			t.Fatalf("a call within the bound: %+v", r)
		}
	}
	m.wg.Wait()
}
