package session

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// SourceTerminal marks a Claude Code session that runs in a terminal under
// `tether claude`: observed through its hooks while the user types there
// (mode "local"), driven by the phone through a bridge the terminal runs
// (mode "remote") from the phone's first message until the terminal takes
// it back.
const SourceTerminal = store.SourceTerminal

// The two modes of a terminal session, in session_status and the session
// list [extension].
const (
	ModeLocal  = "local"
	ModeRemote = "remote"
)

// Terminal is one `tether claude` as the Manager sees it.
type Terminal interface {
	// Release asks the terminal to stop its interactive claude and
	// returns the connection of the bridge it then runs for the session,
	// from its "ready" on.
	Release(ctx context.Context) (net.Conn, error)
	// Reclaim tells the terminal that the phone is done: it resumes its
	// interactive claude.
	Reclaim()
}

// localTurnWait bounds how long a phone's message waits for a turn the
// user started in the terminal to end before the session is handed over.
const localTurnWait = 30 * time.Minute

// AttachTerminal registers a terminal running `tether claude` for the
// Claude Code session id in the working directory cwd (which must lie in a
// root), as a session of source "terminal" in mode local: its hook events
// are observed as any terminal's; a phone's message hands it over.
func (m *Manager) AttachTerminal(ctx context.Context, id, cwd string, t Terminal) error {
	if !sessionIDPattern.MatchString(id) {
		return wire.Errorf(wire.CodeInvalidMessage, "bad session id %q", id)
	}
	dir, err := m.workDir(cwd)
	if err != nil {
		return err
	}
	m.mu.Lock()
	_, taken := m.terminals[id]
	m.mu.Unlock()
	if taken {
		return wire.Errorf(wire.CodeInvalidMessage, "session %q already runs under tether claude in another terminal", id)
	}
	now := m.cfg.Now()
	rec, err := m.cfg.Store.Session(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		rec = store.Session{ID: id, Agent: "claude-code", Source: SourceTerminal, WorkingDirectory: dir, AgentSessionID: id,
			Title: filepath.Base(dir), Status: store.StatusIdle, CreatedAt: now, UpdatedAt: now}
		if err := m.cfg.Store.CreateSession(ctx, rec); err != nil {
			return err
		}
	case err != nil:
		return err
	case rec.Source == store.SourceSandbox:
		return wire.Errorf(wire.CodeInvalidMessage, "session %q is a sandboxed tether session", id)
	default:
		if err := m.cfg.Store.MakeTerminal(ctx, id, dir, now); err != nil {
			return err
		}
		if err := m.setObservedStatus(ctx, rec, store.StatusIdle); err != nil {
			return err
		}
	}
	m.mu.Lock()
	if m.terminals == nil {
		m.terminals = map[string]Terminal{}
	}
	m.terminals[id] = t
	m.mu.Unlock()
	m.append(Entry{SessionID: id, Type: wire.TypeSessionStatus, Payload: wire.SessionStatus{SessionID: id, Status: string(store.StatusIdle), Mode: ModeLocal}})
	return nil
}

// DetachTerminal is the end of a terminal's `tether claude`: a session the
// phone drives loses its bridge, and the session is closed.
func (m *Manager) DetachTerminal(id string, t Terminal) {
	m.mu.Lock()
	if m.terminals[id] != t {
		m.mu.Unlock()
		return
	}
	delete(m.terminals, id)
	s := m.live[id]
	m.mu.Unlock()
	if s != nil {
		s.end("terminal_closed")
		return
	}
	ctx := context.Background()
	if rec, err := m.cfg.Store.Session(ctx, id); err == nil && rec.Live() {
		if err := m.setObservedStatus(ctx, rec, store.StatusClosed); err != nil {
			m.cfg.Logger.Warn("closing a terminal's session", "session", id, "err", err)
		}
		m.append(Entry{SessionID: id, Type: wire.TypeSessionEnd, Payload: wire.SessionEnd{SessionID: id, Reason: "terminal_closed"}})
	}
}

// HandBack returns a session the phone drives to its terminal: after the
// running turn (at once with interrupt, which interrupts it), the bridge
// stops and the terminal resumes its interactive claude. A session already
// in its terminal is left as it is.
func (m *Manager) HandBack(id string, interrupt bool) error {
	m.mu.Lock()
	s, t := m.live[id], m.terminals[id]
	m.mu.Unlock()
	if t == nil && s == nil {
		return wire.Errorf(wire.CodeSessionNotFound, "session %q has no terminal running tether claude", id)
	}
	if s == nil {
		return nil
	}
	s.mu.Lock()
	s.handingBack = true
	dropped := len(s.queue)
	s.queue = nil
	sb, running := s.sb, s.running
	s.mu.Unlock()
	if dropped > 0 {
		s.m.append(Entry{SessionID: id, Type: wire.TypeError, Payload: wire.ErrorPayload{Code: wire.CodeAgentError, SessionID: id, Recoverable: true,
			Message: fmt.Sprintf("%d queued message(s) not run: the terminal took the session back", dropped)}})
	}
	switch {
	case sb == nil:
		// Still being handed over: run() sees handingBack once attached.
	case running && interrupt:
		return sb.Send(sandbox.BridgeCommand{Cmd: sandbox.CmdInterrupt})
	case !running:
		return sb.Send(sandbox.BridgeCommand{Cmd: sandbox.CmdShutdown})
	}
	return nil
}

