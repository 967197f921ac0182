package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Unconfined is the warning an attached bridge's Layers carry.
const Unconfined = "runs in the user's terminal as the user (tether claude): not sandboxed"

// Attach serves a bridge that runs elsewhere and is already connected:
// the agent `tether claude` runs in the user's terminal, as the user, for
// a session the phone took over. conn carries the bridge protocol from
// its "ready" on. The Sandbox has no process of its own: its end is the
// connection's (ExitClean when the other side closed it, ExitKilled after
// Close, ExitHung when it stopped answering pings), and its Layers say
// that nothing is isolated. ctx bounds the wait for "ready".
func Attach(ctx context.Context, conn net.Conn, id string, log *slog.Logger) (*Sandbox, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := newSandbox(id, log)
	s.Layers = Layers{Warnings: []string{Unconfined}}
	s.conn, s.enc = conn, NewEncoder(conn)
	ctx, cancel := context.WithTimeout(ctx, DefaultReadyTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Now()) })
	dec := NewDecoder(conn, 0)
	ev, err := dec.DecodeEvent()
	stop()
	if err == nil && ev.Ev != EvReady {
		err = fmt.Errorf("first event %q", ev.Ev)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	conn.SetReadDeadline(time.Time{})
	s.dec = dec
	go s.read()
	go s.watch(DefaultPingInterval, DefaultPingTimeout)
	go s.acks()
	go func() {
		<-s.hungUp
		s.exit = Exit{Reason: ExitClean}
		if r := s.killReason.Load(); r != 0 {
			s.exit.Reason = ExitReason(r)
		}
		conn.Close()
		s.log.Info("attached bridge ended", "reason", s.exit.Reason)
		close(s.done)
	}()
	return s, nil
}
