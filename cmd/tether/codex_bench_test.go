package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tetherdev/tether/internal/openaimock"
	"github.com/tetherdev/tether/wire"
)

// BenchmarkCodexLatency measures, in the same run and interleaved, a codex
// session through tether and the Codex CLI alone against the same mock:
//
//   - tether-ready: session_start to session_ready (the sandbox; the CLI
//     starts with the first message);
//   - tether-first-token: the first message to its first stream_chunk
//     (the CLI's start, its thread's start, the turn);
//   - cli-ready: spawning `codex app-server` to thread/start's answer;
//   - cli-first-token: spawning it to the turn's first text delta.
func BenchmarkCodexLatency(b *testing.B) {
	api := openaimock.New(b, func(*openaimock.Request) openaimock.Reply {
		return openaimock.Reply{Items: []openaimock.Item{openaimock.Text("Hello from the mock.")}}
	})
	d := codexDaemon(b, api)
	c, _ := d.phone(nil)
	bin := openaimock.CodexBin(b)
	var tReady, tFirst, cReady, cFirst []time.Duration
	for i := range b.N {
		id := fmt.Sprintf("bench-%d", i)
		start := time.Now()
		codexSession(b, d, c, id, "ask")
		c.WaitFor(wire.TypeSessionReady, nil, forSession(id))
		tReady = append(tReady, time.Since(start))
		start = time.Now()
		c.Send(wire.TypeMessage, "m-"+id, map[string]any{"session_id": id, "content": "hi"})
		c.WaitFor(wire.TypeStreamChunk, nil, forSession(id))
		tFirst = append(tFirst, time.Since(start))
		c.WaitFor(wire.TypeTurnComplete, nil, forSession(id))
		c.Send(wire.TypeSessionEnd, "", map[string]any{"session_id": id})
		c.WaitFor(wire.TypeSessionEnd, nil, forSession(id))
		c.Seen = nil

		r, f := codexAlone(b, bin, api, d.project)
		cReady, cFirst = append(cReady, r), append(cFirst, f)
	}
	percentiles(b, "tether-ready", tReady)
	percentiles(b, "tether-first-token", tFirst)
	percentiles(b, "cli-ready", cReady)
	percentiles(b, "cli-first-token", cFirst)
}

// codexAlone runs one turn of the bare CLI in dir and returns the time
// from its spawn to its thread's start and to the first text delta.
func codexAlone(b *testing.B, bin string, api *openaimock.Server, dir string) (ready, first time.Duration) {
	home := filepath.Join(b.TempDir(), ".codex")
	os.MkdirAll(home, 0o700)
	args := []string{"app-server"}
	for _, kv := range api.CodexConfig("MOCK_API_KEY") {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"CODEX_HOME=" + home, "HOME=" + filepath.Dir(home), "PATH=" + os.Getenv("PATH"), "MOCK_API_KEY=k"}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	sc := bufio.NewScanner(out)
	sc.Buffer(nil, 16<<20)
	send := func(s string) { fmt.Fprintln(in, s) }
	var msg struct {
		ID     *int            `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
	}
	next := func(until func() bool) {
		for sc.Scan() {
			msg.ID, msg.Method, msg.Result = nil, "", nil
			json.Unmarshal(sc.Bytes(), &msg)
			if until() {
				return
			}
		}
		b.Fatalf("codex app-server ended: %v", sc.Err())
	}
	isID := func(n int) func() bool {
		return func() bool { return msg.ID != nil && *msg.ID == n && msg.Method == "" }
	}
	send(`{"id":1,"method":"initialize","params":{"clientInfo":{"name":"bench","title":"bench","version":"1"}}}`)
	next(isID(1))
	send(`{"method":"initialized"}`)
	send(`{"id":2,"method":"thread/start","params":{"cwd":` + jsonString(dir) + `,"approvalPolicy":"untrusted","sandbox":"danger-full-access"}}`)
	next(isID(2))
	ready = time.Since(start)
	var r struct {
		Thread struct{ ID string } `json:"thread"`
	}
	json.Unmarshal(msg.Result, &r)
	send(`{"id":3,"method":"turn/start","params":{"threadId":` + jsonString(r.Thread.ID) + `,"input":[{"type":"text","text":"hi"}]}}`)
	next(func() bool { return msg.Method == "item/agentMessage/delta" })
	first = time.Since(start)
	next(func() bool { return msg.Method == "turn/completed" })
	return ready, first
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
