// Package archtest holds the test that keeps the package boundaries of
// docs/ARCHITECTURE.md: which project packages each package may import.
package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"path"
	"strings"
	"testing"
)

const module = "github.com/tetherdev/tether"

// allowed lists, for every package but the commands, the project packages
// it may import; a pattern ending in /... also allows its subpackages.
// Keep it in step with docs/ARCHITECTURE.md.
var allowed = map[string][]string{
	"bridge":                 {"wire", "fileops", "gitops", "history", "pairing", "runs", "session", "store"},
	"certs":                  nil,
	"control":                nil,
	"fileops":                nil,
	"gitops":                 nil,
	"history":                {"wire", "session", "store"},
	"hooks":                  nil,
	"internal/anthropicmock": nil,
	"internal/pushtest":      nil,
	"internal/archtest":      nil,
	"internal/netnstest":     nil,
	"internal/openaimock":    nil,
	"internal/recursor":      nil,
	"internal/wstest":        {"wire"},
	"notify":                 {"wire", "session", "store"},
	"pairing":                {"store", "tailnet"},
	"runs":                   {"wire", "sandbox/agent", "session", "store"},
	"sandbox":                {"sandbox/..."},
	"sandbox/agent":          nil,
	"sandbox/claude":         {"sandbox/agent"},
	"sandbox/codex":          {"sandbox/agent"},
	"sandbox/demo":           {"sandbox/agent"},
	"sandbox/egress":         nil,
	"sandbox/runmcp":         {"sandbox/agent"},
	"session":                {"wire", "hooks", "sandbox/...", "store"},
	"store":                  nil,
	"tailnet":                nil,
	"terminal":               {"wire", "sandbox/...", "session"},
	"web":                    nil,
	"wire":                   nil,
}

type pkg struct {
	ImportPath string
	Imports    []string
}

func TestPackageBoundaries(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if strings.HasPrefix(rel, "cmd/") {
			continue // commands wire everything together
		}
		rules, ok := allowed[rel]
		if !ok {
			t.Errorf("package %s is not in the dependency table: add it here and to docs/ARCHITECTURE.md", rel)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if !permitted(rules, dep) {
				t.Errorf("%s imports %s, which docs/ARCHITECTURE.md does not allow", rel, dep)
			}
		}
	}
	if seen < 5 {
		t.Fatalf("go list found only %d packages", seen)
	}
}

func permitted(rules []string, dep string) bool {
	for _, r := range rules {
		if r == dep {
			return true
		}
		if base, ok := strings.CutSuffix(r, "/..."); ok && (dep == base || strings.HasPrefix(dep, base+"/")) {
			return true
		}
	}
	return false
}

func TestPermitted(t *testing.T) {
	if !permitted([]string{"sandbox/..."}, "sandbox/demo") || permitted([]string{"sandbox/..."}, "sandboxes") ||
		permitted(nil, "bridge") || !permitted([]string{"store"}, "store") || permitted([]string{"store"}, path.Join("store", "x")) {
		t.Fatal("permitted() is wrong")
	}
}
