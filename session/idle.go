package session

import (
	"sync"
	"time"
)

// idleTimer calls fire once a session has been idle for d: arm starts (or
// restarts) the countdown when a turn ends, disarm stops it when the
// sandbox is gone. A zero d never fires.
type idleTimer struct {
	d    time.Duration
	fire func()

	mu sync.Mutex
	t  *time.Timer
}

func (it *idleTimer) arm() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.d <= 0 {
		return
	}
	if it.t != nil {
		it.t.Stop()
	}
	it.t = time.AfterFunc(it.d, it.fire)
}

func (it *idleTimer) disarm() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.t != nil {
		it.t.Stop()
		it.t = nil
	}
}

// soon makes the countdown d from now on, and starts it.
func (it *idleTimer) soon(d time.Duration) {
	it.mu.Lock()
	it.d = d
	it.mu.Unlock()
	it.arm()
}
