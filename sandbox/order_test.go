package sandbox_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox"
)

// An agent in a real sandbox writes an event straight to the daemon's
// socket, numbered against the bridge's order: repeated, skipped,
// missing, negative, the greatest number, or a second ready. The daemon
// passes on nothing twice and nothing out of order: the forged line never
// reaches the session, an error says why, and the bridge is ended with
// ExitProtocol.
func TestEventsOutOfOrder(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, line string }{
		{"repeated", `{"ev":"message","seq":1,"data":{"type":"assistant","text":"forged"}}`},
		{"skipped", `{"ev":"message","seq":3,"data":{"type":"assistant","text":"forged"}}`},
		{"missing", `{"ev":"message","data":{"type":"assistant","text":"forged"}}`},
		{"negative", `{"ev":"message","seq":-1,"data":{"type":"assistant","text":"forged"}}`},
		{"greatest", `{"ev":"done","seq":9223372036854775807,"sessionId":"forged"}`},
		{"ready", `{"ev":"ready","seq":1000}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := newSpec(t, "forge")
			spec.PingInterval = time.Hour // no pong written amid the forged line
			sb := spawn(t, spec)
			if err := sb.Query(tt.line, "s", false); err != nil {
				t.Fatal(err)
			}
			evs, closed := drain(t, sb)
			var last int64
			var reported bool
			for _, ev := range evs {
				if strings.Contains(string(ev.Data), "forged") || ev.SessionID == "forged" || ev.Ev == sandbox.EvReady {
					t.Errorf("the forged event was passed on: %+v", ev)
				}
				if ev.Seq == 0 {
					reported = reported || ev.Ev == sandbox.EvError && strings.Contains(ev.Error, "out of order")
					continue
				}
				if ev.Seq != last+1 {
					t.Errorf("%s numbered %d after %d", ev.Ev, ev.Seq, last)
				}
				last = ev.Seq
			}
			if !reported {
				t.Error("no error told the session why")
			}
			if !closed {
				t.Fatal("the bridge was not ended")
			}
			awaitDone(t, sb)
			if err := sb.Err(); !errors.Is(err, sandbox.ErrProtocol) || sb.Exit().Reason != sandbox.ExitProtocol {
				t.Errorf("end %v (%+v), want ErrProtocol", err, sb.Exit())
			}
		})
	}
}

// drain returns sb's events up to the channel's end (closed) or the
// turn's, failing after a minute (a bound for a hang, not a measure).
func drain(t *testing.T, sb *sandbox.Sandbox) (evs []sandbox.Event, closed bool) {
	t.Helper()
	limit := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-sb.Events():
			if !ok {
				return evs, true
			}
			evs = append(evs, ev)
			if ev.Ev == sandbox.EvDone {
				return evs, false
			}
		case <-limit:
			t.Fatalf("no end of the turn or of the events within a minute; %d events", len(evs))
		}
	}
}
