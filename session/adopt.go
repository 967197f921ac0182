package session

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// Adopter is a Spawner that also takes over the sandboxes an earlier daemon
// left running (sandbox.Adopt). The daemon's Sandboxes is one; a Spawner
// that is not leaves the sessions of a restart idle, as before.
type Adopter interface {
	// Adopt connects to the running bridge of spec.ID, acknowledging mark,
	// and returns its Sandbox, whose events go on after mark.
	Adopt(ctx context.Context, spec sandbox.Spec, mark sandbox.Mark) (Sandbox, error)
}

func (sandboxes) Adopt(ctx context.Context, spec sandbox.Spec, mark sandbox.Mark) (Sandbox, error) {
	sb, err := sandbox.Adopt(ctx, spec, mark)
	if err != nil {
		return nil, err
	}
	return spawned{sb}, nil
}

// detacher is a Sandbox the daemon can leave running for the next daemon
// (a *sandbox.Sandbox).
type detacher interface{ Detach() }

// forgetApprovals drops the session's pending questions from this daemon
// only, as its stop leaves them to the next daemon: they stay pending in the
// store, and no timer of this one answers them.
func (m *Manager) forgetApprovals(sessionID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, a := range m.approvals {
		if k.sessionID == sessionID {
			if a.timer != nil {
				a.timer.Stop()
			}
			delete(m.approvals, k)
		}
	}
}

// committer is a Sandbox whose bridge numbers its events and forgets them
// once told they are committed (a *sandbox.Sandbox).
type committer interface {
	Generation() string
	Committed(seq int64)
}

// handleNumbered handles one bridge event so that a restart neither loses
// nor repeats what it makes the phones see: the events it appends are
// collected and committed together with the session's sandbox mark (the
// event's number), and only then is the bridge told it may forget it. A
// daemon that adopts the bridge after a crash acknowledges the mark it
// finds and is sent exactly the events after it.
func (s *sess) handleNumbered(sb Sandbox, ev sandbox.Event) {
	c, ok := sb.(committer)
	if !ok || ev.Seq == 0 {
		s.handle(ev)
		return
	}
	s.m.collect(s.rec.ID)
	s.handle(ev)
	entries := s.m.collected(s.rec.ID)
	mark := store.SandboxMark{SessionID: s.rec.ID, Bridge: c.Generation(), Seq: ev.Seq, State: s.tr.snapshot()}
	if err := s.m.cfg.Events.AppendMarked(entries, mark, func() { c.Committed(ev.Seq) }); err != nil {
		s.m.cfg.Logger.Error("appending an agent event's events", "session", s.rec.ID, "seq", ev.Seq, "err", err)
	}
}

// collect starts collecting the events appended for sessionID (append),
// until collected.
func (m *Manager) collect(sessionID string) {
	m.bmu.Lock()
	defer m.bmu.Unlock()
	if m.batches == nil {
		m.batches = map[string][]Entry{}
	}
	m.batches[sessionID] = []Entry{}
}

// collected ends collecting for sessionID and returns what was.
func (m *Manager) collected(sessionID string) []Entry {
	m.bmu.Lock()
	defer m.bmu.Unlock()
	b := m.batches[sessionID]
	delete(m.batches, sessionID)
	return b
}

// addToBatch adds e to its session's collection, if one is under way.
func (m *Manager) addToBatch(e Entry) bool {
	m.bmu.Lock()
	defer m.bmu.Unlock()
	b, ok := m.batches[e.SessionID]
	if ok {
		m.batches[e.SessionID] = append(b, e)
	}
	return ok
}

// leftRunning sorts the bridges an earlier daemon left in the socket
// directory: those of live sessions are returned, to adopt; the others
// (their session ended meanwhile, or nothing can adopt them) are ended.
// Without a socket directory of its own (Sandbox.SocketDir), the daemon
// cannot tell its bridges from another daemon's and leaves them alone.
func (m *Manager) leftRunning(sessions []store.Session) map[string]store.Session {
	dir := m.cfg.Sandbox.SocketDir
	if dir == "" {
		return nil
	}
	left := map[string]bool{}
	for _, id := range sandbox.Adoptable(dir) {
		left[id] = true
	}
	out := map[string]store.Session{}
	if _, ok := m.cfg.Spawner.(Adopter); ok {
		for _, se := range sessions {
			if id := m.sandboxID(se.ID); se.Source == store.SourceSandbox && left[id] {
				out[se.ID] = se
				delete(left, id)
			}
		}
	}
	var caps sandbox.Capabilities
	if m.cfg.Sandbox.Capabilities != nil {
		caps = *m.cfg.Sandbox.Capabilities
	}
	for id := range left {
		m.cfg.Logger.Info("ending a sandbox an earlier daemon left, of no live session", "sandbox", id)
		if err := sandbox.EndOrphan(dir, id, caps); err != nil {
			m.cfg.Logger.Warn("removing the cgroup of a sandbox an earlier daemon left", "sandbox", id, "err", err)
		}
	}
	return out
}

