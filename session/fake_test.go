package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
)

// fakeSpawner is the edge the session tests stand on: Spawner's Spawn
// hands out fakeSandboxes instead of sandboxed bridges. The real sandbox
// is the integration tests' (sandbox, cmd/tether).
type fakeSpawner struct {
	mu      sync.Mutex
	spawned []*fakeSandbox
	// fail, when set, is every Spawn's error.
	fail error
	// gate, when set, holds every Spawn until it is closed.
	gate chan struct{}
	// hang makes the bridges ignore shutdown, as a hung one would.
	hang bool
}

func (f *fakeSpawner) Spawn(ctx context.Context, spec sandbox.Spec) (Sandbox, error) {
	f.mu.Lock()
	gate, fail := f.gate, f.fail
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if fail != nil {
		return nil, fail
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	b := &fakeSandbox{spec: spec, hang: f.hang, events: make(chan sandbox.Event, 1024), done: make(chan struct{}),
		layers: sandbox.Layers{Bwrap: true, Cgroup: 2, Warnings: []string{"fake"}}, gen: fmt.Sprintf("gen-%d", len(f.spawned)+1)}
	f.spawned = append(f.spawned, b)
	return b, nil
}

// Attach serves a terminal's bridge on conn as a fakeSandbox, whose Spec
// has only the ID; the bridge's end closes conn.
func (f *fakeSpawner) Attach(_ context.Context, conn net.Conn, id string, _ *slog.Logger) (Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := &fakeSandbox{spec: sandbox.Spec{ID: id}, conn: conn, hang: f.hang, events: make(chan sandbox.Event, 1024), done: make(chan struct{}),
		layers: sandbox.Layers{Warnings: []string{sandbox.Unconfined}}}
	f.spawned = append(f.spawned, b)
	return b, nil
}

// Adopt is a daemon taking over the bridge an earlier one left running:
// a new connection to it, as a fakeSandbox of the same generation.
func (f *fakeSpawner) Adopt(_ context.Context, spec sandbox.Spec, mark sandbox.Mark) (Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := &fakeSandbox{spec: spec, hang: f.hang, events: make(chan sandbox.Event, 1024), done: make(chan struct{}),
		gen: mark.Generation, adoptedAt: mark}
	f.spawned = append(f.spawned, b)
	return b, nil
}

// count is how many sandboxes were spawned.
func (f *fakeSpawner) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.spawned)
}

// last is the sandbox spawned last, nil before the first.
func (f *fakeSpawner) last() *fakeSandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.spawned) == 0 {
		return nil
	}
	return f.spawned[len(f.spawned)-1]
}

// fakeSandbox is a bridge whose events a test writes and whose commands it
// reads. A shutdown ends it cleanly (unless it hangs), as a bridge exits
// when asked.
type fakeSandbox struct {
	spec   sandbox.Spec
	conn   net.Conn // an attached bridge's connection
	hang   bool
	layers sandbox.Layers
	events chan sandbox.Event
	done   chan struct{}

	mu    sync.Mutex
	sent  []sandbox.BridgeCommand
	ended bool
	exit  sandbox.Exit
	// gen names the bridge, as a real one's generation does; committed
	// is the last of its numbered events the daemon committed; adoptedAt
	// is the mark a daemon adopted it at; detached, that the daemon let
	// it go, running.
	gen       string
	committed int64
	adoptedAt sandbox.Mark
	detached  bool
}

func (b *fakeSandbox) Send(c sandbox.BridgeCommand) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b.mu.Lock()
	if b.ended || b.detached {
		b.mu.Unlock()
		return sandbox.ErrClosed
	}
	b.sent = append(b.sent, c)
	b.mu.Unlock()
	if c.Cmd == sandbox.CmdShutdown && !b.hang {
		b.end(sandbox.Exit{Reason: sandbox.ExitClean})
	}
	return nil
}

func (b *fakeSandbox) Events() <-chan sandbox.Event { return b.events }
func (b *fakeSandbox) Done() <-chan struct{}        { return b.done }
func (b *fakeSandbox) Isolation() sandbox.Layers    { return b.layers }
func (b *fakeSandbox) MemoryLimit() int64           { return 0 }
func (b *fakeSandbox) OOMKills() uint64             { return 0 }

func (b *fakeSandbox) Exit() sandbox.Exit {
	<-b.done
	return b.exit
}

func (b *fakeSandbox) Close() error {
	b.end(sandbox.Exit{Reason: sandbox.ExitKilled})
	return nil
}

// Generation, Committed and Detach are a real sandbox's, for adoption
// across a daemon's restart.
func (b *fakeSandbox) Generation() string { return b.gen }

func (b *fakeSandbox) Committed(seq int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.committed = max(b.committed, seq)
}

// Detach ends this daemon's connection: its events end; the bridge runs on.
func (b *fakeSandbox) Detach() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ended && !b.detached {
		b.detached = true
		close(b.events)
	}
}

// lastCommitted is the last numbered event the daemon committed.
func (b *fakeSandbox) lastCommitted() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.committed
}

