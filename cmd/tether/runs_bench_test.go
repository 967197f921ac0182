package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/runs"
	"github.com/tetherdev/tether/wire"
)

// pingPong is a task that scripts hops chats back and forth between the
// two demo participants; the last one asks for nothing more.
func pingPong(run, hops int) string {
	var b strings.Builder
	to := []string{"reviewer", "implementer"}
	for i := range hops {
		fmt.Fprintf(&b, "send: %s chat run %d hop %d. ", to[i%2], run, i+1)
	}
	b.WriteString("That was the last hop.")
	return b.String()
}

// BenchmarkRunDelivery measures, through a real daemon and two sandboxed
// demo agents, how long a message sent in a run waits before its
// recipient's turn starts ("run": from its run_message to the recipient's
// session_status busy, counted from when the recipient is idle and the
// message is there), and in the same run the same for a phone's message to
// an idle session ("phone": message out to session_status busy), the
// reference. It also reports the hops a second of one run (each hop is an
// agent's whole turn, the demo's streaming included).
func BenchmarkRunDelivery(b *testing.B) {
	// Every run keeps its two sessions: no cap on them.
	d := newDaemon(b, "--max-sessions", "0")
	c, _ := d.phone(nil)
	b.Run("run", func(b *testing.B) { benchRunHops(b, d, c) })
	b.Run("phone", func(b *testing.B) { benchPhoneTurnStart(b, d, c) })
}

func benchRunHops(b *testing.B, d *daemon, c *wstest.Client) {
	const hops = 20
	var lat []time.Duration
	var hopTime time.Duration
	for i := 0; b.Loop(); i++ {
		c.Seen = nil
		c.Send(wire.TypeRunStart, "start", map[string]any{"task": pingPong(i, hops), "working_directory": d.project, "policy": "auto_approve"})
		var started runs.RunUpdate
		c.WaitFor(wire.TypeRunStartResponse, &started, nil)
		member := map[string]string{}
		for _, p := range started.Run.Participants {
			member[p.SessionID] = p.Name
		}
		busy := map[string]bool{}
		waiting := map[string]time.Time{} // a message for a participant, since when it could start
		queued := map[string]bool{}       // a message for a busy participant
		first := time.Now()
		seen := 0
		for seen < hops {
			e := c.Read()
			now := time.Now()
			switch e.Type {
			case wire.TypeRunMessage:
				var m runs.RunMessage
				json.Unmarshal(e.Payload, &m)
				// The task may come before run_start_response: only the
				// agents' hops are counted.
				if m.Message.RunID != started.Run.RunID || m.Message.From == runs.User {
					continue
				}
				seen++
				if busy[m.Message.To] {
					queued[m.Message.To] = true
				} else {
					waiting[m.Message.To] = now
				}
			case wire.TypeSessionStatus:
				var st wire.SessionStatus
				json.Unmarshal(e.Payload, &st)
				name, ok := member[st.SessionID]
				if !ok {
					continue
				}
				switch st.Status {
				case "busy":
					busy[name] = true
					if t, ok := waiting[name]; ok {
						lat = append(lat, now.Sub(t))
						delete(waiting, name)
					}
				case "idle":
					busy[name] = false
					if queued[name] {
						waiting[name], queued[name] = now, false
					}
				}
			}
		}
		hopTime += time.Since(first)
		c.Send(wire.TypeRunStop, "stop", map[string]any{"run_id": started.Run.RunID})
		c.WaitFor(wire.TypeRunStopResponse, nil, nil)
	}
	percentiles(b, "delivery", lat[1:]) // the first waits for the reviewer's sandbox to start
	b.ReportMetric(float64(b.N*hops)/hopTime.Seconds(), "hops/s")
}

func benchPhoneTurnStart(b *testing.B, d *daemon, c *wstest.Client) {
	// -count runs this again on the same daemon: a session of its own.
	id := fmt.Sprintf("bench-phone-%d", time.Now().UnixNano())
	d.readySession(c, id, "auto_approve")
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		c.Send(wire.TypeMessage, fmt.Sprintf("p%d", i), map[string]any{"session_id": id, "content": "hi"})
		c.WaitFor(wire.TypeSessionStatus, nil, func(e wire.Envelope) bool {
			var st wire.SessionStatus
			json.Unmarshal(e.Payload, &st)
			return st.SessionID == id && st.Status == "busy"
		})
		lat = append(lat, time.Since(start))
		c.WaitFor(wire.TypeTurnComplete, nil, forSession(id))
	}
	percentiles(b, "delivery", lat)
}
