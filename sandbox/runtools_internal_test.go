package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetherdev/tether/sandbox/agent"
)

// TestRunCallTooLongIsNotSent: a message over agent.MaxRunContent is
// refused in the sandbox, before it would travel (and not fit the
// socket's line); one within it goes to the daemon.
func TestRunCallTooLongIsNotSent(t *testing.T) {
	t.Parallel()
	r := &runCalls{waiting: map[string]chan BridgeCommand{}}
	long := agent.RunCall{Tool: agent.ToolSend, To: "reviewer", Type: "chat", Content: strings.Repeat("x", agent.MaxRunContent+1)}
	if _, err := r.Call(context.Background(), long); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Fatalf("a message too long: %v", err)
	}
	long.Content = long.Content[1:]
	if _, err := r.Call(context.Background(), long); !errors.Is(err, errNoDaemon) {
		t.Fatalf("a message of the most it may carry: %v, want it sent (no daemon here)", err)
	}
}
