package session

import (
	"context"
	"errors"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// configureWait bounds how long a phone's session_configure waits for the
// agent to apply the settings.
const configureWait = 15 * time.Second

// checkSettings checks settings a phone asks for: well formed, and the
// bypassPermissions mode only where the daemon allows it.
func (m *Manager) checkSettings(st store.Settings) error {
	if err := wire.ValidateSettings(st.Model, st.PermissionMode, st.MaxThinkingTokens); err != nil {
		return err
	}
	if st.PermissionMode == wire.ModeBypass && !m.cfg.AllowBypass {
		return wire.Errorf(wire.CodeInvalidMessage, "permission_mode %s runs every tool without asking; this daemon does not allow it (--allow-bypass-permissions)", wire.ModeBypass)
	}
	return nil
}

func agentSettings(st store.Settings) agent.Settings {
	return agent.Settings{Model: st.Model, PermissionMode: st.PermissionMode, MaxThinkingTokens: st.MaxThinkingTokens}
}

func sessionSettings(id string, st store.Settings) wire.SessionSettings {
	return wire.SessionSettings{SessionID: id, Model: st.Model, PermissionMode: st.PermissionMode, MaxThinkingTokens: st.MaxThinkingTokens}
}

// Configure changes a session's agent settings (a phone's
// session_configure) and returns them as the session now has them. A
// running agent applies them first (an agent that refuses is an
// AGENT_ERROR, and nothing changes); a session without a running sandbox
// keeps them for its next start. Every device sees the change as a
// session_settings event.
func (m *Manager) Configure(ctx context.Context, p wire.SessionConfigure, from Sender) (wire.SessionSettings, error) {
	if p.SessionID == "" {
		return wire.SessionSettings{}, wire.Errorf(wire.CodeInvalidMessage, "session_configure needs session_id")
	}
	rec, err := m.cfg.Store.Session(ctx, p.SessionID)
	if errors.Is(err, store.ErrNotFound) {
		return wire.SessionSettings{}, errNotFound(p.SessionID)
	}
	if err != nil {
		return wire.SessionSettings{}, err
	}
	if rec.Source != store.SourceSandbox {
		return wire.SessionSettings{}, wire.Errorf(wire.CodeInvalidMessage, "session %q is observed through hooks; change its settings in its terminal", p.SessionID)
	}
	if !rec.Live() {
		return wire.SessionSettings{}, wire.Errorf(wire.CodeSessionNotFound, "session %q has ended (%s); resume it with session_start and resume: true", p.SessionID, rec.Status)
	}
	m.mu.Lock()
	s := m.live[p.SessionID]
	m.mu.Unlock()
	cur := rec.Settings
	if s != nil {
		s.mu.Lock()
		cur = s.rec.Settings
		s.configuring++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.configuring--
			s.mu.Unlock()
		}()
	}
	next := cur
	if p.Model != nil {
		next.Model = *p.Model
	}
	if p.PermissionMode != nil {
		next.PermissionMode = *p.PermissionMode
	}
	if p.MaxThinkingTokens != nil {
		next.MaxThinkingTokens = *p.MaxThinkingTokens
	}
	if err := m.checkSettings(next); err != nil {
		return wire.SessionSettings{}, err
	}
	if next == cur {
		return sessionSettings(p.SessionID, cur), nil
	}
	if s != nil {
		applied, err := s.configure(ctx, next)
		if err != nil {
			return wire.SessionSettings{}, err
		}
		next = applied
	}
	if err := m.cfg.Store.SetSessionSettings(ctx, p.SessionID, next); err != nil {
		return wire.SessionSettings{}, err
	}
	out := sessionSettings(p.SessionID, next)
	ev := out
	ev.ChangedBy = from.DeviceName
	if s != nil {
		s.mu.Lock()
		s.rec.Settings = next
		s.mu.Unlock()
	}
	m.append(Entry{SessionID: p.SessionID, Type: wire.TypeSessionSettings, Payload: ev})
	return out, nil
}

// configure has the session's running agent apply st and returns the
// settings it has then; without a running sandbox, st is kept for the
// next start (run sends settings that changed while the sandbox started).
func (s *sess) configure(ctx context.Context, st store.Settings) (store.Settings, error) {
	s.mu.Lock()
	sb, ready := s.sb, s.ready
	if !ready || sb == nil {
		s.rec.Settings = st
		s.mu.Unlock()
		return st, nil
	}
	id := newID("cfg_")
	ch := make(chan sandbox.Event, 1)
	s.configs[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.configs, id)
		s.mu.Unlock()
	}()
	as := agentSettings(st)
	if err := sb.Send(sandbox.BridgeCommand{Cmd: sandbox.CmdConfigure, ID: id, Settings: &as}); err != nil {
		return store.Settings{}, wire.Errorf(wire.CodeAgentError, "the agent's sandbox did not take the settings: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, configureWait)
	defer cancel()
	select {
	case ev := <-ch:
		if ev.Ev != sandbox.EvConfigured {
			return store.Settings{}, wire.Errorf(wire.CodeAgentError, "the agent did not take the settings: %s", ev.Error)
		}
		return store.Settings{Model: ev.Settings.Model, PermissionMode: ev.Settings.PermissionMode, MaxThinkingTokens: ev.Settings.MaxThinkingTokens}, nil
	case <-sb.Done():
		return store.Settings{}, wire.Errorf(wire.CodeAgentError, "the agent's sandbox ended before it took the settings")
	case <-ctx.Done():
		return store.Settings{}, wire.Errorf(wire.CodeAgentError, "the agent did not take the settings within %v", configureWait)
	}
}

// answered hands a bridge event answering a configure to its waiter, and
// tells whether it was one.
func (s *sess) answered(ev sandbox.Event) bool {
	if ev.ID == "" || ev.Ev != sandbox.EvConfigured && ev.Ev != sandbox.EvError {
		return false
	}
	s.mu.Lock()
	ch := s.configs[ev.ID]
	s.mu.Unlock()
	if ch != nil {
		ch <- ev
	}
	// A configure nobody waits for any more (or run's own, sent after a
	// start) needs no answer.
	return true
}

// agentMode records a permission mode the agent reports as its own: the
// agent left plan mode when its plan was approved. A change a phone is
// making is left to its session_configure, which reports it.
func (s *sess) agentMode(mode string) {
	s.mu.Lock()
	cur := s.rec.Settings
	if s.configuring > 0 || mode == cur.PermissionMode || mode == wire.ModeDefault && cur.PermissionMode == "" {
		s.mu.Unlock()
		return
	}
	next := cur
	next.PermissionMode = mode
	s.rec.Settings = next
	id := s.rec.ID
	s.mu.Unlock()
	if err := s.m.cfg.Store.SetSessionSettings(context.Background(), id, next); err != nil {
		s.m.cfg.Logger.Error("recording the agent's permission mode", "session", id, "err", err)
	}
	ev := sessionSettings(id, next)
	ev.ChangedBy = "agent"
	s.m.append(Entry{SessionID: id, Type: wire.TypeSessionSettings, Payload: ev})
}
