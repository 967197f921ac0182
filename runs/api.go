package runs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// Participant is a run's participant as a phone names it.
type Participant struct {
	Name string `json:"name"`
	// Agent runs the participant's session; empty is the daemon's default.
	Agent string `json:"agent,omitempty"`
	// Role is "implementer" or "reviewer" in the review template.
	Role      string `json:"role"`
	SessionID string `json:"session_id,omitempty"`
}

// Info is a run as phones see it.
type Info struct {
	RunID            int64         `json:"run_id"`
	Template         string        `json:"template"`
	Task             string        `json:"task"`
	WorkingDirectory string        `json:"working_directory"`
	MaxRounds        int           `json:"max_rounds"`
	Round            int           `json:"round"`
	Status           string        `json:"status"`
	Reason           string        `json:"reason,omitempty"`
	CreatedAt        string        `json:"created_at"`
	EndedAt          string        `json:"ended_at,omitempty"`
	Participants     []Participant `json:"participants"`
	Counts           Status        `json:"counts"`
}

// RunUpdate is the payload of run_update.
type RunUpdate struct {
	Run Info `json:"run"`
}

// RunMessage is the payload of run_message: a message as it was taken,
// with its place in the run.
type RunMessage struct {
	Seq     int64   `json:"seq"`
	Message Message `json:"message"`
	// Counts are the run's counts with the message (run_message events
	// only). Concurrent sends may log their events out of seq order: the
	// counts with the most messages are the newest.
	Counts *Status `json:"counts,omitempty"`
}

// StartRequest is a phone's run_start.
type StartRequest struct {
	// Template is TemplateReview, the default.
	Template         string `json:"template,omitempty"`
	Task             string `json:"task"`
	WorkingDirectory string `json:"working_directory"`
	// MaxRounds is how many FAIL reviews end the run; 0 is
	// DefaultMaxRounds.
	MaxRounds int `json:"max_rounds,omitempty"`
	// Participants default to an implementer and a reviewer of the
	// daemon's default agent.
	Participants []Participant `json:"participants,omitempty"`
	// Policy is the participants' sessions' approval policy.
	Policy string `json:"policy,omitempty"`
}

func invalid(format string, args ...any) error {
	return wire.Errorf(wire.CodeInvalidMessage, format, args...)
}

