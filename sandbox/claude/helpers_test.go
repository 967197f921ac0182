package claude

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
)

// recHost is an agent.Host that records what it is given and answers
// permission questions with decide.
type recHost struct {
	decide func(ctx context.Context, req agent.PermissionRequest) (agent.PermissionDecision, error)

	mu    sync.Mutex
	msgs  []json.RawMessage
	reqs  []agent.PermissionRequest
	times []time.Time
}

func (h *recHost) Emit(msg json.RawMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, msg)
	h.times = append(h.times, time.Now())
}

func (h *recHost) RequestPermission(ctx context.Context, req agent.PermissionRequest) (agent.PermissionDecision, error) {
	h.mu.Lock()
	h.reqs = append(h.reqs, req)
	h.mu.Unlock()
	if h.decide == nil {
		return agent.PermissionDecision{Behavior: "allow"}, nil
	}
	return h.decide(ctx, req)
}

func (h *recHost) requests() []agent.PermissionRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]agent.PermissionRequest(nil), h.reqs...)
}

// emitted is a decoded emitted message with the fields the tests look at.
type emitted struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	IsError   bool   `json:"is_error"`
	Event     struct {
		Type  string `json:"type"`
		Delta struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"delta"`
	} `json:"event"`
}

// decoded returns every emitted message, decoded; it fails the test on a
// message that is not JSON.
func (h *recHost) decoded(t *testing.T) []emitted {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]emitted, len(h.msgs))
	for i, m := range h.msgs {
		if err := json.Unmarshal(m, &out[i]); err != nil {
			t.Fatalf("emitted message %d is not JSON: %v: %s", i, err, m)
		}
	}
	return out
}

// find returns the emitted messages of type typ (and subtype sub, when
// given).
func find(msgs []emitted, typ, sub string) []emitted {
	var out []emitted
	for _, m := range msgs {
		if m.Type == typ && (sub == "" || m.Subtype == sub) {
			out = append(out, m)
		}
	}
	return out
}

// textDeltas returns the texts of the emitted text_delta stream events.
func textDeltas(msgs []emitted) []string {
	var out []string
	for _, m := range msgs {
		if m.Type == "stream_event" && m.Event.Type == "content_block_delta" && m.Event.Delta.Type == "text_delta" {
			out = append(out, m.Event.Delta.Text)
		}
	}
	return out
}

// testLogger returns a logger writing to the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Logf("%s", b)
	return len(b), nil
}
