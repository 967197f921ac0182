package runs

import (
	"fmt"
	"testing"

	"github.com/tetherdev/tether/sandbox/agent"
)

// BenchmarkSend is the runner's own throughput: an agent's send_to_agent
// as the daemon takes it (validated, stored once with its id checked,
// logged for the phones), one after another into one run. Messages/s is
// 1e9 / ns/op.
func BenchmarkSend(b *testing.B) {
	r, _ := newRunner(b)
	i := 0
	for b.Loop() {
		i++
		if _, err := r.Call(b.Context(), "s_impl", agent.RunCall{Tool: agent.ToolSend, To: "reviewer", Type: TypeChat,
			Content: fmt.Sprintf("Round 1: message %d", i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendDuplicate is a retry of a message the run holds: found by
// its id and answered as a duplicate.
func BenchmarkSendDuplicate(b *testing.B) {
	r, _ := newRunner(b)
	call := agent.RunCall{Tool: agent.ToolSend, To: "reviewer", Type: TypeChat, Content: "Round 1: again"}
	if _, err := r.Call(b.Context(), "s_impl", call); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := r.Call(b.Context(), "s_impl", call); err != nil {
			b.Fatal(err)
		}
	}
}
