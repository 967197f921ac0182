package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
)

// recordWriter is a process's stdin that keeps what the adapter wrote.
type recordWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *recordWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(b)
}

func (w *recordWriter) Close() error { return nil }

func (w *recordWriter) lines() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Split(bytes.TrimSuffix(w.buf.Bytes(), []byte("\n")), []byte("\n"))
}

var _ io.WriteCloser = (*recordWriter)(nil)

// FuzzHandle feeds arbitrary output lines to a turn: whatever the line, the
// turn must not panic, must pass non-control JSON lines on byte for byte,
// must never pass control traffic on, and must answer every control_request
// it is given.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(`{"type":"system","subtype":"init","session_id":"s1"}`))
	f.Add([]byte(`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"toolu_1"}}`))
	f.Add([]byte(`{"type":"control_request","request_id":"r2","request":{"subtype":"hook_callback"}}`))
	f.Add([]byte(`{"type":"control_request","request_id":"r3","request":"nope"}`))
	f.Add([]byte(`{"type":"control_cancel_request","request_id":"r1"}`))
	f.Add([]byte(`{"type":"result","subtype":"success","session_id":"s2"}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a := &adapter{log: slog.New(slog.DiscardHandler)}
		w := &recordWriter{}
		h := &recHost{}
		tr := &turn{a: a, p: &process{stdin: w}, host: h, ctx: context.Background(), pending: make(map[string]*pendingPermission)}
		isResult := tr.handle(b)
		tr.wg.Wait() // the host answers at once: let it, before the turn ends
		tr.finish()

		l, err := parseLine(b)
		control := err == nil && (l.Type == "control_request" || l.Type == "control_cancel_request" || l.Type == "control_response")
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case err != nil || control:
			if len(h.msgs) != 0 {
				t.Fatalf("emitted %q for a control or non-JSON line", h.msgs)
			}
		default:
			if len(h.msgs) != 1 || !bytes.Equal(h.msgs[0], b) {
				t.Fatalf("emitted %q, want the line itself", h.msgs)
			}
		}
		if isResult != (err == nil && l.Type == "result") {
			t.Fatalf("handle = %v for type %q", isResult, l.Type)
		}
		if err == nil && l.Type == "control_request" {
			out := w.lines()
			var resp controlResponse
			if len(out) != 1 || json.Unmarshal(out[0], &resp) != nil || resp.Response.RequestID != l.RequestID {
				t.Fatalf("answer to control_request %q = %q", l.RequestID, out)
			}
		}
	})
}
