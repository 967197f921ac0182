package sandbox_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
)

// TestMain lets the test binary stand in for the tether binary: run as
// "sandbox-bridge" it is the bridge, with the test agents below besides the
// built-in ones; run as "echo-server" it is the benchmarks' baseline.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "sandbox-bridge":
			os.Exit(testBridge())
		case "echo-server":
			os.Exit(echoServer(os.Args[2]))
		}
	}
	os.Exit(m.Run())
}

func testBridge() int {
	cfg, err := sandbox.BridgeConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.Agents = sandbox.DefaultAgents()
	for name, q := range testAgents {
		cfg.Agents[name] = func(sandbox.AgentOptions) (agent.Agent, error) { return funcAgent(q), nil }
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := sandbox.RunBridge(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// testAgents misbehave on purpose.
var testAgents = map[string]func(ctx context.Context, prompt string, host agent.Host) error{
	// crash panics, which ends the bridge process with status 2.
	"crash": func(context.Context, string, agent.Host) error { panic("test agent crashes") },
	// hog allocates and touches memory until the OOM killer ends it.
	"hog": func(ctx context.Context, _ string, host agent.Host) error {
		host.Emit(json.RawMessage(`{"type":"system","subtype":"init","session_id":"hog"}`))
		var keep [][]byte
		for ctx.Err() == nil {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		return ctx.Err()
	},
	// hang stops the whole bridge process, as a deadlock would.
	"hang": func(ctx context.Context, _ string, _ agent.Host) error {
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		<-ctx.Done()
		return ctx.Err()
	},
}

type funcAgent func(ctx context.Context, prompt string, host agent.Host) error

func (f funcAgent) Query(ctx context.Context, prompt string, host agent.Host) error {
	return f(ctx, prompt, host)
}
func (f funcAgent) SessionID() string { return "" }
func (f funcAgent) Close() error      { return nil }

// echoServer accepts one connection on path and writes every line back.
func echoServer(path string) int {
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("listening")
	conn, err := ln.Accept()
	if err != nil {
		return 1
	}
	ln.Close()
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return 0
		}
		if _, err := conn.Write(line); err != nil {
			return 0
		}
	}
}
