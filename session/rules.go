package session

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/tetherdev/tether/wire"
)

// Rule approves, for the rest of a session, calls like one the user
// approved with "remember", and never one of higher risk (MaxRisk):
//   - a shell command: simple commands (one program, literal words, no
//     redirection into a file, no pipe or list) with the same prefix, the
//     program and, for tools like git, go or npm, its subcommand; shells
//     and interpreters (sh -c, python, node -e, eval, …) are never
//     remembered, nor compound commands;
//   - a file tool: the same tool on the same file (Path);
//   - any other tool: the same set of parameter names.
type Rule = wire.ApprovalRule

// subcommandTools are programs whose first argument names what they do.
var subcommandTools = []string{"git", "go", "npm", "pnpm", "yarn", "cargo", "pip", "uv", "gh"}

// riskRank orders risk levels.
var riskRank = map[string]int{RiskLow: 0, RiskMedium: 1, RiskHigh: 2}

// ruleFor is the rule remembering a call, or why there is none.
func ruleFor(tool string, params json.RawMessage, workDir, risk string) (Rule, string) {
	var p struct {
		Command      string `json:"command"`
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(params, &m) != nil || m == nil {
		return Rule{}, "parameters that are not a JSON object of the tool's fields are asked every time"
	}
	switch {
	case approvalKind(tool) != "":
		return Rule{}, "plans and questions are the user's to answer, every time"
	case tool == "Bash":
		a := analyzeShell(p.Command)
		if !a.simple {
			return Rule{}, "compound or non-literal shell commands are asked every time"
		}
		words := a.calls[0].words
		if isInterpreter(words[0]) {
			return Rule{}, words[0] + " runs whatever its arguments say: asked every time"
		}
		return Rule{Tool: tool, Prefix: commandPrefix(words), MaxRisk: risk}, ""
	case p.FilePath != "" || p.NotebookPath != "":
		file := p.FilePath
		if file == "" {
			file = p.NotebookPath
		}
		if !filepath.IsAbs(file) {
			file = filepath.Join(workDir, file)
		}
		return Rule{Tool: tool, Path: filepath.Clean(file), MaxRisk: risk}, ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return Rule{Tool: tool, Keys: keys, MaxRisk: risk}, ""
}

// rememberScope says, for an approval card, what "remember" would approve.
func rememberScope(tool string, params json.RawMessage, workDir, risk string) string {
	r, why := ruleFor(tool, params, workDir, risk)
	switch {
	case why != "":
		return "not remembered: " + why
	case r.Prefix != "":
		return fmt.Sprintf("%s commands starting with %q, at most %s risk, for this session", r.Tool, r.Prefix, r.MaxRisk)
	case r.Path != "":
		return fmt.Sprintf("%s of %s, at most %s risk, for this session", r.Tool, r.Path, r.MaxRisk)
	default:
		return fmt.Sprintf("%s with these parameters (%s), at most %s risk, for this session", r.Tool, strings.Join(r.Keys, ", "), r.MaxRisk)
	}
}

// commandPrefix is the program of a simple command and, for programs with
// subcommands, its subcommand.
func commandPrefix(words []string) string {
	if len(words) > 1 && slices.Contains(subcommandTools, words[0]) && !strings.HasPrefix(words[1], "-") {
		return words[0] + " " + words[1]
	}
	return words[0]
}

// covers reports whether rule r approves the call c (of risk risk).
func covers(r, c Rule, risk string) bool {
	return r.Tool == c.Tool && r.Prefix == c.Prefix && r.Path == c.Path && slices.Equal(r.Keys, c.Keys) &&
		riskRank[risk] <= riskRank[r.MaxRisk]
}

// remember adds the rule of an approved call for the session, when the
// call can have one.
func (m *Manager) remember(sessionID, tool string, params json.RawMessage, workDir, risk string) {
	r, why := ruleFor(tool, params, workDir, risk)
	if why != "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.rules[sessionID] {
		if covers(have, r, risk) {
			return
		}
	}
	m.rules[sessionID] = append(m.rules[sessionID], r)
}

// remembered reports whether a rule of the session approves this call.
func (m *Manager) remembered(sessionID, tool string, params json.RawMessage, workDir, risk string) bool {
	c, why := ruleFor(tool, params, workDir, risk)
	if why != "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.rules[sessionID] {
		if covers(have, c, risk) {
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
