// Package eventually waits, in tests, for a condition that nothing
// announces: a process appearing in /proc, a file another process writes,
// a runtime file of a daemon starting. Where an event can be awaited (a
// frame, a channel), tests await it instead.
package eventually

import (
	"testing"
	"time"
)

// Timeout bounds every wait. It only decides how late a broken test fails,
// so it is generous: a loaded 2-core CI machine starts processes slowly.
const Timeout = 30 * time.Second

// Every is how often True checks a condition.
const Every = 10 * time.Millisecond

// True returns once cond holds, checking it every 10 ms, and fails t
// (saying that what did not happen) if it does not hold within Timeout.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Within(Timeout, Every, cond) {
		t.Fatalf("%s: not within %v", what, Timeout)
	}
}

// Within reports whether cond holds within limit, checking it every
// period: a condition that runs programs (a container's systemctl) is
// checked less often, so that the checks do not slow what they wait for.
func Within(limit, period time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); ; time.Sleep(period) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
