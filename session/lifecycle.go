package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// sess is a session whose sandbox this daemon runs or starts.
type sess struct {
	m  *Manager
	tr *translator

	mu      sync.Mutex
	rec     store.Session
	sb      Sandbox
	ready   bool
	running bool
	ending  bool
	// endWhy tells the phones why an ending session's questions are
	// cancelled, whoever sees the sandbox end first.
	endWhy   string
	stopping bool      // the sandbox is being stopped for idleness
	idle     idleTimer // stops the sandbox after IdleTimeout without a turn
	queue    []prompt
	readyReq string // envelope id of the session_start to answer
	resumed  bool
	// adopting: the sandbox an earlier daemon left runs; run adopts it.
	// detached: the daemon stops and leaves the sandbox to the next one.
	adopting bool
	detached bool
	// configs are the configure commands waiting for the agent's answer,
	// by id; configuring counts the phones' changes under way.
	configs     map[string]chan sandbox.Event
	configuring int
	// remote is set once a terminal session's bridge took over from the
	// terminal; handingBack once the terminal asked for it back.
	remote      atomic.Bool
	handingBack bool
	// released is set once the run the session took part in ended: its
	// sandbox stops as soon as it is idle (Release).
	released atomic.Bool
	// runCalls holds a token for each run tool call being answered.
	runCalls chan struct{}
}

// StartRequest is a phone's session_start.
type StartRequest struct {
	wire.SessionStart
	// RequestID is the envelope id, echoed by session_ready.
	RequestID string
	// AgentSessionID, when set, makes the new session continue that agent
	// conversation (a Claude Code session id: the agent runs with --resume
	// of it), as a past session of the history resumes.
	AgentSessionID string
}

// Start creates (or, with Resume, resumes) a session. The sandbox starts in
// the background: session_ready, or an error and session_end, follow as
// events. It returns the session id.
func (m *Manager) Start(ctx context.Context, r StartRequest) (string, error) {
	if r.Resume {
		return m.resume(ctx, r)
	}
	agentName := r.Agent
	if agentName == "" && len(m.cfg.Agents) > 0 {
		agentName = m.cfg.Agents[0]
	}
	if !slices.Contains(m.cfg.Agents, agentName) {
		return "", wire.Errorf(wire.CodeAgentError, "unknown agent %q; this daemon runs %s", r.Agent, strings.Join(m.cfg.Agents, ", "))
	}
	policy := r.Policy
	if policy == "" {
		policy = DefaultPolicy
	}
	if !slices.Contains(policies, policy) {
		return "", wire.Errorf(wire.CodeInvalidMessage, "policy must be one of %s", strings.Join(policies, ", "))
	}
	// The id becomes an argument of the agent's command line: never one
	// that reads as an option.
	if r.AgentSessionID != "" && (!sessionIDPattern.MatchString(r.AgentSessionID) || strings.HasPrefix(r.AgentSessionID, "-")) {
		return "", wire.Errorf(wire.CodeInvalidMessage, "the agent session id must be 1 to 64 letters, digits, '-' or '_', not starting with '-'")
	}
	settings := store.Settings{Model: r.Model, PermissionMode: r.PermissionMode, MaxThinkingTokens: r.MaxThinkingTokens}
	if err := m.checkSettings(settings); err != nil {
		return "", err
	}
	dir, err := m.workDir(r.WorkingDirectory)
	if err != nil {
		return "", err
	}
	id := r.SessionID
	if id == "" {
		id = newID("sess_")
	} else if !sessionIDPattern.MatchString(id) {
		return "", wire.Errorf(wire.CodeInvalidMessage, "session_id must be 1 to 64 letters, digits, '-' or '_'")
	}
	now := m.cfg.Now()
	title := r.Title
	if title == "" {
		title = filepath.Base(dir)
	}
	rec := store.Session{ID: id, Agent: agentName, Source: store.SourceSandbox, WorkingDirectory: dir, Title: title, AgentSessionID: r.AgentSessionID,
		Status: store.StatusStarting, Policy: policy, CreatedAt: now, UpdatedAt: now, Settings: settings}
	if !m.room() {
		return "", m.full()
	}
	if err := m.cfg.Store.CreateSession(ctx, rec); errors.Is(err, store.ErrExists) {
		return "", wire.Errorf(wire.CodeInvalidMessage, "a session with id %q already exists; resume it with resume: true", id)
	} else if err != nil {
		return "", err
	}
	if _, err := m.adopt(rec, r.RequestID, false); err != nil {
		// Another session took the last place meanwhile: this one waits,
		// idle, for its first message.
		m.parkIdle(rec)
		return "", err
	}
	return id, nil
}

