package session

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
)

// Risk levels of a tool call.
const (
	RiskLow    = "low"
	RiskMedium = "medium"
	RiskHigh   = "high"
)

// readTools only read or search, through the agent's own tools.
var readTools = map[string]bool{
	"Read": true, "Grep": true, "Glob": true, "LS": true, "NotebookRead": true, "TodoWrite": true, "TodoRead": true,
}

// editTools change files named by file_path (or notebook_path).
var editTools = map[string]bool{"Write": true, "Edit": true, "MultiEdit": true, "NotebookEdit": true}

// readOnlyCommands are shell commands that only read.
var readOnlyCommands = map[string]bool{
	"ls": true, "cat": true, "pwd": true, "head": true, "tail": true, "wc": true, "grep": true, "rg": true,
	"echo": true, "which": true, "whoami": true, "date": true, "file": true, "stat": true, "du": true, "df": true,
	"tree": true, "less": true, "more": true, "diff": true, "sort": true, "uniq": true, "cut": true, "true": true,
}

// readOnlyGit are git subcommands that only read.
var readOnlyGit = map[string]bool{"status": true, "diff": true, "log": true, "show": true, "branch": true, "rev-parse": true, "blame": true, "ls-files": true}

// destructive matches shell commands that destroy or reach out.
var destructive = regexp.MustCompile(`\brm\s+-[a-zA-Z]*[rf]|\bgit\s+push\b.*(--force|-f\b)|\bgit\s+reset\s+--hard|\b(curl|wget)\b.*\|\s*(ba|z)?sh\b|\bmkfs|\bdd\s+if=|>\s*/dev/|\bchmod\s+-R|\bsudo\b`)

// shellSeparators split a shell command into its simple commands.
var shellSeparators = regexp.MustCompile(`\|\||&&|[|;&\n]`)

// Risk classifies a tool call:
//   - low: reads and searches through the agent's own tools;
//   - medium: edits inside the working directory, and shell commands that
//     only read (ls, cat, git status, …);
//   - high: every other shell command, writes outside the working
//     directory, network tools, and anything destructive (rm -rf,
//     git push --force, curl … | sh, …).
func Risk(tool string, params json.RawMessage, workDir string) string {
	var p struct {
		Command      string `json:"command"`
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
	}
	json.Unmarshal(params, &p)
	switch {
	case readTools[tool]:
		return RiskLow
	case editTools[tool]:
		path := p.FilePath
		if path == "" {
			path = p.NotebookPath
		}
		if inside(path, workDir) {
			return RiskMedium
		}
		return RiskHigh
	case tool == "Bash":
		if readOnlyShell(p.Command) {
			return RiskMedium
		}
		return RiskHigh
	default:
		return RiskHigh
	}
}

func inside(path, dir string) bool {
	if path == "" || dir == "" {
		return false
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	rel, err := filepath.Rel(dir, filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// readOnlyShell reports whether every command of a pipeline or list only
// reads: no redirection into files, no substitution, only known readers.
func readOnlyShell(cmd string) bool {
	if strings.TrimSpace(cmd) == "" || destructive.MatchString(cmd) || strings.ContainsAny(cmd, ">`") || strings.Contains(cmd, "$(") {
		return false
	}
	for _, part := range shellSeparators.Split(cmd, -1) {
		f := strings.Fields(part)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "git":
			if len(f) < 2 || !readOnlyGit[f[1]] {
				return false
			}
		case f[0] == "find":
			if strings.Contains(part, "-exec") || strings.Contains(part, "-delete") {
				return false
			}
		case !readOnlyCommands[f[0]]:
			return false
		}
	}
	return true
}