// Start starts a run: a session for each participant, and the task sent
// by the user to the implementer, which gets it as its first turn.
func (r *Runner) Start(ctx context.Context, req StartRequest) (Info, error) {
	if req.Template == "" {
		req.Template = TemplateReview
	}
	if req.Template != TemplateReview {
		return Info{}, invalid("template must be %q, the one this daemon knows", TemplateReview)
	}
	if strings.TrimSpace(req.Task) == "" {
		return Info{}, invalid("the task is empty")
	}
	if len(req.Task) > MaxContent {
		return Info{}, invalid("the task of %d bytes is over the %d a message may carry", len(req.Task), MaxContent)
	}
	if req.MaxRounds == 0 {
		req.MaxRounds = DefaultMaxRounds
	}
	if req.MaxRounds < 1 || req.MaxRounds > MaxRounds {
		return Info{}, invalid("max_rounds must be 1 to %d", MaxRounds)
	}
	if len(req.Participants) == 0 {
		req.Participants = []Participant{{Name: "implementer", Role: "implementer"}, {Name: "reviewer", Role: "reviewer"}}
	}
	if err := checkParticipants(req.Participants); err != nil {
		return Info{}, err
	}
	r.mu.Lock()
	sessions := r.sessions
	r.mu.Unlock()
	if sessions == nil {
		return Info{}, wire.Errorf(wire.CodeBridgeError, "runs are not ready yet")
	}
	dir, err := sessions.CheckWorkDir(req.WorkingDirectory)
	if err != nil {
		return Info{}, err
	}
	req.WorkingDirectory = dir
	now := r.cfg.Now()
	rec := store.Run{Template: req.Template, Task: req.Task, WorkDir: req.WorkingDirectory, MaxRounds: req.MaxRounds, CreatedAt: now}
	// The sessions are named before they start, so that each sandbox
	// knows from its start that it takes part in the run.
	var ps []store.RunParticipant
	tag := strings.ToLower(rand.Text()[:8])
	for _, p := range req.Participants {
		ps = append(ps, store.RunParticipant{Name: p.Name, Agent: p.Agent, Role: p.Role, SessionID: "run_" + tag + "_" + p.Name})
	}
	id, err := r.cfg.Store.CreateRun(ctx, rec, ps)
	if err != nil {
		return Info{}, err
	}
	rec.ID, rec.Status = id, store.RunRunning
	for i, p := range ps {
		_, err := sessions.Start(ctx, session.StartRequest{SessionStart: wire.SessionStart{
			Agent: p.Agent, WorkingDirectory: req.WorkingDirectory, SessionID: p.SessionID, Policy: req.Policy,
			Title: fmt.Sprintf("run %d: %s", id, p.Name)}})
		if err != nil {
			for _, started := range ps[:i] {
				sessions.Release(started.SessionID)
			}
			if _, e := r.cfg.Store.EndRun(ctx, id, store.RunFailed, fmt.Sprintf("participant %q did not start: %v", p.Name, err), r.cfg.Now()); e != nil {
				r.cfg.Logger.Error("ending a run", "run", id, "err", e)
			}
			r.update(context.WithoutCancel(ctx), id)
			return Info{}, err
		}
	}
	if err := r.take(ctx, rec); err != nil {
		return Info{}, err
	}
	first := ps[0]
	for _, p := range ps {
		if p.Role == "implementer" {
			first = p
			break
		}
	}
	if _, err := r.send(ctx, id, Message{Type: TypeTask, From: User, To: first.Name, Content: req.Task}); err != nil {
		return Info{}, err
	}
	r.update(context.WithoutCancel(ctx), id)
	return r.Info(ctx, id)
}

func checkParticipants(ps []Participant) error {
	if len(ps) < 2 || len(ps) > 8 {
		return invalid("a run has 2 to 8 participants")
	}
	seen := map[string]bool{}
	roles := map[string]int{}
	for _, p := range ps {
		if !namePattern.MatchString(p.Name) || p.Name == User {
			return invalid("participant name %q: 1 to 32 lower-case letters, digits, '-' or '_', starting with a letter, and not %q", p.Name, User)
		}
		if seen[p.Name] {
			return invalid("two participants are named %q", p.Name)
		}
		seen[p.Name] = true
		if p.Role != "implementer" && p.Role != "reviewer" {
			return invalid("participant %q: role must be implementer or reviewer", p.Name)
		}
		roles[p.Role]++
	}
	if roles["implementer"] == 0 || roles["reviewer"] == 0 {
		return invalid("the review template needs an implementer and a reviewer")
	}
	return nil
}

// SendResult says what became of a sent message.
type SendResult struct {
	RunID     int64  `json:"run_id"`
	Seq       int64  `json:"seq"`
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate"`
}

// Send sends a message of the user's (a chat, or a task) into a running
// run.
func (r *Runner) Send(ctx context.Context, runID int64, to, typ, content, signal string) (SendResult, error) {
	return r.send(ctx, runID, Message{Type: typ, From: User, To: to, Content: content, Signal: signal})
}