// room reports whether another sandbox may start now.
func (m *Manager) room() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.MaxSessions <= 0 || len(m.live) < m.cfg.MaxSessions
}

func (m *Manager) full() error {
	return wire.Errorf(wire.CodeRateLimited, "%d sessions are running, the most this daemon runs at once (--max-sessions): end one, or wait until one stops for idleness", m.cfg.MaxSessions)
}

// parkIdle records a session whose sandbox could not start as idle: its
// next message starts it.
func (m *Manager) parkIdle(rec store.Session) {
	rec.Status, rec.UpdatedAt = store.StatusIdle, m.cfg.Now()
	if err := m.cfg.Store.UpdateSession(context.Background(), rec); err != nil {
		m.cfg.Logger.Error("recording session status", "session", rec.ID, "err", err)
	}
}

func (m *Manager) resume(ctx context.Context, r StartRequest) (string, error) {
	m.mu.Lock()
	s := m.live[r.SessionID]
	m.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		ready := s.ready
		if !ready {
			s.readyReq = r.RequestID
		}
		s.mu.Unlock()
		if ready {
			s.emitReady(r.RequestID)
		}
		return r.SessionID, nil
	}
	rec, err := m.cfg.Store.Session(ctx, r.SessionID)
	if errors.Is(err, store.ErrNotFound) || err == nil && rec.Source != store.SourceSandbox {
		return "", errNotFound(r.SessionID)
	}
	if err != nil {
		return "", err
	}
	if _, err := m.workDir(rec.WorkingDirectory); err != nil {
		return "", err
	}
	rec.Status, rec.Error, rec.UpdatedAt = store.StatusStarting, "", m.cfg.Now()
	if err := m.cfg.Store.UpdateSession(ctx, rec); err != nil {
		return "", err
	}
	if _, err := m.adopt(rec, r.RequestID, true); err != nil {
		m.parkIdle(rec)
		return "", err
	}
	return rec.ID, nil
}

// adopt makes rec a live session of this daemon and starts its sandbox,
// unless the daemon is shutting down or runs MaxSessions sandboxes.
func (m *Manager) adopt(rec store.Session, requestID string, resumed bool, queue ...prompt) (*sess, error) {
	return m.launch(m.newSess(rec, requestID, resumed, queue))
}

func (m *Manager) newSess(rec store.Session, requestID string, resumed bool, queue []prompt) *sess {
	s := &sess{m: m, rec: rec, readyReq: requestID, resumed: resumed, queue: queue, configs: map[string]chan sandbox.Event{},
		runCalls: make(chan struct{}, maxRunCalls)}
	s.tr = newTranslator(rec.ID, s.emitAgent, m.cfg.Now)
	s.tr.onMode = s.agentMode
	// After IdleTimeout with no turn running, nothing queued and no
	// question pending, the sandbox stops.
	s.idle = idleTimer{d: m.cfg.IdleTimeout, fire: s.stopIdle}
	if rec.Source == SourceTerminal {
		// The phone keeps a terminal's session until the terminal takes
		// it back.
		s.idle.d = 0
	}
	return s
}

// launch makes s live and starts its sandbox, unless the daemon is shutting
// down or runs MaxSessions sandboxes (or s is live already).
func (m *Manager) launch(s *sess) (*sess, error) {
	rec := s.rec
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return nil, wire.Errorf(wire.CodeBridgeError, "the daemon is shutting down")
	}
	if old := m.live[rec.ID]; old != nil {
		return old, nil
	}
	if m.cfg.MaxSessions > 0 && len(m.live) >= m.cfg.MaxSessions {
		return nil, m.full()
	}
	m.live[rec.ID] = s
	m.wg.Add(1)
	go s.run()
	return s, nil
}

