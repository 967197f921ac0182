package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
)

// Events returns the bridge's events, pong excepted, in order: numbered
// from one more than the Adopt's mark (from 1 otherwise) without a gap,
// but for lines that could not be read, each reported by an error event
// of seq 0. A bridge that breaks that order is ended ([ExitProtocol])
// after an error event that says so. The channel is
// closed when the connection ends. Read it steadily: a full channel holds the
// bridge back (it is never dropped from).
func (s *Sandbox) Events() <-chan Event { return s.events }

// Done is closed once the bridge has exited and everything it left is
// removed; then Exit and Err tell how it ended.
func (s *Sandbox) Done() <-chan struct{} { return s.done }

// Exit tells how the bridge ended; valid once Done is closed.
func (s *Sandbox) Exit() Exit {
	<-s.done
	return s.exit
}

// Err is nil for a clean exit or a Close, else an [*ExitError] unwrapping to
// ErrCrashed, ErrOOM or ErrHung; valid once Done is closed.
func (s *Sandbox) Err() error {
	<-s.done
	if s.exit.Reason == ExitClean || s.exit.Reason == ExitKilled {
		return nil
	}
	return &ExitError{Exit: s.exit}
}

// OOMKills counts the out-of-memory kills in the sandbox's cgroup so far (a
// command the agent ran, say); 0 without a cgroup. After the end, see Exit.
func (s *Sandbox) OOMKills() uint64 {
	select {
	case <-s.done:
		return s.exit.OOMKills
	default:
	}
	if s.cg == nil {
		return 0
	}
	return s.cg.oomKills()
}

// MemoryLimit is the memory limit the sandbox's cgroup enforces, in bytes;
// 0 without a cgroup.
func (s *Sandbox) MemoryLimit() int64 { return s.memLimit }

// Pid is the host process id of the sandbox's outermost process (bwrap, or
// the bridge without bwrap); 0 for an attached bridge (Attach).
func (s *Sandbox) Pid() int {
	switch {
	case s.cmd != nil:
		return s.cmd.Process.Pid
	case s.proc != nil:
		return s.proc.pid
	}
	return 0
}

// Send writes one command to the bridge. A write that blocks for 10 s
// means the bridge stopped reading: it is killed as hung.
func (s *Sandbox) Send(cmd BridgeCommand) error {
	if err := cmd.Validate(); err != nil {
		return err
	}
	select {
	case <-s.done:
		return ErrClosed
	default:
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.conn.SetWriteDeadline(time.Now().Add(bridgeWriteWait))
	if err := s.enc.Encode(cmd); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// A bridge that stops reading is hung, and the line may be cut.
			s.kill(ExitHung)
		}
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return nil
}

// Query starts a turn; the agent's messages follow as events, then "done".
// sessionID is the daemon's id, echoed in "done"; partial asks for token
// deltas (stream_event messages).
func (s *Sandbox) Query(prompt, sessionID string, partial bool) error {
	return s.Send(BridgeCommand{Cmd: CmdQuery, Prompt: prompt, SessionID: sessionID, IncludePartialMessages: partial})
}

// Resume replaces the agent with one resuming agentSessionID.
func (s *Sandbox) Resume(agentSessionID string) error {
	return s.Send(BridgeCommand{Cmd: CmdResume, SessionID: agentSessionID})
}

// Interrupt cancels the running turn.
func (s *Sandbox) Interrupt() error { return s.Send(BridgeCommand{Cmd: CmdInterrupt}) }

// Shutdown asks the bridge to exit cleanly; wait on Done, then Close.
func (s *Sandbox) Shutdown() error {
	s.asked.Store(true)
	return s.Send(BridgeCommand{Cmd: CmdShutdown})
}

// AnswerPermission answers the permission_request requestID.
func (s *Sandbox) AnswerPermission(requestID string, d agent.PermissionDecision) error {
	return s.Send(BridgeCommand{Cmd: CmdPermissionResponse, RequestID: requestID, Decision: &d})
}

// Close kills the bridge and all its processes if they still run, and
// returns once the socket and the cgroup are gone. Call it for every
// sandbox, after Done too: it also stops the delivery of unread events.
func (s *Sandbox) Close() error {
	s.kill(ExitKilled)
	<-s.done
	return nil
}

