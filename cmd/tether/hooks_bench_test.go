package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/hooks"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

// BenchmarkHookApproval measures the daemon's share of an approval asked
// through a Claude Code hook, over a kept-alive TLS connection as Claude
// Code's http hooks use and a phone on wss: the hook's POST sent to the
// phone's approval_required read ("ask"), and the phone's
// approval_response sent to the hook's HTTP answer read ("answer").
func BenchmarkHookApproval(b *testing.B) {
	d := newDaemon(b)
	c, _ := d.phone(nil)
	token, err := hooks.ReadToken(dataDirOf(d.env))
	if err != nil {
		b.Fatal(err)
	}
	url := hookClientConfig(d.info).URL
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: wstest.PinnedDialer(d.info.Fingerprint).TLSClientConfig}}
	const sid = "bench-hooks"
	ask := make([]time.Duration, 0, b.N)
	answer := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		body := hookBody(sid, hooks.EventPreToolUse, d.project, map[string]any{
			"tool_name": "Bash", "tool_input": map[string]any{"command": fmt.Sprintf("rm -rf build/%d", i)}, "tool_use_id": fmt.Sprintf("toolu_%d", i)})
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		type result struct {
			at   time.Time
			body string
			err  error
		}
		res := make(chan result, 1)
		start := time.Now()
		go func() {
			resp, err := client.Do(req)
			if err != nil {
				res <- result{err: err}
				return
			}
			out, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			res <- result{time.Now(), string(out), err}
		}()
		var ar wire.ApprovalRequired
		c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
		ask = append(ask, time.Since(start))
		sent := time.Now()
		c.Send(wire.TypeApprovalResponse, "", map[string]any{"session_id": sid, "tool_call_id": ar.ToolCallID, "decision": "approved"})
		r := <-res
		if r.err != nil || !strings.Contains(r.body, `"allow"`) {
			b.Fatalf("hook answer %q: %v", r.body, r.err)
		}
		answer = append(answer, r.at.Sub(sent))
		c.Seen = c.Seen[:0]
	}
	b.StopTimer()
	percentiles(b, "ask", ask)
	percentiles(b, "answer", answer)
}