// emit is an event from the bridge; one after its end is dropped.
func (b *fakeSandbox) emit(ev sandbox.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ended && !b.detached {
		b.events <- ev
	}
}

// end is the bridge's exit: its events end, then Done.
func (b *fakeSandbox) end(e sandbox.Exit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return
	}
	b.ended, b.exit = true, e
	if b.conn != nil {
		b.conn.Close()
	}
	if !b.detached {
		close(b.events)
	}
	close(b.done)
}

// commands are the commands sent so far of kind cmd (all when "").
func (b *fakeSandbox) commands(cmd string) []sandbox.BridgeCommand {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []sandbox.BridgeCommand
	for _, c := range b.sent {
		if cmd == "" || c.Cmd == cmd {
			out = append(out, c)
		}
	}
	return out
}

// prompts are the prompts of the queries sent so far, in order.
func (b *fakeSandbox) prompts() []string {
	var out []string
	for _, c := range b.commands(sandbox.CmdQuery) {
		out = append(out, c.Prompt)
	}
	return out
}

// isEnded reports whether the bridge has exited.
func (b *fakeSandbox) isEnded() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ended
}

// decision is the bridge's answer to the permission request requestID,
// nil while none was sent.
func (b *fakeSandbox) decision(requestID string) *agent.PermissionDecision {
	for _, c := range b.commands(sandbox.CmdPermissionResponse) {
		if c.RequestID == requestID {
			return c.Decision
		}
	}
	return nil
}

// TestFakeSandboxKeepsTheRealOnesContract: what the Manager relies on of
// a Sandbox holds for the fake as for a real one (sandbox.Attach's, over a
// pipe to a scripted bridge): commands are validated; the bridge's events
// arrive in order; a shutdown ends the bridge cleanly (its events end,
// and Done is closed); then Send fails with sandbox.ErrClosed and Close is
// harmless.
func TestFakeSandboxKeepsTheRealOnesContract(t *testing.T) {
	t.Parallel()
	msg := json.RawMessage(`{"type":"assistant"}`)
	attached := func(t *testing.T) (Sandbox, func()) {
		daemonSide, bridgeSide := net.Pipe()
		go func() {
			enc := sandbox.NewEncoder(bridgeSide)
			dec := sandbox.NewDecoder(bridgeSide, 0)
			if enc.Encode(sandbox.Event{Ev: sandbox.EvReady}) != nil {
				return
			}
			var seq int64
			for {
				c, err := dec.DecodeCommand()
				if err != nil {
					return
				}
				switch c.Cmd {
				case sandbox.CmdQuery:
					seq++ // numbered, as the protocol wants
					if enc.Encode(sandbox.Event{Ev: sandbox.EvMessage, Data: msg, Seq: seq}) != nil {
						return
					}
				case sandbox.CmdPing:
					if enc.Encode(sandbox.Event{Ev: sandbox.EvPong, ID: c.ID}) != nil {
						return
					}
				case sandbox.CmdShutdown:
					bridgeSide.Close()
					return
				}
			}
		}()
		sb, err := Sandboxes.Attach(context.Background(), daemonSide, "contract", nil)
		if err != nil {
			t.Fatal(err)
		}
		return sb, func() {}
	}
	fake := func(t *testing.T) (Sandbox, func()) {
		sb, err := (&fakeSpawner{}).Spawn(context.Background(), sandbox.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		b := sb.(*fakeSandbox)
		return sb, func() { b.emit(sandbox.Event{Ev: sandbox.EvMessage, Data: msg}) }
	}
	for name, open := range map[string]func(*testing.T) (Sandbox, func()){"real": attached, "fake": fake} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sb, reply := open(t)
			if err := sb.Send(sandbox.BridgeCommand{Cmd: "nonsense"}); err == nil {
				t.Fatal("an invalid command was sent")
			}
			if err := sb.Send(sandbox.BridgeCommand{Cmd: sandbox.CmdQuery, Prompt: "hi"}); err != nil {
				t.Fatal(err)
			}
			reply()
			if ev := <-sb.Events(); ev.Ev != sandbox.EvMessage || string(ev.Data) != string(msg) {
				t.Fatalf("event %+v", ev)
			}
			if err := sb.Send(sandbox.BridgeCommand{Cmd: sandbox.CmdShutdown}); err != nil {
				t.Fatal(err)
			}
			for range sb.Events() {
				t.Fatal("an event after the shutdown")
			}
			<-sb.Done()
			if e := sb.Exit(); e.Reason != sandbox.ExitClean {
				t.Fatalf("exit %+v", e)
			}
			if err := sb.Send(sandbox.BridgeCommand{Cmd: sandbox.CmdInterrupt}); !errors.Is(err, sandbox.ErrClosed) {
				t.Fatalf("Send after the end: %v", err)
			}
			if err := sb.Close(); err != nil || sb.Exit().Reason != sandbox.ExitClean {
				t.Fatalf("Close after the end: %v, %+v", err, sb.Exit())
			}
		})
	}
}
