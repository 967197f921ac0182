package session

import (
	"context"
	"time"

	"github.com/tetherdev/tether/sandbox"
)

// runCallWait bounds how long the runs take to answer a run tool call.
const runCallWait = 30 * time.Second

// maxRunCalls bounds the run tool calls of a session answered at once: an
// agent that floods its socket with them gets errors, not goroutines.
const maxRunCalls = 4

// runCall answers the agent's use of a run tool, off the event loop: the
// answer may wait for the database while the agent's messages flow on.
func (s *sess) runCall(ev sandbox.Event) {
	s.mu.Lock()
	sb := s.sb
	s.mu.Unlock()
	reply := sandbox.BridgeCommand{Cmd: sandbox.CmdRunReply, ID: ev.ID}
	if s.m.cfg.Runs == nil {
		reply.Error = "this session takes part in no run"
		s.sendReply(sb, reply)
		return
	}
	select {
	case s.runCalls <- struct{}{}:
	default:
		reply.Error = "too many run tool calls at once; wait for their answers"
		s.sendReply(sb, reply)
		return
	}
	s.m.wg.Add(1)
	go func() {
		defer s.m.wg.Done()
		defer func() { <-s.runCalls }()
		ctx, cancel := context.WithTimeout(context.Background(), runCallWait)
		defer cancel()
		res, err := s.m.cfg.Runs.Call(ctx, s.rec.ID, *ev.Call)
		if err != nil {
			reply.Error = err.Error()
		} else {
			reply.Result = res
		}
		s.sendReply(sb, reply)
	}()
}

func (s *sess) sendReply(sb Sandbox, reply sandbox.BridgeCommand) {
	if err := sb.Send(reply); err != nil {
		s.m.cfg.Logger.Warn("answering a run tool call", "session", s.rec.ID, "err", err)
	}
}
