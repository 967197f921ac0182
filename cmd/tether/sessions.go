package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/tetherdev/tether/gitops"
	"github.com/tetherdev/tether/history"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
)

// newSessions builds the session manager: each session's sandbox re-runs
// this binary as `tether sandbox-bridge`, hides the data directory, gets
// the configured limits, and sees only the allow-listed part of env.
func newSessions(ctx context.Context, cfg *config, env []string, st *store.Store, evlog *session.EventLog, runTools session.RunTools, phones func() int, caps sandbox.Capabilities, logger *slog.Logger) (*session.Manager, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if n, err := sandbox.RemoveStaleCgroups(caps); err != nil {
		logger.Warn("removing cgroups left by an earlier daemon", "err", err)
	} else if n > 0 {
		logger.Info("removed cgroups left by an earlier daemon", "count", n)
	}
	for name, l := range map[string]sandbox.Layer{"bubblewrap": caps.Bwrap, "seccomp": caps.Seccomp, "cgroups": caps.Cgroup} {
		if !l.Available {
			logger.Warn("sandbox layer unavailable: sessions run without it", "layer", name, "why", l.Detail)
		}
	}
	args := []string{"sandbox-bridge"}
	agentNames := []string{"demo"}
	var readOnly []string
	if bin := findClaude(cfg.ClaudeBin); bin != "" {
		// The CLI may live where the sandbox hides (under /tmp, say): its
		// real directory is bound in read-only.
		if real, err := filepath.EvalSymlinks(bin); err == nil {
			bin = real
		}
		args = append(args, "--claude-bin", bin)
		readOnly = append(readOnly, filepath.Dir(bin))
		agentNames = append(agentNames, "claude-code")
	} else {
		logger.Info("the claude CLI was not found: the claude-code agent is not offered (--claude-bin)")
	}
	if bin := findCodex(cfg.CodexBin); bin != "" {
		args = append(args, "--codex-bin", bin)
		readOnly = append(readOnly, codexDirs(bin)...)
		agentNames = append(agentNames, "codex")
	} else {
		logger.Info("the codex CLI was not found: the codex agent is not offered (--codex-bin)")
	}
	if len(agentNames) == 1 {
		logger.Warn("no coding agent's CLI found: only the built-in demo agent is offered; install Claude Code (claude) or Codex (codex), or name them with --claude-bin or --codex-bin")
	}
	return session.NewManager(ctx, session.Config{
		Store:   st,
		Events:  evlog,
		Logger:  logger,
		Roots:   cfg.Roots,
		DataDir: cfg.DataDir,
		Home:    homeDir(envMap(env)),
		// Terminal sessions' transcripts are followed under these.
		ClaudeDirs: claudeDirs(envMap(env)),
		Agents:     agentNames,
		Spawner:    session.Sandboxes,
		Sandbox: sandbox.Spec{
			Executable: exe,
			Args:       args,
			// Stable across restarts: a new daemon finds and adopts the
			// sandboxes the last one left running.
			SocketDir:    sandbox.SocketDirFor(cfg.DataDir),
			Hide:         []string{cfg.DataDir},
			ReadOnly:     readOnly,
			Limits:       sandbox.Limits{MemoryBytes: cfg.MemoryMB << 20, Pids: cfg.Pids, CPUs: cfg.CPUs},
			Capabilities: &caps,
			Env:          env,
			Logger:       logger,
		},
		StateDir:    filepath.Join(cfg.DataDir, "sessions"),
		MaxSessions: cfg.MaxSessions,
		IdleTimeout: cfg.IdleTimeout,
		Egress: map[string][]string{
			"claude-code": claudeEgress(envMap(env), cfg.AllowHosts),
			"codex":       codexEgress(envMap(env), cfg.AllowHosts),
		},
		ApprovalTimeout:  cfg.ApprovalTimeout,
		AllowBypass:      cfg.AllowBypassPermissions,
		KeepRunningTurns: cfg.KeepRunningTurns,
		Phones:           phones,
		Runs:             runTools,
		Branch: func(dir string) string {
			b, _ := gitops.Branch(dir)
			return b
		},
	})
}

// pruneLog keeps the event log within its retention, hourly.
func pruneLog(ctx context.Context, st *store.Store, cfg *config, logger *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		p, err := st.Prune(ctx, store.Retention{MaxEvents: cfg.LogMaxEvents, MaxBytes: cfg.LogMaxBytes, MaxAge: cfg.LogMaxAge}, time.Now())
		if err != nil && !errors.Is(err, context.Canceled) {
			logger.Warn("pruning the event log", "err", err)
		} else if p.Total() > 0 {
			logger.Info("pruned the event log", "events", p.Events, "sessions", p.Sessions, "approvals", p.Approvals, "client_messages", p.ClientMessages)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func homeDir(env map[string]string) string {
	if h := env["HOME"]; h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// claudeDirs are Claude Code's configuration directories: ~/.claude, and
// $CLAUDE_CONFIG_DIR when set.
func claudeDirs(env map[string]string) []string {
	dirs := []string{filepath.Join(homeDir(env), ".claude")}
	if d := env["CLAUDE_CONFIG_DIR"]; d != "" && filepath.IsAbs(d) {
		dirs = append(dirs, d)
	}
	return dirs
}

// codexHomes are Codex's home directories: ~/.codex, and $CODEX_HOME
// when set.
func codexHomes(env map[string]string) []string {
	dirs := []string{filepath.Join(homeDir(env), ".codex")}
	if d := env["CODEX_HOME"]; d != "" && filepath.IsAbs(d) && filepath.Clean(d) != dirs[0] {
		dirs = append(dirs, d)
	}
	return dirs
}

// indexHistory builds the session history and keeps it current until ctx
// ends.
func indexHistory(ctx context.Context, h *history.Index, logger *slog.Logger) {
	start := time.Now()
	go func() {
		select {
		case <-h.Ready():
			logger.Info("session history indexed", "files", h.Len(), "took", time.Since(start).Round(time.Millisecond))
		case <-ctx.Done():
		}
	}()
	if err := h.Run(ctx); err != nil && ctx.Err() == nil {
		logger.Warn("session history", "err", err)
	}
}

// codexEgress is what the codex agent's sandbox may reach: its API
// endpoint (OPENAI_BASE_URL's host and port when an API key is set, see
// codexConfig; else the OpenAI API and the hosts of a ChatGPT login), and
// the hosts the user allowed.
func codexEgress(env map[string]string, allow []string) []string {
	out := []string{"api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"}
	if env["OPENAI_API_KEY"] != "" {
		out = []string{"api.openai.com:443"}
		if hp := hostPort(env["OPENAI_BASE_URL"]); hp != "" {
			out = []string{hp}
		}
	}
	return append(out, allow...)
}

// hostPort is the host:port a base URL names, the scheme's port when it
// names none; "" when it names no host.
func hostPort(base string) string {
	u, err := url.Parse(base)
	if base == "" || err != nil || u.Host == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80"}[u.Scheme]
	}
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// claudeEgress is what the claude-code agent's sandbox may reach: its API
// endpoint (ANTHROPIC_BASE_URL's host and port, which may be a local proxy
// or, in tests, a loopback mock; else the Anthropic API and the hosts that
// refresh a subscription's login), and the hosts the user allowed.
func claudeEgress(env map[string]string, allow []string) []string {
	out := []string{"api.anthropic.com:443", "platform.claude.com:443", "console.anthropic.com:443"}
	if hp := hostPort(env["ANTHROPIC_BASE_URL"]); hp != "" {
		out = []string{hp}
	}
	return append(out, allow...)
}
