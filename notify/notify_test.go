package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

func newLog(t *testing.T) *session.EventLog {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := session.NewEventLog(context.Background(), st, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; st.Close() })
	return l
}

func note(id, kind, title, body string, data map[string]any) session.Entry {
	return session.Entry{SessionID: "s1", Type: wire.TypeNotification, ID: id, NotificationID: id, Payload: wire.Notification{
		NotificationID: id, SessionID: "s1", NotificationType: kind, Title: title, Body: body, Priority: "high", Data: data,
	}}
}

// ntfyServer is an ntfy server for tests: it records what is published
// (JSON publishing, as ntfy documents it) and checks the token.
type ntfyServer struct {
	*httptest.Server
	mu   sync.Mutex
	got  []ntfyMessage
	auth []string
	seen chan struct{}
}

func newNtfyServer(t *testing.T) *ntfyServer {
	s := &ntfyServer{seen: make(chan struct{}, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m ntfyMessage
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/" || json.Unmarshal(body, &m) != nil || m.Topic == "" {
			http.Error(w, "bad publish: "+r.Method+" "+r.URL.Path+" "+string(body), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.got, s.auth = append(s.got, m), append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		s.seen <- struct{}{}
	}))
	t.Cleanup(s.Close)
	return s
}

// wait returns the first n messages that are not probes (of session
// "probe"), with their Authorization headers.
func (s *ntfyServer) wait(t *testing.T, n int) ([]ntfyMessage, []string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		var got []ntfyMessage
		var auth []string
		for i, m := range s.got {
			if !strings.HasSuffix(m.Click, "session=probe") {
				got, auth = append(got, m), append(auth, s.auth[i])
			}
		}
		s.mu.Unlock()
		if len(got) >= n {
			return got, auth
		}
		select {
		case <-s.seen:
		case <-timeout:
			t.Fatalf("ntfy got %d of %d messages", len(got), n)
		}
	}
}

func run(t *testing.T, d *Dispatcher) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestNtfySummaryAndFull(t *testing.T) {
	t.Parallel()
	for _, detail := range []Detail{DetailSummary, DetailFull} {
		t.Run(string(detail), func(t *testing.T) {
			t.Parallel()
			l := newLog(t)
			srv := newNtfyServer(t)
			ch, err := ParseNtfy(srv.URL + "/my-topic")
			if err != nil {
				t.Fatal(err)
			}
			ch.Token = "tk_secret"
			d := &Dispatcher{Events: l, Channels: []Channel{ch}, Detail: detail, WebURL: "https://devbox:7420/"}
			run(t, d)
			waitLive(t, l, srv)
			l.Append(note("n1", "approval_required", "Approval needed: Bash", "rm -rf ~/secret-project", map[string]any{"tool_call_id": "tc 1"}))
			l.Append(note("n2", "turn_complete", "Agent finished", "fix the login bug: the agent is waiting for you", nil))
			l.Append(session.Entry{SessionID: "s1", Type: wire.TypeStreamChunk, Payload: wire.StreamChunk{SessionID: "s1", Content: "not a notification"}})
			got, auth := srv.wait(t, 2)
			if len(got) != 2 || got[0].Topic != "my-topic" || got[0].Title != "Approval needed: Bash" || got[0].Priority != 4 ||
				got[0].Click != "https://devbox:7420/#approval=tc+1&session=s1" || got[1].Click != "https://devbox:7420/#session=s1" {
				t.Fatalf("published %+v", got)
			}
			leaked := strings.Contains(got[0].Message, "secret-project") || strings.Contains(got[1].Message, "login bug")
			if leaked != (detail == DetailFull) {
				t.Errorf("detail %s: bodies %q, %q", detail, got[0].Message, got[1].Message)
			}
			if auth[0] != "Bearer tk_secret" {
				t.Errorf("authorization %q", auth[0])
			}
		})
	}
}

// probeNote is the i-th probe: a notification of session "probe", which
// the tests tell from theirs by its URL (titles are replaced without
// --push-detail full).
func probeNote(i int) session.Entry {
	e := note(fmt.Sprintf("probe%d", i), "probe", "probe", "", nil)
	e.SessionID = "probe"
	n := e.Payload.(wire.Notification)
	n.SessionID = "probe"
	e.Payload = n
	return e
}

// waitLive appends probe notifications until one reaches ntfy: from then
// on the dispatcher is subscribed.
func waitLive(t *testing.T, l *session.EventLog, srv *ntfyServer) {
	t.Helper()
	for i := 0; ; i++ {
		l.Append(probeNote(i))
		select {
		case <-srv.seen:
			return
		case <-time.After(50 * time.Millisecond):
		}
		if i > 200 {
			t.Fatal("the dispatcher never went live")
		}
	}
}

// blocked is a channel that never answers until released.
type blocked struct{ release chan struct{} }

func (blocked) Name() string { return "blocked" }
func (b blocked) Send(ctx context.Context, _ Message) error {
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return ctx.Err()
}

// TestHungChannelHoldsNothing: a push channel that never answers neither
// slows the log nor grows without bound; notifications past the queue are
// dropped.
func TestHungChannelHoldsNothing(t *testing.T) {
	t.Parallel()
	l := newLog(t)
	b := blocked{release: make(chan struct{})}
	defer close(b.release)
	d := &Dispatcher{Events: l, Channels: []Channel{b}, Queue: 4, Timeout: time.Hour}
	run(t, d)
	var last int64
	for i := range 10_000 {
		last, _ = l.Append(note(fmt.Sprintf("n%d", i), "error", "Session failed", "", nil))
	}
	deadline := time.Now().Add(10 * time.Second)
	for l.Flushed() < last {
		if time.Now().After(deadline) {
			t.Fatalf("the log is stuck at %d of %d behind a hung channel", l.Flushed(), last)
		}
		time.Sleep(time.Millisecond)
	}
}
