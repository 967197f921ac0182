package sandbox

import (
	"bufio"
	"encoding/json"
	"net"
	"testing"
	"testing/synctest"
)

// A full outbox holds the agent back instead of dropping: the send past
// the bound waits for an ack, and every event reaches the next daemon once,
// in order, after what it acknowledged.
func TestOutboxBoundHoldsBackAndDropsNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testOutboxBound)
}

func testOutboxBound(t *testing.T) {
	ev := Event{Ev: EvMessage, Data: json.RawMessage(`{"type":"assistant"}`)}
	line, err := encodeLine(Event{Ev: EvMessage, Data: ev.Data, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	o := newOutbox(true, 3*len(line)) // room for three events
	for range 3 {
		if err := o.send(ev); err != nil {
			t.Fatal(err)
		}
	}
	blocked := make(chan error, 1)
	go func() { blocked <- o.send(ev) }()
	synctest.Wait() // the sender is blocked, or done
	select {
	case err := <-blocked:
		t.Fatalf("a fourth event went into a full outbox (%v)", err)
	default:
	}
	// An answer to a daemon's command does not wait: the command loop
	// that sends it is what reads the acks that make room.
	if err := o.sendNow(ev); err != nil {
		t.Fatal(err)
	}
	o.ack(2) // the daemon committed the first two: room for the fourth
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}

	daemon, bridge := net.Pipe()
	defer daemon.Close()
	attached := make(chan error, 1)
	go func() { attached <- o.attach(bridge, 2) }()
	r := bufio.NewReader(daemon)
	for want := int64(3); want <= 5; want++ {
		b, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		var got Event
		if err := json.Unmarshal(b, &got); err != nil || got.Seq != want {
			t.Fatalf("event %s (%v), want seq %d", b, err, want)
		}
	}
	if err := <-attached; err != nil {
		t.Fatal(err)
	}
	o.close()
	if err := o.send(ev); err == nil {
		t.Error("an ended outbox took an event")
	}
}