// kill ends the sandbox for reason unless it is already ending.
func (s *Sandbox) kill(reason ExitReason) {
	s.closeOnce.Do(func() {
		close(s.closing)
		select {
		case <-s.done:
			return
		default:
		}
		s.killReason.Store(int32(reason))
		switch {
		case s.cmd != nil:
			// The tree first, while bwrap still parents it: once bwrap has
			// died its child is reparented and no longer found below it
			// (without a cgroup nothing else would end the agent).
			if s.Layers.Bwrap {
				killTree(s.cmd.Process.Pid)
			} else {
				killSession(s.cmd.Process.Pid, 0)
			}
			// It fails only for a bridge already reaped: nothing to kill.
			_ = s.cmd.Process.Kill()
		case s.proc != nil:
			s.proc.kill(s.Layers.Bwrap)
		default:
			s.conn.Close() // attached: the connection is all there is
			return
		}
		if s.cg != nil {
			s.cg.killAll()
		}
	})
}

// read forwards events until the connection ends, then gives the bridge a
// moment to exit before killing it.
func (s *Sandbox) read() {
	defer close(s.events)
	for {
		ev, err := s.dec.DecodeEvent()
		if err != nil {
			var fatal bool
			for _, e := range []error{ErrLineTooLong, ErrMalformed, ErrUnknownEvent, ErrInvalid} {
				fatal = fatal || errors.Is(err, e)
			}
			if fatal {
				s.log.Warn("bad event from bridge", "err", err)
				s.order.skip()
				// The session hears of it: an event dropped silently
				// would leave a turn without its end.
				s.deliver(Event{Ev: EvError, Code: CodeAgent, Error: "the sandbox sent an event tether could not read (" + err.Error() + "): dropped"})
				continue
			}
			break
		}
		if ev.Ev == EvPong {
			select {
			case s.pong <- ev.ID:
			default:
			}
			continue
		}
		if err := s.order.admit(ev); err != nil {
			// Passed on, the event would be handled twice, or its mark
			// would move the daemon's commit backwards or past events it
			// never saw: the bridge is ended instead, and the session
			// hears why.
			s.log.Warn("the bridge broke the protocol: ending it", "err", err)
			s.deliver(Event{Ev: EvError, Code: CodeAgent, Error: "the sandbox's bridge sent an event out of order (" + err.Error() + "): it is ended"})
			s.kill(ExitProtocol)
			break
		}
		s.delivering.Store(true)
		s.deliver(ev)
		s.delivering.Store(false)
	}
	close(s.hungUp)
	if s.detached.Load() {
		return // the bridge goes on without this daemon
	}
	select {
	case <-s.done:
	case <-time.After(exitGrace):
		s.log.Warn("bridge hung up but did not exit")
		s.kill(ExitHung)
	}
}

// deliver passes ev on to Events, unless the sandbox is closing.
func (s *Sandbox) deliver(ev Event) {
	select {
	case s.events <- ev:
	case <-s.closing:
	}
}

// watch pings the bridge every interval and kills it as hung when a ping
// stays unanswered for timeout while nothing else explains the silence.
func (s *Sandbox) watch(interval, timeout time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-s.done:
			return
		case <-s.closing:
			return
		case <-t.C:
		}
		id := strconv.Itoa(n)
		if err := s.Send(BridgeCommand{Cmd: CmdPing, ID: id}); err != nil {
			return
		}
		if !s.awaitPong(id, timeout) {
			s.log.Warn("bridge does not answer; killing it")
			s.kill(ExitHung)
			return
		}
	}
}

func (s *Sandbox) awaitPong(id string, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case got := <-s.pong:
			if got == id {
				return true
			}
		case <-s.hungUp:
			return true
		case <-deadline.C:
			if !s.delivering.Load() {
				return false
			}
			// The reader waits for our consumer, not for the bridge.
			deadline.Reset(timeout)
		}
	}
}

// Generation names the bridge process: its pid and start time as the pid
// file records them; "" for an attached bridge. A [Mark] of one
// generation says nothing of another, whose events are numbered anew.
func (s *Sandbox) Generation() string { return s.gen }

// Committed tells the sandbox that the caller has committed the bridge's
// events up to seq: the bridge is told (an ack), soon, and forgets them.
// It does not block.
func (s *Sandbox) Committed(seq int64) {
	for {
		old := s.committed.Load()
		if seq <= old || s.committed.CompareAndSwap(old, seq) {
			break
		}
	}
	select {
	case s.commit <- struct{}{}:
	default:
	}
}

// acks sends the bridge an ack for what Committed reported, until the
// sandbox ends.
func (s *Sandbox) acks() {
	for {
		select {
		case <-s.done:
			return
		case <-s.closing:
			return
		case <-s.commit:
		}
		seq := s.committed.Load()
		if seq <= s.acked {
			continue
		}
		if err := s.Send(BridgeCommand{Cmd: CmdAck, Seq: seq}); err != nil {
			return
		}
		s.acked = seq
	}
}
