package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/sandbox/claude"
	"github.com/tetherdev/tether/sandbox/codex"
)

// sandboxBridgeCmd is `tether sandbox-bridge`, the process the daemon runs
// inside each session's sandbox. Its configuration comes from the
// TETHER_SANDBOX_* environment the daemon sets; --claude-bin and
// --codex-bin name the CLIs of the claude-code and codex agents.
func sandboxBridgeCmd(ctx context.Context, args, _ []string, _, stderr io.Writer) int {
	fs := flag.NewFlagSet("tether sandbox-bridge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	claudeBin := fs.String("claude-bin", "", "the claude CLI, for the claude-code agent")
	codexBin := fs.String("codex-bin", "", "the codex CLI, for the codex agent")
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
	cfg.Agents = agents(*claudeBin, *codexBin, logger)
	if err := sandbox.RunBridge(ctx, cfg); err != nil {
		fmt.Fprintln(stderr, "tether sandbox-bridge:", err)
		return 1
	}
	return 0
}

// agents are the agent adapters a sandbox bridge can run: the built-in
// demo, and claude-code and codex when their CLIs are known. The CLIs run
// with the bridge's environment: HOME is the user's home, where the
// sandbox shows the user's own Claude Code or Codex setup (see
// sandbox.Spawn).
func agents(claudeBin, codexBin string, logger *slog.Logger) map[string]sandbox.AgentFactory {
	a := sandbox.DefaultAgents()
	if claudeBin != "" {
		a["claude-code"] = func(o sandbox.AgentOptions) (agent.Agent, error) {
			opts, err := sandbox.ClaudeOptions(claudeBin, o)
			if err != nil {
				return nil, err
			}
			opts.Env, opts.Logger = os.Environ(), logger
			return claude.New(opts)
		}
	}
	if codexBin != "" {
		a["codex"] = func(o sandbox.AgentOptions) (agent.Agent, error) {
			env := os.Environ()
			home := envMap(env)["HOME"]
			opts := sandbox.CodexOptions(codexBin, o)
			opts.Logger, opts.Env, opts.Config = logger, append(env, "CODEX_HOME="+filepath.Join(home, ".codex")), codexConfig(envMap(env))
			return codex.New(opts)
		}
	}
	return a
}

// codexConfig are the Codex CLI's configuration overrides for env: with
// OPENAI_API_KEY, a model provider of tether's that sends it to
// OPENAI_BASE_URL (the OpenAI API by default) over the Responses API,
// since Codex's built-in provider reads no key from the environment and
// ignores OPENAI_BASE_URL (docs/codex-observed.md). Without a key, Codex's
// own login (~/.codex/auth.json) and configuration decide.
func codexConfig(env map[string]string) []string {
	if env["OPENAI_API_KEY"] == "" {
		return nil
	}
	base := env["OPENAI_BASE_URL"]
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	return []string{
		`model_provider="tether"`,
		`model_providers.tether.name="OpenAI (OPENAI_API_KEY)"`,
		`model_providers.tether.base_url=` + strconv.Quote(base),
		`model_providers.tether.env_key="OPENAI_API_KEY"`,
		`model_providers.tether.wire_api="responses"`,
	}
}

// findCodex returns the codex CLI to use: the flag's, else the one on
// PATH, else "" (the codex agent is then not offered). The npm package's
// Node launcher is replaced by the native binary it runs, which the
// sandbox can run without Node and without the rest of node_modules.
func findCodex(flagValue string) string {
	bin := flagValue
	if bin == "" {
		p, err := exec.LookPath("codex")
		if err != nil {
			return ""
		}
		bin = p
	}
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return bin
	}
	if filepath.Ext(real) != ".js" {
		return real
	}
	pkg := filepath.Dir(filepath.Dir(real))
	for _, pattern := range []string{
		filepath.Join(pkg, "node_modules", "@openai", "codex-*", "vendor", "*", "bin", "codex"),
		filepath.Join(filepath.Dir(pkg), "codex-*", "vendor", "*", "bin", "codex"),
	} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0]
		}
	}
	return bin
}

// codexDirs are the directories the sandbox binds read-only for the codex
// binary: its own, and for the npm package's layout
// (vendor/TARGET/bin/codex) the target's, which holds the tools it runs
// (rg).
func codexDirs(bin string) []string {
	dir := filepath.Dir(bin)
	if target := filepath.Dir(dir); filepath.Base(filepath.Dir(target)) == "vendor" {
		return []string{target}
	}
	return []string{dir}
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
