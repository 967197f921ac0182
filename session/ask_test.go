package session

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
)

// TestAskDeniesAHugeInputItself: a permission request whose input passes
// what a phone can be shown is denied by the daemon, even when the bridge
// beside the agent let it through; no question is opened.
func TestAskDeniesAHugeInputItself(t *testing.T) {
	t.Parallel()
	m := &Manager{approvals: map[approvalKey]*approval{}, rules: map[string][]Rule{}}
	s := &sess{m: m, rec: store.Session{ID: "s", Policy: PolicyAsk, WorkingDirectory: "/w"}}
	big, _ := json.Marshal(map[string]string{"file_path": "/w/a", "content": strings.Repeat("x", sandbox.MaxMessage)})
	m.ask(s, agent.PermissionRequest{RequestID: "r", ToolUseID: "t", ToolName: "Write", Input: big})
	if len(m.approvals) != 0 {
		t.Fatalf("a question was opened for %d bytes of input", len(big))
	}
}
