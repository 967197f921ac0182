package sandbox

import (
	"errors"
	"testing"
)

// The order a bridge's events must keep: one more each time, or up to one
// more per line that could not be read since the last event.
func TestOrderAdmits(t *testing.T) {
	t.Parallel()
	msg := func(seq int64) Event { return Event{Ev: EvMessage, Seq: seq} }
	o := order{last: 4}
	for _, step := range []struct {
		skips int
		ev    Event
		ok    bool
	}{
		{0, msg(5), true},
		{0, msg(5), false}, // repeated
		{0, msg(7), false}, // skipped
		{0, msg(4), false}, // backward
		{0, msg(0), false}, // missing
		{0, msg(-9), false},
		{0, Event{Ev: EvReady, Seq: 6}, false},
		{2, msg(8), true}, // two unreadable lines, 6 and 7
		{0, msg(10), false},
		{1, msg(9), true}, // the unreadable line was not an event
		{0, msg(1 << 62), false},
	} {
		for range step.skips {
			o.skip()
		}
		err := o.admit(step.ev)
		if (err == nil) != step.ok || err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("after %d, admit(%s %d) = %v, want ok %v", o.last, step.ev.Ev, step.ev.Seq, err, step.ok)
		}
	}
}
