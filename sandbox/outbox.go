package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// DefaultMaxHeld bounds the bytes of events a bridge keeps for a daemon
// that has not acknowledged them: past it the agent waits (its next event
// blocks) until an ack frees room or the bridge ends.
const DefaultMaxHeld = 32 << 20

// errBridgeEnded is a send after the bridge began to end.
var errBridgeEnded = errors.New("sandbox: the bridge is ending")

// outbox numbers the bridge's events and writes them to the daemon. With
// hold, it keeps each event until the daemon acknowledges it (ack), so that
// a daemon connecting after another died is sent what that one never
// committed, in order, and nothing it did; without hold an event goes to
// the connection or is lost with it, as before re-adoption existed.
type outbox struct {
	hold bool
	max  int

	mu     sync.Mutex
	space  *sync.Cond // signalled when an ack frees room or the bridge ends
	seq    int64      // last number given
	held   []heldEvent
	size   int
	conn   net.Conn // the daemon's connection once attached, else nil
	closed bool
}

type heldEvent struct {
	seq  int64
	line []byte
}

func newOutbox(hold bool, max int) *outbox {
	if max <= 0 {
		max = DefaultMaxHeld
	}
	o := &outbox{hold: hold, max: max}
	o.space = sync.NewCond(&o.mu)
	return o
}

func encodeLine(ev Event) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("sandbox protocol: encode: %w", err)
	}
	return append(b, '\n'), nil
}

// send numbers ev and writes it to the attached daemon. With hold it is
// kept until acknowledged, and a missing or failing connection is no error:
// the next daemon gets it. While max bytes are held it waits for the
// daemon's acks: the agent's events do.
func (o *outbox) send(ev Event) error { return o.put(ev, true) }

// sendNow is send without the wait, for the command loop's answers to the
// daemon's commands (one each, small): waiting, the loop would read no ack
// to make room, nor ping, and the daemon would end the bridge as hung.
func (o *outbox) sendNow(ev Event) error { return o.put(ev, false) }

func (o *outbox) put(ev Event, wait bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for wait && o.hold && o.size >= o.max && !o.closed {
		o.space.Wait()
	}
	if o.closed {
		return errBridgeEnded
	}
	o.seq++
	ev.Seq = o.seq
	line, err := encodeLine(ev)
	if err != nil {
		o.seq--
		return err
	}
	if o.hold {
		o.held = append(o.held, heldEvent{seq: ev.Seq, line: line})
		o.size += len(line)
	}
	if o.conn == nil {
		if o.hold {
			return nil
		}
		return fmt.Errorf("sandbox: no daemon connected: %w", net.ErrClosed)
	}
	if err := o.write(o.conn, line); err != nil && !o.hold {
		return err
	}
	return nil
}

// write writes one line to c; a failed write closes c, which ends the
// serving of that connection. Called with mu held.
func (o *outbox) write(c net.Conn, line []byte) error {
	c.SetWriteDeadline(time.Now().Add(bridgeWriteWait))
	if _, err := c.Write(line); err != nil {
		c.Close()
		if o.conn == c {
			o.conn = nil
		}
		return fmt.Errorf("sandbox protocol: write: %w", err)
	}
	return nil
}

// reply writes an unnumbered event (ready, pong) to c only, with rights
// (a descriptor for the daemon) when they are set.
func (o *outbox) reply(c net.Conn, ev Event, rights []byte) error {
	line, err := encodeLine(ev)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if uc, ok := c.(*net.UnixConn); ok && rights != nil {
		c.SetWriteDeadline(time.Now().Add(bridgeWriteWait))
		if _, _, err := uc.WriteMsgUnix(line, rights, nil); err != nil {
			c.Close()
			return fmt.Errorf("sandbox protocol: write: %w", err)
		}
		return nil
	}
	return o.write(c, line)
}

// last is the last number given to an event.
func (o *outbox) last() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seq
}

// ack forgets the events up to seq, which the daemon has committed.
func (o *outbox) ack(seq int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.drop(seq)
}

func (o *outbox) drop(seq int64) {
	n := 0
	for n < len(o.held) && o.held[n].seq <= seq {
		o.size -= len(o.held[n].line)
		n++
	}
	if n > 0 {
		o.held = append(o.held[:0], o.held[n:]...)
		o.space.Broadcast()
	}
}

// attach makes c the daemon's connection, after sending it the events it
// has not committed: those after seq.
func (o *outbox) attach(c net.Conn, seq int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.drop(seq)
	for _, h := range o.held {
		if err := o.write(c, h.line); err != nil {
			return err
		}
	}
	o.conn = c
	return nil
}

// detach forgets c as the daemon's connection.
func (o *outbox) detach(c net.Conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.conn == c {
		o.conn = nil
	}
}

// close refuses further events, wakes those waiting for room and closes the
// connection.
func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.space.Broadcast()
	if o.conn != nil {
		o.conn.Close()
		o.conn = nil
	}
}