// stopIdle stops an idle session's sandbox; the session stays, and its
// next message starts a sandbox again (as after a restart).
func (s *sess) stopIdle() {
	// A question waiting for a phone keeps the sandbox: its agent waits.
	pending := s.m.pendingIn(s.rec.ID)
	s.mu.Lock()
	sb := s.sb
	stop := !pending && !s.running && len(s.queue) == 0 && !s.ending && !s.stopping && sb != nil
	if stop {
		s.stopping = true
	}
	// A turn that runs re-arms the countdown when it ends; a question
	// alone does not, so wait again.
	rearm := pending && !s.running && !s.ending && !s.stopping
	s.mu.Unlock()
	switch {
	case stop:
		askStop(sb, s.m.cfg.Logger)
	case rearm:
		s.idle.arm()
	}
}

// liveSession returns the running session, resuming one that a restart
// left idle.
func (m *Manager) liveSession(ctx context.Context, id string) (*sess, error) {
	m.mu.Lock()
	s := m.live[id]
	m.mu.Unlock()
	if s != nil {
		return s, nil
	}
	rec, err := m.cfg.Store.Session(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNotFound(id)
	}
	if err != nil {
		return nil, err
	}
	if rec.Source == SourceTerminal {
		// The phone's message hands the session over (attachTerminal);
		// its status stays the terminal's until then.
		m.mu.Lock()
		t := m.terminals[id]
		m.mu.Unlock()
		if t == nil {
			return nil, wire.Errorf(wire.CodeInvalidMessage, "session %q: its terminal no longer runs tether claude", id)
		}
		return m.adopt(rec, "", true)
	}
	if rec.Source != store.SourceSandbox {
		return nil, wire.Errorf(wire.CodeInvalidMessage, "session %q is observed through hooks; chat with it in its terminal, or start it there with tether claude", id)
	}
	if !rec.Live() {
		return nil, wire.Errorf(wire.CodeSessionNotFound, "session %q has ended (%s); resume it with session_start and resume: true", id, rec.Status)
	}
	rec.Status, rec.UpdatedAt = store.StatusStarting, m.cfg.Now()
	if err := m.cfg.Store.UpdateSession(ctx, rec); err != nil {
		return nil, err
	}
	if s, err = m.adopt(rec, "", true); err != nil {
		m.parkIdle(rec)
		return nil, err
	}
	return s, nil
}

func (s *sess) setStatus(status store.SessionStatus, errText string) {
	s.mu.Lock()
	s.rec.Status, s.rec.Error, s.rec.UpdatedAt = status, errText, s.m.cfg.Now()
	rec := s.rec
	s.mu.Unlock()
	if err := s.m.cfg.Store.UpdateSession(context.Background(), rec); err != nil {
		s.m.cfg.Logger.Error("recording session status", "session", rec.ID, "err", err)
	}
	s.m.append(Entry{SessionID: rec.ID, Type: wire.TypeSessionStatus, Payload: wire.SessionStatus{SessionID: rec.ID, Status: string(status), Error: errText}})
}

func (s *sess) emitReady(requestID string) {
	s.mu.Lock()
	rec, sb, resumed := s.rec, s.sb, s.resumed
	s.mu.Unlock()
	ready := wire.SessionReady{SessionID: rec.ID, Agent: rec.Agent, WorkingDirectory: rec.WorkingDirectory,
		Status: string(rec.Status), Title: rec.Title, Resumed: resumed,
		Model: rec.Settings.Model, PermissionMode: rec.Settings.PermissionMode, MaxThinkingTokens: rec.Settings.MaxThinkingTokens}
	if s.m.cfg.Branch != nil {
		ready.Branch = s.m.cfg.Branch(rec.WorkingDirectory)
	}
	if sb != nil {
		l := sb.Isolation()
		ready.Sandbox = &wire.Isolation{Bubblewrap: l.Bwrap, Cgroup: l.Cgroup, Network: l.Network, Egress: l.Egress, Warnings: l.Warnings}
	}
	if home := realPath(s.m.cfg.Home); home != "" && realPath(rec.WorkingDirectory) == home {
		ready.Warnings = append(ready.Warnings, "This session works in your home directory: the agent can read and change every file in it, "+
			"dotfiles included (~/.bashrc, ~/.ssh, ~/.config …); only tether's data directory is hidden. Prefer a project's directory.")
	}
	s.m.append(Entry{SessionID: rec.ID, Type: wire.TypeSessionReady, ID: requestID, Payload: ready})
}

