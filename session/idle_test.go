package session

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestIdleTimer: the countdown fires once after d of idleness, never once
// disarmed, and counts from the last turn's end.
func TestIdleTimer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var fired atomic.Int32
		it := &idleTimer{d: 30 * time.Minute, fire: func() { fired.Add(1) }}
		it.arm()
		time.Sleep(29 * time.Minute)
		synctest.Wait()
		if fired.Load() != 0 {
			t.Fatal("fired before its time")
		}
		it.disarm() // the sandbox ended
		time.Sleep(time.Hour)
		synctest.Wait()
		if fired.Load() != 0 {
			t.Fatal("fired once disarmed")
		}
		it.arm() // a new sandbox's turn ends
		time.Sleep(20 * time.Minute)
		it.arm() // and another
		time.Sleep(29 * time.Minute)
		synctest.Wait()
		if fired.Load() != 0 {
			t.Fatal("counted from the first idleness, not the last")
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if fired.Load() != 1 {
			t.Fatalf("fired %d times after 31 idle minutes, want 1", fired.Load())
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if fired.Load() != 1 {
			t.Fatalf("fired %d times, want once", fired.Load())
		}
		(&idleTimer{fire: func() { fired.Add(1) }}).arm()
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		if fired.Load() != 1 {
			t.Fatal("a zero timeout fired")
		}
	})
}
