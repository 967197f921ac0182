package sandbox

import (
	"context"
	"net"
	"testing"
)

// TestAttachServesABridgeThatDialedIn: a bridge run on a connection it
// already has (as `tether claude` runs one) is served by Attach like a
// spawned one: a turn's messages, then "done"; its shutdown ends the
// Sandbox cleanly, a Close as killed.
func TestAttachServesABridgeThatDialedIn(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"shutdown", "close"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			daemonSide, bridgeSide := net.Pipe()
			ran := make(chan error, 1)
			go func() {
				ran <- RunBridge(context.Background(), BridgeConfig{Conn: bridgeSide, SandboxID: "t1", Agent: "demo", WorkDir: t.TempDir()})
			}()
			sb, err := Attach(context.Background(), daemonSide, "t1", nil)
			if err != nil {
				t.Fatal(err)
			}
			if sb.Pid() != 0 || sb.Layers.Bwrap || len(sb.Layers.Warnings) != 1 {
				t.Fatalf("an attached bridge: pid %d, layers %+v", sb.Pid(), sb.Layers)
			}
			if err := sb.Query("hello", "s1", false); err != nil {
				t.Fatal(err)
			}
			var messages int
			for ev := range sb.Events() {
				if ev.Ev == EvMessage {
					messages++
				}
				if ev.Ev == EvDone {
					break
				}
			}
			if messages == 0 {
				t.Fatal("no message before done")
			}
			want := ExitClean
			if end == "shutdown" {
				sb.Shutdown()
			} else {
				sb.Close()
				want = ExitKilled
			}
			<-sb.Done()
			if got := sb.Exit().Reason; got != want {
				t.Fatalf("exit %v, want %v", got, want)
			}
			if err := <-ran; err != nil && end == "shutdown" {
				t.Fatalf("RunBridge: %v", err)
			}
			sb.Close()
		})
	}
}

// TestAttachRefusesAWrongStart: the first event must be "ready".
func TestAttachRefusesAWrongStart(t *testing.T) {
	t.Parallel()
	daemonSide, other := net.Pipe()
	go func() {
		NewEncoder(other).Encode(Event{Ev: EvDone})
		other.Close()
	}()
	if _, err := Attach(context.Background(), daemonSide, "t2", nil); err == nil {
		t.Fatal("attached to a bridge that did not start with ready")
	}
}
