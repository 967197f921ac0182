package main

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/runs"
	"github.com/tetherdev/tether/wire"
)

// reviewScript is a task that scripts a whole review loop for two demo
// agents: each message holds the next one's "send:".
const reviewScript = "send: reviewer result/DONE Round 1: v1 is written. " +
	"send: implementer review/FAIL Round 1: it lacks tests. " +
	"send: reviewer result/DONE Round 2: tests added. " +
	"send: implementer review/PASS Round 2: good"

// runMessages collects the run_message events a phone has seen, by seq.
func runMessages(c *wstest.Client, runID int64) map[int64]runs.Message {
	out := map[int64]runs.Message{}
	for _, e := range c.Seen {
		if e.Type != wire.TypeRunMessage {
			continue
		}
		var m runs.RunMessage
		json.Unmarshal(e.Payload, &m)
		if m.Message.RunID == runID {
			out[m.Seq] = m.Message
		}
	}
	return out
}

func runEnded(runID int64) func(e wire.Envelope) bool {
	return func(e wire.Envelope) bool {
		var u runs.RunUpdate
		json.Unmarshal(e.Payload, &u)
		return u.Run.RunID == runID && u.Run.Status != "running"
	}
}

// TestRunReviewLoopAcrossRestart runs two demo agents through a whole
// review loop (task, result, FAIL, fix, result, PASS) with the daemon
// restarted in the middle: the run goes on where it was, every message is
// there once, and the export has the spec's bridge.jsonl lines.
func TestRunReviewLoopAcrossRestart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, _ := d.phone(nil)
	c.Send(wire.TypeRunStart, "start", map[string]any{"task": reviewScript, "working_directory": d.project, "policy": "auto_approve"})
	var started runs.RunUpdate
	c.WaitFor(wire.TypeRunStartResponse, &started, nil)
	id := started.Run.RunID
	if started.Run.Status != "running" || len(started.Run.Participants) != 2 || started.Run.MaxRounds != runs.DefaultMaxRounds {
		t.Fatalf("run_start answered %+v", started.Run)
	}
	// The restart comes once the reviewer has failed the first result.
	c.WaitFor(wire.TypeRunMessage, nil, func(e wire.Envelope) bool {
		var m runs.RunMessage
		json.Unmarshal(e.Payload, &m)
		return m.Message.Signal == runs.SignalFail
	})
	c.WS.Close()
	d.stop()
	d.start()
	defer func() {
		if t.Failed() {
			_, out, _ := runCmd(t, d.env, "runs", "export", "1")
			_, list, _ := runCmd(t, d.env, "runs", "list")
			t.Logf("the run holds:\n%s\n%s", out, list)
		}
	}()
	c, _ = d.phone(map[string]any{"last_seq": 0})
	c.WaitFor(wire.TypeRunUpdate, nil, runEnded(id))

	// The run is over: its sessions' sandboxes stop, the sessions stay.
	// (Those this daemon started: one the restart left without a sandbox
	// may have had nothing more to do.)
	for _, p := range started.Run.Participants {
		if !slices.ContainsFunc(c.Seen, func(e wire.Envelope) bool {
			var r wire.SessionReady
			json.Unmarshal(e.Payload, &r)
			return e.Type == wire.TypeSessionReady && r.SessionID == p.SessionID && r.Resumed
		}) {
			continue
		}
		seenOrWait(c, wire.TypeSessionStatus, nil, func(e wire.Envelope) bool {
			var st wire.SessionStatus
			json.Unmarshal(e.Payload, &st)
			return st.SessionID == p.SessionID && st.Sandbox == "stopped" && st.Reason == "run_ended"
		})
	}

	got := runMessages(c, id)
	want := []struct{ typ, from, to, signal, content string }{
		{"task", "user", "implementer", "", reviewScript},
		{"result", "implementer", "reviewer", "DONE", reviewScript[len("send: reviewer result/DONE "):]},
		{"review", "reviewer", "implementer", "FAIL", "Round 1: it lacks tests. send: reviewer result/DONE Round 2: tests added. send: implementer review/PASS Round 2: good"},
		{"result", "implementer", "reviewer", "DONE", "Round 2: tests added. send: implementer review/PASS Round 2: good"},
		{"review", "reviewer", "implementer", "PASS", "Round 2: good"},
	}
	if len(got) != len(want) {
		t.Fatalf("the run has %d messages, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		m := got[int64(i+1)]
		if m.Type != w.typ || m.From != w.from || m.To != w.to || m.Signal != w.signal || m.Content != w.content {
			t.Errorf("message %d is %+v, want %+v", i+1, m, w)
		}
		if m.ID != runs.GenerateID(m.Type, m.From, m.To, m.Content) {
			t.Errorf("message %d has id %s, not the spec's", i+1, m.ID)
		}
	}

	c.Send(wire.TypeRunList, "list", nil)
	var list struct{ Runs []runs.Info }
	c.WaitFor(wire.TypeRunListResponse, &list, nil)
	if len(list.Runs) != 1 || list.Runs[0].Status != "passed" || list.Runs[0].Counts.TotalMessages != 5 ||
		list.Runs[0].Counts.FailCount != 1 || list.Runs[0].Counts.PassCount != 1 || !list.Runs[0].Counts.HasDoneSignal {
		t.Fatalf("run_list: %+v", list.Runs)
	}

	code, out, stderr := runCmd(t, d.env, "runs", "export", "1")
	if code != 0 {
		t.Fatalf("tether runs export: %d %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("export has %d lines:\n%s", len(lines), out)
	}
	keys := []string{"id", "run_id", "type", "from", "to", "content", "signal", "timestamp"}
	for i, line := range lines {
		if got := jsonKeys(t, line); !reflect.DeepEqual(got, keys) {
			t.Errorf("line %d has the fields %v, the spec's are %v", i+1, got, keys)
		}
		var m runs.Message
		json.Unmarshal([]byte(line), &m)
		if m != got[int64(i+1)] {
			t.Errorf("line %d is %+v, the phone saw %+v", i+1, m, got[int64(i+1)])
		}
	}

	code, out, _ = runCmd(t, d.env, "runs", "status", "1")
	wantStatus := "Run #1 Bridge Status:\nTotal Messages: 5\nDone Signal: true\nPass Count: 1\nFail Count: 1\nBy Agent:\n  implementer: 2\n  reviewer: 2\n  user: 1\n"
	if code != 0 || out != wantStatus {
		t.Fatalf("tether runs status: %d\n%s\nwant\n%s", code, out, wantStatus)
	}
}

// jsonKeys returns the keys of a JSON object in the order they appear.
func jsonKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", line)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestWebClientRuns drives Debian's chromium through the web client's Runs
// screen (web/e2e/runs.mjs): a review loop started from the browser, a run
// the user finishes with a message of their own, and one stopped.
func TestWebClientRuns(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a browser")
	}
	d := newDaemon(t)
	runBrowser(t, d, "runs.mjs")
}

