package sandbox

import (
	"slices"
	"strings"
)

// envAllowed are the variables of the daemon's environment that reach a
// sandbox by exact name; envAllowedPrefixes by prefix (the agents' API
// settings).
var (
	envAllowed         = []string{"PATH", "HOME", "LANG", "LC_ALL", "TERM"}
	envAllowedPrefixes = []string{"ANTHROPIC_", "CLAUDE_CODE_"}
)

// FilterEnv returns the entries of env ("NAME=value") that the allow-list
// lets into a sandbox: PATH, HOME, LANG, LC_ALL, TERM and every ANTHROPIC_…
// and CLAUDE_CODE_… variable. Everything else, TETHER_… included, stays out.
func FilterEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if ok && envAllowedName(name) {
			out = append(out, kv)
		}
	}
	return out
}

func envAllowedName(name string) bool {
	if slices.Contains(envAllowed, name) {
		return true
	}
	for _, p := range envAllowedPrefixes {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	return false
}
