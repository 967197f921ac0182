package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/sandbox/claude"
)

// sandboxBridgeCmd is `tether sandbox-bridge`, the process the daemon runs
// inside each session's sandbox. Its configuration comes from the
// TETHER_SANDBOX_* environment the daemon sets; --claude-bin names the
// claude CLI for the claude-code agent.
func sandboxBridgeCmd(ctx context.Context, args, _ []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("tether sandbox-bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	claudeBin := fs.String("claude-bin", "", "the claude CLI, for the claude-code agent")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := sandbox.BridgeConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(stderr, "tether sandbox-bridge:", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Logger = logger
	cfg.Agents = agents(*claudeBin, logger)
	if err := sandbox.RunBridge(ctx, cfg); err != nil {
		fmt.Fprintln(stderr, "tether sandbox-bridge:", err)
		return 1
	}
	return 0
}

// agents are the agent adapters a sandbox bridge can run: the built-in
// demo, and claude-code when the claude CLI is known. The CLI runs with the
// bridge's environment: HOME is the user's home, where the sandbox shows
// the user's own Claude Code setup (see sandbox.Spawn).
func agents(claudeBin string, logger *slog.Logger) map[string]sandbox.AgentFactory {
	a := sandbox.DefaultAgents()
	if claudeBin != "" {
		a["claude-code"] = func(o sandbox.AgentOptions) (agent.Agent, error) {
			return claude.New(claude.Options{Bin: claudeBin, WorkDir: o.WorkDir, ResumeID: o.SessionID, Settings: o.Settings, Env: os.Environ(), Logger: logger})
		}
	}
	return a
}

// findClaude returns the claude CLI to use: the flag's, else the one on
// PATH, else "" (the claude-code agent is then not offered).
func findClaude(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	p, err := exec.LookPath("claude")
	if err != nil {
		return ""
	}
	return p
}