// run starts the sandbox and pumps its events until it ends.
func (s *sess) run() {
	defer s.m.wg.Done()
	spec := s.m.cfg.Sandbox
	spec.ID = s.m.sandboxID(s.rec.ID)
	spec.Agent = s.rec.Agent
	spec.AgentSessionID = s.rec.AgentSessionID
	s.mu.Lock()
	spec.Settings = agentSettings(s.rec.Settings)
	s.mu.Unlock()
	spec.WorkDir = s.rec.WorkingDirectory
	spec.Egress = s.m.cfg.Egress[s.rec.Agent]
	if s.m.cfg.Runs != nil && s.rec.Source != SourceTerminal {
		member, err := s.m.cfg.Runs.Member(context.Background(), s.rec.ID)
		if err != nil {
			s.fail(fmt.Sprintf("looking up the session's run: %v", err))
			return
		}
		spec.RunMember = member
	}
	if s.m.cfg.StateDir != "" {
		spec.StateDir = filepath.Join(s.m.cfg.StateDir, s.rec.ID)
		if err := os.MkdirAll(spec.StateDir, 0o700); err != nil {
			s.fail(fmt.Sprintf("creating the session's state directory: %v", err))
			return
		}
	}
	var sb Sandbox
	var err error
	if s.adopting {
		var ok bool
		if sb, ok = s.adoptSandbox(spec); !ok {
			return
		}
		s.pump(sb)
		return
	}
	if s.rec.Source == SourceTerminal {
		if sb, err = s.attachTerminal(); err != nil {
			s.terminalNotTaken(err)
			return
		}
	} else {
		sb, err = s.m.cfg.Spawner.Spawn(context.Background(), spec)
	}
	if err != nil {
		s.m.cfg.Logger.Error("starting sandbox", "session", s.rec.ID, "err", err)
		s.fail("the agent's sandbox did not start: " + err.Error())
		return
	}
	if sb.MemoryLimit() > 0 {
		s.tr.oom = func() (uint64, int64) { return sb.OOMKills(), sb.MemoryLimit() }
	}
	s.mu.Lock()
	if s.ending {
		// The session ended, or the daemon began to stop, while the
		// sandbox started: nobody would stop it.
		s.mu.Unlock()
		closeSandbox(sb)
		return
	}
	s.sb, s.ready = sb, true
	req := s.readyReq
	s.readyReq = ""
	// Settings a phone changed while the sandbox started.
	changed := agentSettings(s.rec.Settings)
	back := s.handingBack
	s.mu.Unlock()
	if changed != spec.Settings {
		if err := sb.Send(sandbox.BridgeCommand{Cmd: sandbox.CmdConfigure, ID: newID("cfg_"), Settings: &changed}); err != nil {
			s.m.cfg.Logger.Warn("sending settings changed during the start", "session", s.rec.ID, "err", err)
		}
	}
	if back {
		askStop(sb, s.m.cfg.Logger) // the terminal asked for its session back meanwhile
	}
	s.setStatus(store.StatusIdle, "")
	s.emitReady(req)
	if s.rec.Source == SourceTerminal {
		s.m.append(Entry{SessionID: s.rec.ID, Type: wire.TypeSessionStatus, Payload: wire.SessionStatus{SessionID: s.rec.ID, Status: string(store.StatusIdle), Mode: ModeRemote}})
	}
	s.next()
	s.idle.arm()
	s.pump(sb)
}

// pump handles the sandbox's events until it ends, and its end.
func (s *sess) pump(sb Sandbox) {
	for ev := range sb.Events() {
		s.handleNumbered(sb, ev)
	}
	s.mu.Lock()
	detached := s.detached
	s.mu.Unlock()
	if detached {
		return // it runs on, for the next daemon
	}
	<-sb.Done()
	if s.rec.Source == SourceTerminal {
		s.terminalExited(sb)
		return
	}
	s.exited(sb)
}

// fail ends a session that could not run.
func (s *sess) fail(msg string) {
	s.setStatus(store.StatusError, msg)
	id := s.rec.ID
	s.m.append(Entry{SessionID: id, Type: wire.TypeError, Payload: wire.ErrorPayload{Code: wire.CodeAgentError, Message: msg, SessionID: id, Recoverable: false}})
	s.m.notify(s.rec.ID, "error", "Session failed", msg, "high", nil)
	s.m.append(Entry{SessionID: id, Type: wire.TypeSessionEnd, Payload: wire.SessionEnd{SessionID: id, Reason: "error", Error: msg}})
	s.m.forget(s)
}

