package session

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
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
var destructive = regexp.MustCompile(`\brm\s+-[a-zA-Z]*[rf]|\bgit\s+push\b.*(--force|-f\b)|\bgit\s+reset\s+--hard|\b(curl|wget)\b.*\|\s*(ba|z)?sh\b|\bmkfs|\bdd\s+if=|\bchmod\s+-R|\bsudo\b`)

// Risk classifies a tool call:
//   - low: reads and searches through the agent's own tools inside the
//     working directory (outside it: medium; of secrets, such as ~/.ssh,
//     cloud credentials, .env files or private keys: high);
//   - medium: edits inside the working directory, and shell commands that
//     only read (ls, cat, git status, …) and name no secret (cat
//     ~/.ssh/id_ed25519 is high);
//   - high: every other shell command, writes outside the working
//     directory, network tools, and anything destructive (rm -rf,
//     git push --force, curl … | sh, …).
func Risk(tool string, params json.RawMessage, workDir string) string {
	var p struct {
		Command      string `json:"command"`
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
		Path         string `json:"path"`
	}
	if json.Unmarshal(params, &p) != nil || !bytes.HasPrefix(bytes.TrimSpace(params), []byte("{")) {
		// Parameters that are not an object of the tool's fields (the
		// agent's, which are untrusted; null decodes into nothing) name
		// nothing this could judge low.
		return RiskHigh
	}
	switch {
	case readTools[tool]:
		target := firstNonEmpty(p.FilePath, p.NotebookPath, p.Path)
		switch {
		case secretPath(target, workDir):
			return RiskHigh
		case target != "" && !inside(target, workDir):
			return RiskMedium
		}
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
		a := analyzeShell(p.Command)
		switch {
		case !readOnlyShell(a, p.Command):
			return RiskHigh
		case namesSecret(a, workDir):
			return RiskHigh
		}
		return RiskMedium
	default:
		return RiskHigh
	}
}

// secretNames are path elements that hold credentials.
var secretNames = []string{".ssh", ".aws", ".gnupg", ".azure", ".kube", ".docker", ".netrc", ".git-credentials",
	".npmrc", ".pypirc", ".pgpass", ".password-store", "credentials", "credentials.json", ".credentials.json", "gcloud",
	"keychain", "Keychains", ".vault-token", ".env"}

// secretPath reports whether path names credentials: a secret directory
// or file anywhere in it, a .env file, a private key.
func secretPath(path, workDir string) bool {
	if path == "" {
		return false
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(workDir, path)
	}
	for _, el := range strings.Split(filepath.Clean(path), string(filepath.Separator)) {
		if slices.Contains(secretNames, el) || strings.HasPrefix(el, ".env.") || strings.HasPrefix(el, "id_rsa") ||
			strings.HasPrefix(el, "id_ed25519") || strings.HasPrefix(el, "id_ecdsa") || strings.HasSuffix(el, ".pem") || strings.HasSuffix(el, ".key") {
			return true
		}
	}
	return false
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
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

// namesSecret reports whether an argument of a command names credentials
// (cat ~/.ssh/id_ed25519, grep KEY .env): a reader remembered for the
// project's files must not cover them.
func namesSecret(a shellAnalysis, workDir string) bool {
	for _, c := range a.calls {
		for _, w := range c.words[min(1, len(c.words)):] {
			if secretPath(w, workDir) {
				return true
			}
		}
	}
	return false
}

// readOnlyShell reports whether every command of a pipeline or list (a,
// the analysis of cmd) only reads: known readers with literal arguments,
// no redirection into a file, no substitution (the shell parser decides,
// not characters).
func readOnlyShell(a shellAnalysis, cmd string) bool {
	if !a.parsed || a.redirects || len(a.calls) == 0 || destructive.MatchString(cmd) {
		return false
	}
	for _, c := range a.calls {
		if c.opaque || len(c.words) == 0 {
			return false
		}
		f := c.words
		switch {
		case f[0] == "git":
			if !gitReadOnly(f) {
				return false
			}
		case f[0] == "find":
			for _, w := range f[1:] {
				if strings.HasPrefix(w, "-exec") || strings.HasPrefix(w, "-ok") || w == "-delete" || strings.HasPrefix(w, "-fprint") || w == "-fls" {
					return false
				}
			}
		case !readOnlyCommands[f[0]]:
			return false
		}
	}
	return true
}

// gitReadOnly reports whether a git command line (its words) only reads: a
// reading subcommand, without the options that make it write (--output
// writes the log or diff to a file; git branch creates, deletes, renames,
// copies or sets upstreams with a name or one of those flags).
func gitReadOnly(f []string) bool {
	if len(f) < 2 || !readOnlyGit[f[1]] {
		return false
	}
	for _, w := range f[2:] {
		if strings.HasPrefix(w, "--output") {
			return false
		}
		if f[1] == "branch" && (!strings.HasPrefix(w, "-") || slices.Contains(branchWrites, w) || strings.HasPrefix(w, "--set-upstream")) {
			return false
		}
	}
	return true
}

// branchWrites are git branch's options that change branches.
var branchWrites = []string{"-d", "-D", "--delete", "-m", "-M", "--move", "-c", "-C", "--copy", "-u", "--unset-upstream", "-f", "--force", "--edit-description"}
