package eventually

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestWithin(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	if !Within(time.Second, Every, func() bool { return n.Add(1) == 3 }) || n.Load() != 3 {
		t.Fatalf("a condition that holds at its third check: checked %d times", n.Load())
	}
	start := time.Now()
	if Within(50*time.Millisecond, Every, func() bool { return false }) {
		t.Fatal("a condition that never holds held")
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the limit", waited)
	}
}