// exited handles the end of the sandbox: asked for, or a fault.
func (s *sess) exited(sb Sandbox) {
	s.mu.Lock()
	ending, stopping, why := s.ending, s.stopping, s.endWhy
	s.idle.disarm()
	s.mu.Unlock()
	if why == "" {
		why = "the agent's sandbox ended"
	}
	s.m.cancelApprovals(s.rec.ID, why)
	if ending {
		closeSandbox(sb)
		s.m.forget(s)
		return
	}
	if stopping {
		// Stopped for idleness: the session goes on without a sandbox
		// until its next message.
		closeSandbox(sb)
		s.m.forget(s)
		s.mu.Lock()
		s.rec.Status, s.rec.UpdatedAt = store.StatusIdle, s.m.cfg.Now()
		rec, queued := s.rec, s.queue
		s.mu.Unlock()
		if err := s.m.cfg.Store.UpdateSession(context.Background(), rec); err != nil {
			s.m.cfg.Logger.Error("recording session status", "session", rec.ID, "err", err)
		}
		reason := "idle_timeout"
		if s.released.Load() {
			reason = "run_ended"
		}
		s.m.append(Entry{SessionID: rec.ID, Type: wire.TypeSessionStatus, Payload: wire.SessionStatus{
			SessionID: rec.ID, Status: string(store.StatusIdle), Sandbox: "stopped", Reason: reason}})
		if len(queued) > 0 {
			// A message came while the sandbox stopped: start it again.
			if _, err := s.m.adopt(rec, "", true, queued...); err != nil {
				s.m.cfg.Logger.Warn("restarting an idle session for its message", "session", rec.ID, "err", err)
			}
		}
		return
	}
	msg := exitMessage(sb.Exit())
	closeSandbox(sb)
	s.m.cfg.Logger.Warn("sandbox ended", "session", s.rec.ID, "why", msg)
	s.fail(msg)
}

func (m *Manager) forget(s *sess) {
	m.mu.Lock()
	if m.live[s.rec.ID] == s {
		delete(m.live, s.rec.ID)
	}
	m.mu.Unlock()
}

// handle maps one bridge event.
func (s *sess) handle(ev sandbox.Event) {
	if s.answered(ev) {
		return
	}
	switch ev.Ev {
	case sandbox.EvMessage:
		s.tr.handle(ev.Data)
	case sandbox.EvPermissionRequest:
		if ev.Request != nil {
			s.m.ask(s, *ev.Request)
		}
	case sandbox.EvPermissionCancel:
		s.m.withdraw(s.rec.ID, ev.RequestID, "the agent withdrew the question")
	case sandbox.EvRunCall:
		s.runCall(ev)
	case sandbox.EvError:
		s.m.append(Entry{SessionID: s.rec.ID, Type: wire.TypeError, Payload: wire.ErrorPayload{
			Code: wire.CodeAgentError, Message: ev.Error, SessionID: s.rec.ID, Recoverable: true}})
	case sandbox.EvDone:
		s.mu.Lock()
		s.running = false
		before := s.rec.AgentSessionID
		if ev.AgentSessionID != "" {
			s.rec.AgentSessionID = ev.AgentSessionID
		} else if s.tr.agentSess != "" {
			s.rec.AgentSessionID = s.tr.agentSess
		}
		// Idle was recorded with the turn's end, unless the agent ended
		// without one or named its session only now.
		record := s.rec.Status != store.StatusIdle || s.rec.AgentSessionID != before
		ending, back := s.ending, s.handingBack
		sb := s.sb
		s.mu.Unlock()
		if back {
			askStop(sb, s.m.cfg.Logger)
		}
		if !ending {
			if record {
				s.setStatus(store.StatusIdle, "")
			}
			s.m.notify(s.rec.ID, "turn_complete", "Agent finished", s.rec.Title+": the agent is waiting for you", "normal", nil)
			s.next()
			s.idle.arm()
		}
	}
}

// Release stops a session's sandbox as soon as its agent is idle, as the
// idle timeout would later; the session stays, and its next message starts
// a sandbox again. An agent-to-agent run releases its sessions when it
// ends.
func (m *Manager) Release(sessionID string) {
	m.mu.Lock()
	s := m.live[sessionID]
	m.mu.Unlock()
	if s != nil {
		s.released.Store(true)
		s.idle.soon(time.Millisecond)
	}
}

