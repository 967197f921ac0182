package sandbox

import "fmt"

// order checks that the events a bridge sends after its "ready" are
// numbered as the protocol says: each seq one more than the last, so that
// the daemon, which commits a mark at each event's seq and acknowledges
// it, neither handles an event twice nor loses one without saying so. The
// bridge shares its sandbox with the agent and is untrusted: an event
// that breaks the order cannot be placed, and ends the bridge
// ([ExitProtocol]).
//
// A line that could not be decoded may have been one of the bridge's
// events, whose number the daemon then never saw: after n such lines the
// next event may skip up to n numbers. Each such line reached the session
// as an error, so the loss is reported, not silent.
type order struct {
	last   int64 // the seq of the last event passed on
	unread int64 // lines since then that could not be decoded
}

// admit checks ev, the next event the bridge sent (not a pong), and moves
// on past it.
func (o *order) admit(ev Event) error {
	if ev.Ev == EvReady {
		return fmt.Errorf("%w: a second ready (seq %d)", ErrProtocol, ev.Seq)
	}
	// ev.Seq > o.last >= 0 below: the difference cannot overflow.
	if ev.Seq <= o.last || ev.Seq-o.last > 1+o.unread {
		return fmt.Errorf("%w: %s numbered %d where %d was due", ErrProtocol, ev.Ev, ev.Seq, o.last+1)
	}
	o.last, o.unread = ev.Seq, 0
	return nil
}

// skip counts a line that could not be decoded.
func (o *order) skip() { o.unread++ }