// TestRunEnds: a run ends when its rounds are used up, and when a
// participant's session ends; either way the phone hears why.
func TestRunEnds(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, _ := d.phone(nil)
	start := func(id, task string, rounds int) runs.Info {
		c.Send(wire.TypeRunStart, id, map[string]any{"task": task, "working_directory": d.project, "policy": "auto_approve", "max_rounds": rounds})
		var started runs.RunUpdate
		c.WaitFor(wire.TypeRunStartResponse, &started, func(e wire.Envelope) bool { return e.ID == id })
		return started.Run
	}
	ended := func(run runs.Info) runs.Info {
		var end runs.RunUpdate
		c.WaitFor(wire.TypeRunUpdate, &end, runEnded(run.RunID))
		return end.Run
	}

	one := start("one-round", "send: reviewer result/DONE Round 1: done. send: implementer review/FAIL Round 1: wrong", 1)
	if end := ended(one); end.Status != "exhausted" || end.Counts.FailCount != 1 || !strings.Contains(end.Reason, "1 reviews failed") {
		t.Fatalf("a run of one round after a FAIL: %+v", end)
	}
	// Its sessions' sandboxes stop, the sessions stay.
	for _, p := range one.Participants {
		seenOrWait(c, wire.TypeSessionStatus, nil, func(e wire.Envelope) bool {
			var st wire.SessionStatus
			json.Unmarshal(e.Payload, &st)
			return st.SessionID == p.SessionID && st.Sandbox == "stopped" && st.Reason == "run_ended"
		})
	}

	idle := start("idle", "Wait for me.", 3)
	c.Send(wire.TypeSessionEnd, "end", map[string]any{"session_id": idle.Participants[1].SessionID, "reason": "user_request"})
	if end := ended(idle); end.Status != "failed" || !strings.Contains(end.Reason, `"reviewer"`) {
		t.Fatalf("a run whose reviewer's session ended: %+v", end)
	}
	c.Send(wire.TypeRunSend, "late", map[string]any{"run_id": idle.RunID, "to": "implementer", "content": "still there?"})
	var ep wire.ErrorPayload
	c.WaitFor(wire.TypeError, &ep, func(e wire.Envelope) bool { return e.ID == "late" })
	if ep.Code != wire.CodeInvalidMessage || !strings.Contains(ep.Message, "has ended") {
		t.Fatalf("a message into an ended run: %+v", ep)
	}
}
