package sandbox

import (
	"slices"
	"strings"
)

// envBase are the variables of the daemon's environment that reach every
// sandbox, by exact name.
var envBase = []string{"PATH", "HOME", "LANG", "LC_ALL", "TERM"}

// agentEnvPrefixes are, per agent, the prefixes of the variables that reach
// that agent's sandbox besides envBase: its own API settings and nothing of
// another agent's. An agent not listed gets envBase only.
var agentEnvPrefixes = map[string][]string{
	"claude-code": {"ANTHROPIC_", "CLAUDE_CODE_"},
	"codex":       {"OPENAI_", "CODEX_"},
}

// AgentEnv returns the entries of env ("NAME=value") that the allow-list
// lets into a sandbox of agent: PATH, HOME, LANG, LC_ALL and TERM for every
// agent, and the agent's own variables (claude-code: ANTHROPIC_… and
// CLAUDE_CODE_…; codex: OPENAI_… and CODEX_…). Everything else, TETHER_…
// included, stays out.
func AgentEnv(agent string, env []string) []string {
	prefixes := agentEnvPrefixes[agent]
	var out []string
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if ok && envAllowedName(name, prefixes) {
			out = append(out, kv)
		}
	}
	return out
}

func envAllowedName(name string, prefixes []string) bool {
	if slices.Contains(envBase, name) {
		return true
	}
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	return false
}

// envValue returns the value of name in env, the last one when repeated.
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if n, val, ok := strings.Cut(kv, "="); ok && n == name {
			v = val
		}
	}
	return v
}