// send validates m, stores it (once), logs it for the phones and wakes the
// run.
func (r *Runner) send(ctx context.Context, runID int64, m Message) (SendResult, error) {
	r.mu.Lock()
	lr := r.live[runID]
	var names []string
	full := false
	if lr != nil {
		names = lr.names()
		full = lr.status.TotalMessages >= r.cfg.MaxMessages
	}
	r.mu.Unlock()
	if lr == nil {
		rec, _, err := r.cfg.Store.Run(ctx, runID)
		if errors.Is(err, store.ErrNotFound) {
			return SendResult{}, invalid("no run %d", runID)
		}
		if err != nil {
			return SendResult{}, err
		}
		return SendResult{}, invalid("run %d has ended (%s): it takes no more messages", runID, rec.Status)
	}
	if err := validate(m, names); err != nil {
		return SendResult{}, invalid("%v", err)
	}
	if full {
		return SendResult{}, invalid("run %d holds %d messages, the most a run takes", runID, r.cfg.MaxMessages)
	}
	m.RunID = runID
	m.ID = GenerateID(m.Type, m.From, m.To, m.Content)
	// Stored to the millisecond: what phones see live is what an export
	// says later.
	now := time.UnixMilli(r.cfg.Now().UnixMilli())
	seq, fresh, err := r.cfg.Store.AppendRunMessage(ctx, store.RunMessage{RunID: runID, ID: m.ID, Type: m.Type, From: m.From, To: m.To,
		Content: m.Content, Signal: m.Signal, CreatedAt: now})
	if err != nil {
		return SendResult{}, err
	}
	res := SendResult{RunID: runID, Seq: seq, ID: m.ID, Duplicate: !fresh}
	if !fresh {
		return res, nil
	}
	m.Timestamp = Timestamp(now)
	r.mu.Lock()
	lr.status.add(m.From, m.Type, m.Signal, 1)
	counts := lr.status.clone()
	r.mu.Unlock()
	if _, err := r.cfg.Events.Append(session.Entry{Type: wire.TypeRunMessage, Payload: RunMessage{Seq: seq, Message: m, Counts: &counts}}); err != nil {
		r.cfg.Logger.Error("logging a run message", "run", runID, "err", err)
	}
	if m.Signal == SignalFail {
		r.update(context.WithoutCancel(ctx), runID)
	}
	lr.poke()
	return res, nil
}

// Stop ends a running run at the user's request: the participants' turns
// are interrupted and nothing more is given to them.
func (r *Runner) Stop(ctx context.Context, runID int64) (Info, error) {
	r.mu.Lock()
	lr := r.live[runID]
	sessions := r.sessions
	r.mu.Unlock()
	if lr == nil {
		return r.Info(ctx, runID)
	}
	r.end(ctx, lr, store.RunStopped, "stopped from a phone")
	for _, m := range lr.members {
		if err := sessions.Interrupt(m.p.SessionID); err != nil {
			r.cfg.Logger.Info("interrupting a stopped run's participant", "run", runID, "participant", m.p.Name, "err", err)
		}
	}
	return r.Info(ctx, runID)
}

// Info returns a run as phones see it.
func (r *Runner) Info(ctx context.Context, runID int64) (Info, error) {
	rec, ps, err := r.cfg.Store.Run(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return Info{}, invalid("no run %d", runID)
	}
	if err != nil {
		return Info{}, err
	}
	st, err := r.Status(ctx, runID)
	if err != nil {
		return Info{}, err
	}
	info := Info{RunID: rec.ID, Template: rec.Template, Task: rec.Task, WorkingDirectory: rec.WorkDir, MaxRounds: rec.MaxRounds,
		Round: min(st.FailCount+1, rec.MaxRounds), Status: rec.Status, Reason: rec.Reason, CreatedAt: wire.Timestamp(rec.CreatedAt), Counts: st}
	if !rec.EndedAt.IsZero() {
		info.EndedAt = wire.Timestamp(rec.EndedAt)
	}
	for _, p := range ps {
		info.Participants = append(info.Participants, Participant{Name: p.Name, Agent: p.Agent, Role: p.Role, SessionID: p.SessionID})
	}
	return info, nil
}

