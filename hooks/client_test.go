package hooks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// tlsDaemon serves the endpoint over TLS as the daemon does, and returns
// a client configuration pinned to its certificate.
func tlsDaemon(t *testing.T, b Broker) ClientConfig {
	t.Helper()
	ts := httptest.NewTLSServer(&Server{Broker: b, Token: testToken, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(ts.Close)
	sum := sha256.Sum256(ts.Certificate().Raw)
	return ClientConfig{URL: ts.URL + Path, Token: testToken, Fingerprint: "sha256:" + hex.EncodeToString(sum[:]), Timeout: 5 * time.Second}
}

func TestRunHookPrintsTheDecision(t *testing.T) {
	t.Parallel()
	fb := &fakeBroker{ask: func(context.Context, Event) (Answer, error) {
		return Answer{Decision: DecisionAllow}, nil
	}}
	cfg := tlsDaemon(t, fb)
	var out bytes.Buffer
	if err := RunHook(context.Background(), strings.NewReader(payloads[EventPreToolUse]), &out, cfg); err != nil {
		t.Fatal(err)
	}
	if out.String() != `{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}`+"\n" {
		t.Fatalf("stdout %q", out.String())
	}
	if obs, asked := fb.counts(); obs != 1 || asked != 1 || string(fb.observed[0].Raw) != payloads[EventPreToolUse] {
		t.Fatalf("observed %d asked %d", obs, asked)
	}
	out.Reset()
	if err := RunHook(context.Background(), strings.NewReader(payloads[EventStop]), &out, cfg); err != nil || out.String() != "{}\n" {
		t.Fatalf("Stop: %q %v", out.String(), err)
	}
}

func TestRunHookOverPlainHTTP(t *testing.T) {
	t.Parallel()
	ts := newServer(t, &fakeBroker{}, nil)
	var out bytes.Buffer
	err := RunHook(context.Background(), strings.NewReader(payloads[EventSessionEnd]), &out, ClientConfig{URL: ts.URL + Path, Token: testToken})
	if err != nil || out.String() != "{}\n" {
		t.Fatalf("%q %v", out.String(), err)
	}
}

// TestRunHookFailsSilently covers every way the daemon can fail to answer:
// nothing is printed, and the error says so.
func TestRunHookFailsSilently(t *testing.T) {
	t.Parallel()
	good := tlsDaemon(t, &fakeBroker{})
	// A port nobody listens on: the daemon is down.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	downURL := "https://" + ln.Addr().String() + Path
	ln.Close()
	// A daemon that answers with something that is not JSON.
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"hookSpecificOutput":`)) }))
	t.Cleanup(garbage.Close)
	// A daemon that hangs.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // the server notices the client going away only once the body is read
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)

	cases := []struct {
		name  string
		cfg   ClientConfig
		input string
	}{
		{"daemon down", ClientConfig{URL: downURL, Token: testToken, Fingerprint: good.Fingerprint}, payloads[EventPreToolUse]},
		{"wrong token", ClientConfig{URL: good.URL, Token: strings.Repeat("1", 64), Fingerprint: good.Fingerprint}, payloads[EventPreToolUse]},
		{"another certificate", ClientConfig{URL: good.URL, Token: testToken, Fingerprint: "sha256:" + strings.Repeat("ab", 32)}, payloads[EventPreToolUse]},
		{"unpinned self-signed certificate", ClientConfig{URL: good.URL, Token: testToken}, payloads[EventPreToolUse]},
		{"bad input", good, `{"hook_event_name":"PreToolUse"`},
		{"input too large", good, `{"x":"` + strings.Repeat("a", MaxBody) + `"}`},
		{"answer not JSON", ClientConfig{URL: garbage.URL, Token: testToken}, payloads[EventStop]},
		{"daemon hangs", ClientConfig{URL: hang.URL, Token: testToken, Timeout: 200 * time.Millisecond}, payloads[EventStop]},
		{"bad URL", ClientConfig{URL: "://", Token: testToken}, payloads[EventStop]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			start := time.Now()
			err := RunHook(context.Background(), strings.NewReader(c.input), &out, c.cfg)
			if err == nil || out.Len() != 0 || time.Since(start) > 3*time.Second {
				t.Fatalf("err %v, stdout %q after %v", err, out.String(), time.Since(start))
			}
		})
	}
	var out bytes.Buffer
	if err := RunHook(context.Background(), strings.NewReader(payloads[EventStop]), &out, ClientConfig{URL: downURL, Token: testToken}); !errors.Is(err, ErrDaemon) {
		t.Fatalf("daemon down: %v", err)
	}
}
