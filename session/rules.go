package session

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/tetherdev/tether/bridge/wire"
)

// Rule approves, for the rest of a session, calls of one tool with one
// shape of input: for Bash, commands with the same prefix (the program, and
// its subcommand for tools like git, go or npm); for other tools, the same
// set of parameter names.
type Rule = wire.ApprovalRule

// subcommandTools are programs whose first argument names what they do.
var subcommandTools = []string{"git", "go", "npm", "pnpm", "yarn", "cargo", "docker", "kubectl", "make", "pip", "uv", "bun", "deno", "gh"}

func ruleFor(tool string, params json.RawMessage) Rule {
	if tool == "Bash" {
		var p struct {
			Command string `json:"command"`
		}
		json.Unmarshal(params, &p)
		return Rule{Tool: tool, Prefix: commandPrefix(p.Command)}
	}
	var m map[string]json.RawMessage
	json.Unmarshal(params, &m)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return Rule{Tool: tool, Keys: keys}
}

// commandPrefix is the program of a shell command and, for programs with
// subcommands, its subcommand.
func commandPrefix(cmd string) string {
	f := strings.Fields(cmd)
	switch {
	case len(f) == 0:
		return ""
	case len(f) > 1 && slices.Contains(subcommandTools, f[0]) && !strings.HasPrefix(f[1], "-"):
		return f[0] + " " + f[1]
	default:
		return f[0]
	}
}

func sameRule(r, o Rule) bool {
	return r.Tool == o.Tool && r.Prefix == o.Prefix && slices.Equal(r.Keys, o.Keys)
}

// remember adds a rule for the session, unless it is there already. A
// compound shell command (pipes, lists, substitutions) is never remembered:
// its prefix would say little about what runs.
func (m *Manager) remember(sessionID, tool string, params json.RawMessage) {
	r := ruleFor(tool, params)
	if tool == "Bash" && (r.Prefix == "" || !readOnlyShellPrefixSafe(params)) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.rules[sessionID] {
		if sameRule(have, r) {
			return
		}
	}
	m.rules[sessionID] = append(m.rules[sessionID], r)
}

func readOnlyShellPrefixSafe(params json.RawMessage) bool {
	var p struct {
		Command string `json:"command"`
	}
	json.Unmarshal(params, &p)
	return !strings.ContainsAny(p.Command, "|;&`$><\n")
}

// remembered reports whether a rule of the session approves this call. A
// compound shell command never matches.
func (m *Manager) remembered(sessionID, tool string, params json.RawMessage) bool {
	if tool == "Bash" && !readOnlyShellPrefixSafe(params) {
		return false
	}
	r := ruleFor(tool, params)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.rules[sessionID] {
		if sameRule(have, r) {
			return true
		}
	}
	return false
}

// Rules lists a session's remembered rules.
func (m *Manager) Rules(sessionID string) []Rule {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Rule{}, m.rules[sessionID]...)
}

// ClearRules forgets a session's remembered rules.
func (m *Manager) ClearRules(sessionID string) {
	m.mu.Lock()
	delete(m.rules, sessionID)
	m.mu.Unlock()
}