// List returns the newest runs first, at most limit.
func (r *Runner) List(ctx context.Context, limit int) ([]Info, error) {
	recs, err := r.cfg.Store.Runs(ctx, false, limit)
	if err != nil {
		return nil, err
	}
	out := []Info{}
	for _, rec := range recs {
		info, err := r.Info(ctx, rec.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// Messages returns a run's messages after seq after, oldest first, at most
// limit.
func (r *Runner) Messages(ctx context.Context, runID, after int64, limit int) ([]RunMessage, error) {
	ms, err := r.cfg.Store.RunMessages(ctx, runID, after, limit)
	if err != nil {
		return nil, err
	}
	out := []RunMessage{}
	for _, m := range ms {
		out = append(out, RunMessage{Seq: m.Seq, Message: fromStore(m)})
	}
	return out, nil
}

// Status counts a run's messages, as the spec's bridge does.
func (r *Runner) Status(ctx context.Context, runID int64) (Status, error) {
	return StatusOf(ctx, r.cfg.Store, runID)
}

// Export writes a run's messages in st to w as the spec's bridge.jsonl: a
// JSON object a line, the spec's fields in the spec's order.
func Export(ctx context.Context, st *store.Store, runID int64, w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for after := int64(0); ; {
		page, err := st.RunMessages(ctx, runID, after, 1000)
		if err != nil {
			return err
		}
		for _, m := range page {
			if err := enc.Encode(fromStore(m)); err != nil {
				return err
			}
			after = m.Seq
		}
		if len(page) < 1000 {
			return nil
		}
	}
}

// StatusOf counts a run's messages in st.
func StatusOf(ctx context.Context, st *store.Store, runID int64) (Status, error) {
	counts, err := st.RunCounts(ctx, runID)
	if err != nil {
		return Status{}, err
	}
	s := newStatus(runID)
	for _, c := range counts {
		s.add(c.From, c.Type, c.Signal, c.N)
	}
	return s, nil
}

// Member implements session.RunTools.
func (r *Runner) Member(ctx context.Context, sessionID string) (string, error) {
	p, err := r.cfg.Store.RunParticipantBySession(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return p.Name, err
}

// Call implements session.RunTools: a participant's agent uses a tool. The
// sender is the participant the session is, whatever the agent says.
func (r *Runner) Call(ctx context.Context, sessionID string, call agent.RunCall) (json.RawMessage, error) {
	p, err := r.cfg.Store.RunParticipantBySession(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errors.New("this session takes part in no run")
	}
	if err != nil {
		return nil, err
	}
	var res any
	switch call.Tool {
	case agent.ToolSend:
		sr, err := r.send(ctx, p.RunID, Message{Type: call.Type, From: p.Name, To: call.To, Content: call.Content, Signal: call.Signal})
		if err != nil {
			var we *wire.Error
			if errors.As(err, &we) {
				return nil, errors.New(we.Message)
			}
			return nil, err
		}
		res = sr
	case agent.ToolReceive:
		msgs, err := r.receive(ctx, p)
		if err != nil {
			return nil, err
		}
		res = struct {
			Messages []Message `json:"messages"`
		}{msgs}
	case agent.ToolStatus:
		st, err := r.Status(ctx, p.RunID)
		if err != nil {
			return nil, err
		}
		res = st
	default:
		return nil, fmt.Errorf("no tool %q", call.Tool)
	}
	return json.Marshal(res)
}

// receive drains what a participant has not seen: the messages for it
// after its last delivered one and after those its running turn was given.
func (r *Runner) receive(ctx context.Context, p store.RunParticipant) ([]Message, error) {
	after := p.Delivered
	r.mu.Lock()
	if m := r.members[p.SessionID]; m != nil {
		after = max(after, m.inflight)
	}
	r.mu.Unlock()
	msgs, err := r.cfg.Store.RunMessages(ctx, p.RunID, after, 1000)
	if err != nil {
		return nil, err
	}
	out := []Message{}
	for _, sm := range msgs {
		if m := fromStore(sm); m.ForAgent(p.Name) {
			out = append(out, m)
		}
	}
	if len(msgs) > 0 {
		last := msgs[len(msgs)-1].Seq
		if err := r.cfg.Store.SetRunDelivered(ctx, p.RunID, p.Name, last); err != nil {
			return nil, err
		}
	}
	return out, nil
}
