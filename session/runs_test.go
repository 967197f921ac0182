package session

import (
	"context"
	"encoding/json"
	"errors"
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

// fixedRuns has every session take part in one run as "reviewer", and
// answers its calls with the tool's name, or fails them.
type fixedRuns struct{ fail error }

func (fixedRuns) Member(context.Context, string) (string, error) { return "reviewer", nil }

func (r fixedRuns) Call(_ context.Context, _ string, call agent.RunCall) (json.RawMessage, error) {
	if r.fail != nil {
		return nil, r.fail
	}
	return json.Marshal(map[string]string{"tool": call.Tool})
}

// TestRunCallsThroughTheManager: a session in a run starts its sandbox as
// its member, and its agent's run tool calls are answered by the runs, or
// with their error; a session of a daemon without runs gets an error.
func TestRunCallsThroughTheManager(t *testing.T) {
	for name, c := range map[string]struct {
		runs         RunTools
		member       string
		result, fail string
	}{
		"answered": {fixedRuns{}, "reviewer", `{"tool":"bridge_status"}`, ""},
		"failed":   {fixedRuns{fail: errors.New("the run ended")}, "reviewer", "", "the run ended"},
		"no runs":  {nil, "", "", "this session takes part in no run"},
	} {
		t.Run(name, func(t *testing.T) {
			inBubble(t, func(cfg *Config) { cfg.Runs = c.runs }, func(t *testing.T, f *fixture) {
				_, b := f.start(PolicyAsk)
				if b.spec.RunMember != c.member {
					t.Fatalf("run member %q", b.spec.RunMember)
				}
				b.emit(sandbox.Event{Ev: sandbox.EvRunCall, ID: "call-1", Call: &agent.RunCall{Tool: agent.ToolStatus}})
				f.settle()
				replies := b.commands(sandbox.CmdRunReply)
				if len(replies) != 1 || replies[0].ID != "call-1" || string(replies[0].Result) != c.result || replies[0].Error != c.fail {
					t.Fatalf("replies %+v", replies)
				}
			})
		})
	}
}
