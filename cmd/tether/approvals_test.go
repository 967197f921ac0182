package main

import (
	"strings"
	"sync"
	"testing"

	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

func TestApprovalBroker(t *testing.T) {
	d := newDaemon(t)
	a, _ := d.phone(nil)
	const id = "broker"
	d.startSession(a, id, "")
	a.WaitFor(wire.TypeSessionReady, nil, nil)

	// The default policy (auto_low) still asks for a shell command.
	a.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "run: git status"})
	var ar wire.ApprovalRequired
	a.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	if ar.RiskLevel != "medium" {
		t.Fatalf("git status risk %q", ar.RiskLevel)
	}

	// A phone that connects while the question waits sees it in
	// connection_ack, and two phones race to answer: exactly one wins.
	b, ack := d.phone(nil)
	if len(ack.PendingApprovals) != 1 || !strings.Contains(string(ack.PendingApprovals[0]), ar.ToolCallID) {
		t.Fatalf("pending_approvals = %s", ack.PendingApprovals)
	}
	var wg sync.WaitGroup
	for i, c := range []*wstest.Client{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Send(wire.TypeApprovalResponse, "race", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID,
				"decision": "approved", "remember": "session", "reason": []string{"a", "b"}[i]})
		}()
	}
	wg.Wait()
	refused := 0
	for _, c := range []*wstest.Client{a, b} {
		// Every phone learns the question was answered.
		c.WaitFor(wire.TypeApprovalResolved, nil, nil)
		c.Send(wire.TypeHeartbeatPing, "sync", nil)
		c.WaitFor(wire.TypeHeartbeatPong, nil, func(e wire.Envelope) bool { return e.ID == "sync" })
		for _, e := range c.Seen {
			if e.Type == wire.TypeError && e.ID == "race" {
				refused++
			}
		}
	}
	if refused != 1 {
		t.Fatalf("%d of two racing answers were refused, want exactly 1", refused)
	}
	// The turn may have ended while the answers were read.
	seenOrWait(a, wire.TypeTurnComplete, nil, func(wire.Envelope) bool { return true })

	// The rule is remembered: the same command prefix runs without asking.
	a.Send(wire.TypeApprovalRules, "rules", map[string]any{"session_id": id})
	var rules wire.ApprovalRules
	a.WaitFor(wire.TypeApprovalRulesResp, &rules, nil)
	if len(rules.Rules) != 1 || rules.Rules[0].Tool != "Bash" || rules.Rules[0].Prefix != "git status" {
		t.Fatalf("rules = %+v", rules)
	}
	a.Send(wire.TypeMessage, "m2", map[string]any{"session_id": id, "content": "run: git status --short"})
	var tr wire.ToolResult
	a.WaitFor(wire.TypeToolResult, &tr, nil)
	for _, e := range a.Seen {
		if e.Type == wire.TypeApprovalRequired && !strings.Contains(string(e.Payload), ar.ToolCallID) {
			t.Fatal("a remembered command was asked again")
		}
	}
	a.WaitFor(wire.TypeTurnComplete, nil, nil)
	a.Send(wire.TypeApprovalRulesClear, "clear", map[string]any{"session_id": id})
	a.WaitFor(wire.TypeApprovalRulesResp, &rules, func(e wire.Envelope) bool { return e.ID == "clear" })
	if len(rules.Rules) != 0 {
		t.Fatalf("rules after clear = %+v", rules)
	}
	a.Send(wire.TypeMessage, "m3", map[string]any{"session_id": id, "content": "run: git status"})
	var again wire.ApprovalRequired
	a.WaitFor(wire.TypeApprovalRequired, &again, nil)

	// The session ends while the question waits: the phones are told.
	a.Send(wire.TypeSessionEnd, "", map[string]any{"session_id": id})
	var cancelled wire.ApprovalCancelled
	a.WaitFor(wire.TypeApprovalCancelled, &cancelled, nil)
	if cancelled.ToolCallID != again.ToolCallID || cancelled.Reason == "" {
		t.Fatalf("approval_cancelled = %+v", cancelled)
	}
	_, ack = d.phone(nil)
	if len(ack.PendingApprovals) != 0 {
		t.Fatalf("cancelled approval still pending: %s", ack.PendingApprovals)
	}
}

func TestApprovalTimeoutDenies(t *testing.T) {
	d := newDaemon(t, "--approval-timeout", "300ms")
	c, _ := d.phone(nil)
	const id = "timeout"
	d.startSession(c, id, "ask")
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "run: touch never.txt"})
	c.WaitFor(wire.TypeApprovalRequired, nil, nil)
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, nil)
	var cancelled wire.ApprovalCancelled
	for _, e := range c.Seen {
		if e.Type == wire.TypeApprovalCancelled {
			wstest.Decode(t, e, &cancelled)
		}
	}
	if cancelled.Reason != "timeout" || tr.Result.Success || !strings.Contains(tr.Result.Content, "No answer from a phone") {
		t.Fatalf("cancelled %+v, tool_result %+v", cancelled, tr)
	}
}