// readopt makes rec, whose bridge an earlier daemon left running, a live
// session again, with its questions still pending (pending: the stored
// ones of its agent).
func (m *Manager) readopt(rec store.Session, pending []store.Approval) {
	s := m.newSess(rec, "", true, nil)
	s.adopting = true
	for _, a := range pending {
		m.restoreApproval(s, a)
	}
	if _, err := m.launch(s); err != nil {
		m.cfg.Logger.Warn("adopting a session's sandbox", "session", rec.ID, "err", err)
		m.cancelApprovals(rec.ID, "the daemon restarted")
		m.parkIdle(rec)
	}
}

// restoreApproval makes a question the agent of s still waits for pending
// again, with what is left of its time.
func (m *Manager) restoreApproval(s *sess, st store.Approval) {
	var p wire.ApprovalRequired
	if err := json.Unmarshal(st.Payload, &p); err != nil || p.RequestID == "" {
		m.cancel(&approval{sessionID: st.SessionID, toolCall: st.ToolCallID}, "the daemon restarted")
		return
	}
	a := &approval{sessionID: st.SessionID, toolCall: st.ToolCallID, requestID: p.RequestID, source: SourceAgent,
		tool: p.Tool, params: p.Params, risk: p.RiskLevel, workDir: s.rec.WorkingDirectory,
		respond: func(d agent.PermissionDecision) { s.answer(p.RequestID, d) }}
	left := m.cfg.ApprovalTimeout
	if t, _, err := wire.ParseTimestamp(p.ExpiresAt); err == nil {
		left = max(t.Sub(m.cfg.Now()), 0)
	}
	m.mu.Lock()
	m.approvals[a.key()] = a
	a.timer = time.AfterFunc(left, func() { m.expire(a.key()) })
	m.mu.Unlock()
}

// adoptSandbox takes over the session's running bridge, acknowledging the
// mark the store holds. A sandbox that cannot be adopted is ended, and the
// session is idle, as after a restart without adoption.
func (s *sess) adoptSandbox(spec sandbox.Spec) (Sandbox, bool) {
	mark, err := s.m.cfg.Store.SandboxMarkOf(context.Background(), s.rec.ID)
	var sb Sandbox
	if err == nil {
		sb, err = s.m.cfg.Spawner.(Adopter).Adopt(context.Background(), spec, sandbox.Mark{Generation: mark.Bridge, Seq: mark.Seq})
	}
	if err != nil {
		s.m.cfg.Logger.Warn("the sandbox an earlier daemon left cannot be adopted: ended; the session resumes on its next message", "session", s.rec.ID, "err", err)
		var caps sandbox.Capabilities
		if spec.Capabilities != nil {
			caps = *spec.Capabilities
		}
		if err := sandbox.EndOrphan(spec.SocketDir, spec.ID, caps); err != nil {
			s.m.cfg.Logger.Warn("removing the cgroup of a sandbox an earlier daemon left", "session", s.rec.ID, "err", err)
		}
		s.m.cancelApprovals(s.rec.ID, "the daemon restarted")
		s.m.forget(s)
		s.setStatus(store.StatusIdle, "")
		return nil, false
	}
	s.m.cfg.Logger.Info("adopted the sandbox an earlier daemon left", "session", s.rec.ID, "after", mark.Seq)
	if c, ok := sb.(committer); ok && mark.Bridge == c.Generation() {
		s.tr.restore(mark.State) // the turn goes on where the mark left it
	}
	s.mu.Lock()
	s.sb, s.ready = sb, true
	s.running = s.rec.Status == store.StatusBusy
	running := s.running
	s.mu.Unlock()
	if !running {
		s.idle.arm()
	}
	return sb, true
}