// Interrupt stops a session's current turn.
func (m *Manager) Interrupt(sessionID string) error {
	m.mu.Lock()
	s := m.live[sessionID]
	m.mu.Unlock()
	if s == nil {
		return errNotFound(sessionID)
	}
	s.mu.Lock()
	sb, running := s.sb, s.running
	s.queue = nil
	s.mu.Unlock()
	if !running || sb == nil {
		return nil
	}
	return sb.Send(sandbox.BridgeCommand{Cmd: sandbox.CmdInterrupt})
}

// End ends a session: its sandbox shuts down, and session_end follows.
func (m *Manager) End(ctx context.Context, sessionID, reason string) error {
	if reason == "" {
		reason = "user_request"
	}
	m.mu.Lock()
	s, t := m.live[sessionID], m.terminals[sessionID]
	m.mu.Unlock()
	if t != nil {
		// The terminal's session is the user's to end there: ending it
		// from the phone hands it back, its turn interrupted.
		return m.HandBack(sessionID, true)
	}
	if s == nil {
		rec, err := m.cfg.Store.Session(ctx, sessionID)
		if errors.Is(err, store.ErrNotFound) {
			return errNotFound(sessionID)
		}
		if err != nil {
			return err
		}
		if rec.Live() {
			rec.Status, rec.UpdatedAt = store.StatusClosed, m.cfg.Now()
			if err := m.cfg.Store.UpdateSession(ctx, rec); err != nil {
				return err
			}
		}
		m.append(Entry{SessionID: sessionID, Type: wire.TypeSessionEnd, Payload: wire.SessionEnd{SessionID: sessionID, Reason: reason}})
		return nil
	}
	s.end(reason)
	return nil
}

func (s *sess) end(reason string) {
	s.mu.Lock()
	if s.ending {
		s.mu.Unlock()
		return
	}
	s.ending, s.endWhy = true, "the session ended"
	sb := s.sb
	s.queue = nil
	s.mu.Unlock()
	if sb != nil {
		askStop(sb, s.m.cfg.Logger)
		select {
		case <-sb.Done():
		case <-time.After(5 * time.Second):
		}
		closeSandbox(sb)
	}
	s.m.cancelApprovals(s.rec.ID, "the session ended")
	s.setStatus(store.StatusClosed, "")
	s.m.append(Entry{SessionID: s.rec.ID, Type: wire.TypeSessionEnd, Payload: wire.SessionEnd{SessionID: s.rec.ID, Reason: reason}})
	s.m.forget(s)
}

// Shutdown stops every sandbox without ending the sessions: they stay
// resumable and continue after the next start.
func (m *Manager) Shutdown(ctx context.Context) {
	m.transcripts.stopWatching()
	m.mu.Lock()
	m.closing = true
	all := make([]*sess, 0, len(m.live))
	for _, s := range m.live {
		all = append(all, s)
	}
	m.mu.Unlock()
	for _, s := range all {
		pending := m.pendingIn(s.rec.ID)
		s.mu.Lock()
		s.ending, s.endWhy = true, "the daemon is shutting down"
		sb := s.sb
		d, ok := sb.(detacher)
		s.detached = ok && m.cfg.KeepRunningTurns && m.cfg.Sandbox.SocketDir != "" && s.rec.Source == store.SourceSandbox && (s.running || pending)
		s.mu.Unlock()
		switch {
		case s.detached:
			// The next daemon adopts it: the turn and its questions go on.
			m.forgetApprovals(s.rec.ID)
			d.Detach()
		case sb != nil:
			askStop(sb, m.cfg.Logger)
		}
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	for _, s := range all {
		s.mu.Lock()
		if s.detached {
			s.mu.Unlock()
			continue
		}
		if s.sb != nil {
			closeSandbox(s.sb)
		}
		s.rec.Status, s.rec.UpdatedAt = store.StatusIdle, m.cfg.Now()
		rec := s.rec
		s.mu.Unlock()
		if err := m.cfg.Store.UpdateSession(context.Background(), rec); err != nil {
			m.cfg.Logger.Error("recording a session idle at shutdown", "session", rec.ID, "err", err)
		}
	}
}
