package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/anthropicmock"
	"github.com/tetherdev/tether/sandbox/agent"
)

// firstEmitHost records when the first message was emitted.
type firstEmitHost struct {
	once  sync.Once
	first time.Time
}

func (h *firstEmitHost) Emit(json.RawMessage) { h.once.Do(func() { h.first = time.Now() }) }

func (h *firstEmitHost) RequestPermission(context.Context, agent.PermissionRequest) (agent.PermissionDecision, error) {
	return agent.PermissionDecision{Behavior: "allow"}, nil
}

// BenchmarkColdStart measures a new CLI's first turn: from Query (which starts
// the process) to the first emitted line, and to the turn's end (ns/op).
func BenchmarkColdStart(b *testing.B) {
	bin := anthropicmock.ClaudeBin(b)
	mock := anthropicmock.New(b, func(*anthropicmock.Request) anthropicmock.Reply {
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("hello")}}
	})
	home := b.TempDir()
	var firstTotal time.Duration
	for b.Loop() {
		a, err := New(Options{Bin: bin, WorkDir: b.TempDir(), Env: mock.ClaudeEnv(home)})
		if err != nil {
			b.Fatal(err)
		}
		h := &firstEmitHost{}
		start := time.Now()
		if err := a.Query(context.Background(), "hi", h); err != nil {
			b.Fatal(err)
		}
		firstTotal += h.first.Sub(start)
		b.StopTimer()
		if err := a.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(firstTotal.Milliseconds())/float64(b.N), "ms-to-first-event")
}

// permTimeHost allows every tool and records when it was asked.
type permTimeHost struct {
	mu    sync.Mutex
	asked time.Time
}

func (h *permTimeHost) Emit(json.RawMessage) {}

func (h *permTimeHost) RequestPermission(context.Context, agent.PermissionRequest) (agent.PermissionDecision, error) {
	h.mu.Lock()
	h.asked = time.Now()
	h.mu.Unlock()
	return agent.PermissionDecision{Behavior: "allow"}, nil
}

// BenchmarkToolRoundTrip measures a warm turn with one Bash tool call: the
// whole turn (ns/op), and from the permission question reaching the host to
// the tool_result reaching the API (the adapter's answer, the CLI running the
// tool and posting its result).
func BenchmarkToolRoundTrip(b *testing.B) {
	bin := anthropicmock.ClaudeBin(b)
	mock := anthropicmock.New(b, func(r *anthropicmock.Request) anthropicmock.Reply {
		if last := r.LastMessage(); len(last.Content) > 0 && last.Content[0].Type == "tool_result" {
			return anthropicmock.Reply{Blocks: []anthropicmock.Block{anthropicmock.Text("done")}}
		}
		return anthropicmock.Reply{Blocks: []anthropicmock.Block{
			anthropicmock.ToolUse("Bash", map[string]string{"command": "echo x > out.txt", "description": "write"}),
		}}
	})
	a, err := New(Options{Bin: bin, WorkDir: b.TempDir(), Env: mock.ClaudeEnv(b.TempDir())})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	h := &permTimeHost{}
	if err := a.Query(context.Background(), "warm up", h); err != nil {
		b.Fatal(err)
	}
	var roundTrip time.Duration
	for i := 0; b.Loop(); i++ {
		if err := a.Query(context.Background(), fmt.Sprintf("run it %d", i), h); err != nil {
			b.Fatal(err)
		}
		reqs := mock.MessageRequests()
		h.mu.Lock()
		roundTrip += reqs[len(reqs)-1].Received.Sub(h.asked)
		h.mu.Unlock()
	}
	b.ReportMetric(float64(roundTrip.Microseconds())/1000/float64(b.N), "ms-perm-to-tool-result")
}

// BenchmarkHandle measures the adapter's own work on one typical output line
// (a text delta stream_event): decoding its header and passing it on.
func BenchmarkHandle(b *testing.B) {
	line := []byte(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"I will run t"}},"session_id":"fc37c3a1-f347-4d9d-bfa5-fa5d939345db","parent_tool_use_id":null,"uuid":"43f1543f-e7d0-46c2-b4a2-bf481b8f7d12"}`)
	tr := &turn{a: &adapter{log: slog.New(slog.DiscardHandler)}, host: discardHost{}, ctx: context.Background()}
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		tr.handle(line)
	}
}

type discardHost struct{}

func (discardHost) Emit(json.RawMessage) {}

func (discardHost) RequestPermission(context.Context, agent.PermissionRequest) (agent.PermissionDecision, error) {
	return agent.PermissionDecision{}, nil
}
