// Package runs is the agent-to-agent bridge of the specs: a run groups named
// participants, each a session, and one append-only stream of messages
// among them (tasks, results, reviews, signals, chat), stored in SQLite
// with the spec's SHA-256 ids, so that a message sent twice is stored once.
//
// The participants' agents reach the stream through tools (package
// sandbox/runmcp); the Runner gives each participant the messages for it as
// its next turn when it is idle, and ends the run on DONE and PASS, after
// its rounds, on a stop, or when a participant fails. Phones start, watch
// and steer runs through the bridge.
package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
)

// Message types, the spec's.
const (
	TypeTask   = "task"
	TypeResult = "result"
	TypeReview = "review"
	TypeSignal = "signal"
	TypeChat   = "chat"
)

// Signals, the spec's.
const (
	SignalDone = "DONE"
	SignalPass = "PASS"
	SignalFail = "FAIL"
)

// User is the name under which the phone's messages (and the run's task)
// are sent; no participant may take it.
const User = "user"

// MaxContent is the longest message content the runs take.
const MaxContent = agent.MaxRunContent

var (
	types   = []string{TypeTask, TypeResult, TypeReview, TypeSignal, TypeChat}
	signals = []string{"", SignalDone, SignalPass, SignalFail}
)

// Message is one message of a run, in the spec's form: the line of
// bridge.jsonl, field for field.
type Message struct {
	ID        string `json:"id"`
	RunID     int64  `json:"run_id"`
	Type      string `json:"type"`
	From      string `json:"from"`
	To        string `json:"to"`
	Content   string `json:"content"`
	Signal    string `json:"signal"`
	Timestamp string `json:"timestamp"`
}

// GenerateID is the spec's message id: SHA-256 over type, from, to and
// content, one after the other, in hex. The run is not part of it, nor is
// the time: the same message sent twice has the same id.
func GenerateID(typ, from, to, content string) string {
	h := sha256.New()
	h.Write([]byte(typ))
	h.Write([]byte(from))
	h.Write([]byte(to))
	h.Write([]byte(content))
	return hex.EncodeToString(h.Sum(nil))
}

// ForAgent reports whether m is for the participant name: sent to it, or
// to everyone by another.
func (m Message) ForAgent(name string) bool {
	return m.To == name || m.To == "" && m.From != name
}

// Timestamp is the spec's ISO 8601 form of t, in UTC.
func Timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func fromStore(m store.RunMessage) Message {
	return Message{ID: m.ID, RunID: m.RunID, Type: m.Type, From: m.From, To: m.To, Content: m.Content, Signal: m.Signal, Timestamp: Timestamp(m.CreatedAt)}
}

// validate checks a message about to be sent in a run whose participants
// are names.
func validate(m Message, names []string) error {
	if !slices.Contains(types, m.Type) {
		return fmt.Errorf("type must be one of %s, not %q", strings.Join(types, ", "), m.Type)
	}
	if !slices.Contains(signals, m.Signal) {
		return fmt.Errorf("signal must be DONE, PASS, FAIL or empty, not %q", m.Signal)
	}
	if m.Type == TypeSignal && m.Signal == "" {
		return fmt.Errorf("a message of type signal needs its signal (DONE, PASS or FAIL)")
	}
	if m.Type != TypeSignal && strings.TrimSpace(m.Content) == "" {
		return fmt.Errorf("the content is empty")
	}
	if len(m.Content) > MaxContent {
		return fmt.Errorf("the content of %d bytes is over the %d a message may carry", len(m.Content), MaxContent)
	}
	if m.To != "" && m.To != User && !slices.Contains(names, m.To) {
		return fmt.Errorf("no participant %q in this run; it has %s", m.To, strings.Join(names, ", "))
	}
	if m.To == m.From {
		return fmt.Errorf("a participant cannot send to itself")
	}
	return nil
}

// Status is a run's status, as the spec's bridge reports it.
type Status struct {
	RunID         int64          `json:"run_id"`
	TotalMessages int            `json:"total_messages"`
	ByAgent       map[string]int `json:"by_agent"`
	ByType        map[string]int `json:"by_type"`
	HasDoneSignal bool           `json:"has_done_signal"`
	PassCount     int            `json:"pass_count"`
	FailCount     int            `json:"fail_count"`
}

func newStatus(runID int64) Status {
	return Status{RunID: runID, ByAgent: map[string]int{}, ByType: map[string]int{}}
}

// add counts n messages from from, of type typ, with signal.
func (s *Status) add(from, typ, signal string, n int) {
	s.TotalMessages += n
	s.ByAgent[from] += n
	s.ByType[typ] += n
	switch signal {
	case SignalDone:
		s.HasDoneSignal = true
	case SignalPass:
		s.PassCount += n
	case SignalFail:
		s.FailCount += n
	}
}

// clone is a copy of s that shares nothing with it.
func (s Status) clone() Status {
	s.ByAgent, s.ByType = maps.Clone(s.ByAgent), maps.Clone(s.ByType)
	return s
}

// Text is the status in the spec's layout (its "Viewing Bridge Status"),
// the agents in name order.
func (s Status) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run #%d Bridge Status:\n", s.RunID)
	fmt.Fprintf(&b, "Total Messages: %d\n", s.TotalMessages)
	fmt.Fprintf(&b, "Done Signal: %t\n", s.HasDoneSignal)
	fmt.Fprintf(&b, "Pass Count: %d\n", s.PassCount)
	fmt.Fprintf(&b, "Fail Count: %d\n", s.FailCount)
	b.WriteString("By Agent:\n")
	names := make([]string, 0, len(s.ByAgent))
	for n := range s.ByAgent {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %s: %d\n", n, s.ByAgent[n])
	}
	return b.String()
}