// remote reports whether a terminal session is driven by the phone: its
// hook events come from the bridge's claude and are not the terminal's.
func (m *Manager) remote(id string) bool {
	m.mu.Lock()
	s := m.live[id]
	m.mu.Unlock()
	return s != nil && s.remote.Load()
}

// attachTerminal is run()'s sandbox for a terminal session: once the turn
// the user may have started in the terminal is over, the terminal stops
// its claude and connects the bridge it runs instead.
func (s *sess) attachTerminal() (Sandbox, error) {
	id := s.rec.ID
	s.m.mu.Lock()
	t := s.m.terminals[id]
	s.m.mu.Unlock()
	if t == nil {
		return nil, errors.New("its terminal no longer runs tether claude")
	}
	wait, cancel := context.WithTimeout(context.Background(), localTurnWait)
	defer cancel()
	if err := s.m.awaitObservedIdle(wait, id); err != nil {
		return nil, fmt.Errorf("the turn running in the terminal did not end: %w", err)
	}
	s.mu.Lock()
	ending := s.ending
	s.mu.Unlock()
	if ending {
		return nil, errors.New("the session ended")
	}
	ctx, cancelRelease := context.WithTimeout(context.Background(), releaseWait)
	defer cancelRelease()
	// From here on the hooks report the bridge's claude, which the bridge
	// relays itself; what the terminal's claude wrote is relayed already.
	s.remote.Store(true)
	s.m.forgetTranscript(id)
	conn, err := t.Release(ctx)
	if err == nil {
		var sb Sandbox
		if sb, err = s.m.cfg.Spawner.Attach(ctx, conn, s.m.sandboxID(id), s.m.cfg.Logger); err == nil {
			return sb, nil
		}
	}
	// The terminal may have stopped its claude already: it resumes it.
	t.Reclaim()
	return nil, fmt.Errorf("the terminal did not hand over: %w", err)
}

// releaseWait bounds a hand-over once the terminal is asked for it: its
// claude stops, and its bridge connects and says it is ready.
const releaseWait = 30 * time.Second

// terminalNotTaken ends a hand-over that did not happen: the session
// stays its terminal's, and the phone hears why.
func (s *sess) terminalNotTaken(err error) {
	id := s.rec.ID
	s.m.cfg.Logger.Warn("taking a terminal's session over", "session", id, "err", err)
	s.remote.Store(false)
	s.m.forget(s)
	s.mu.Lock()
	ending := s.ending
	s.mu.Unlock()
	if ending {
		return
	}
	s.m.append(Entry{SessionID: id, Type: wire.TypeError, Payload: wire.ErrorPayload{Code: wire.CodeAgentError, SessionID: id, Recoverable: true,
		Message: "the session stays in its terminal: " + err.Error()}})
	s.m.append(Entry{SessionID: id, Type: wire.TypeSessionStatus, Payload: wire.SessionStatus{SessionID: id, Status: string(store.StatusIdle), Mode: ModeLocal}})
}

// awaitObservedIdle waits until the observed session id is not busy (a
// turn the user started in the terminal has ended).
func (m *Manager) awaitObservedIdle(ctx context.Context, id string) error {
	for {
		m.mu.Lock()
		rec, err := m.cfg.Store.Session(ctx, id)
		if err != nil {
			m.mu.Unlock()
			return err
		}
		if rec.Status != store.StatusBusy {
			m.mu.Unlock()
			return nil
		}
		if m.idleWaiters == nil {
			m.idleWaiters = map[string]chan struct{}{}
		}
		ch := m.idleWaiters[id]
		if ch == nil {
			ch = make(chan struct{})
			m.idleWaiters[id] = ch
		}
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// observedChanged wakes whoever waits for the observed session id to leave
// busy.
func (m *Manager) observedChanged(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch := m.idleWaiters[id]; ch != nil {
		close(ch)
		delete(m.idleWaiters, id)
	}
}

// terminalExited is exited() for a terminal session: the bridge ended
// (handed back, or the terminal went away); the session returns to its
// terminal, which resumes its interactive claude, and the transcript is
// followed again from its end, where the bridge's claude left it.
func (s *sess) terminalExited(sb Sandbox) {
	id := s.rec.ID
	s.m.cancelApprovals(id, "the session went back to its terminal")
	closeSandbox(sb)
	s.m.forget(s)
	s.mu.Lock()
	ending := s.ending
	s.mu.Unlock()
	s.m.skipTranscript(id)
	if ending {
		return
	}
	s.m.mu.Lock()
	t := s.m.terminals[id]
	s.m.mu.Unlock()
	s.mu.Lock()
	s.rec.Status, s.rec.UpdatedAt = store.StatusIdle, s.m.cfg.Now()
	rec := s.rec
	s.mu.Unlock()
	if err := s.m.cfg.Store.UpdateSession(context.Background(), rec); err != nil {
		s.m.cfg.Logger.Error("recording session status", "session", id, "err", err)
	}
	s.m.append(Entry{SessionID: id, Type: wire.TypeSessionStatus, Payload: wire.SessionStatus{SessionID: id, Status: string(store.StatusIdle), Mode: ModeLocal}})
	if t != nil {
		t.Reclaim()
	}
}
