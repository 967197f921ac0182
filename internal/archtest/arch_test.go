// Package archtest holds the test that keeps the package boundaries of
// docs/ARCHITECTURE.md: which project packages each package may import. It
// reads them from the document's package table, so that the document and
// the code cannot drift apart.
package archtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tetherdev/tether"

// doc is the document whose package table is the rule, from this
// package's directory.
var doc = filepath.Join("..", "..", "docs", "ARCHITECTURE.md")

// rule is one package's row: the project packages it may import; a
// pattern ending in /... also allows its subpackages.
type rule struct {
	everything bool
	allowed    []string
}

var quoted = regexp.MustCompile("`([^`]+)`")

// parseTable reads the package table of the document: the markdown table
// whose header starts with "| package |". Its first column names packages
// (in backquotes, one or more a row), its last what they may import: the
// packages in backquotes, or "nothing" or "everything" (either followed by
// any comment).
func parseTable(r io.Reader) (map[string]rule, error) {
	rules := map[string]rule{}
	in := false
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !in {
			in = strings.HasPrefix(line, "| package |")
			continue
		}
		if strings.HasPrefix(line, "|---") || strings.HasPrefix(line, "| ---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			return nil, fmt.Errorf("row %q has %d columns, not 3", line, len(cells))
		}
		may := strings.TrimSpace(cells[len(cells)-1])
		var ru rule
		switch {
		case strings.HasPrefix(may, "nothing"):
		case strings.HasPrefix(may, "everything"):
			ru.everything = true
		default:
			for _, m := range quoted.FindAllStringSubmatch(may, -1) {
				ru.allowed = append(ru.allowed, m[1])
			}
			if ru.allowed == nil {
				return nil, fmt.Errorf("row %q: say what it may import: packages in backquotes, \"nothing\" or \"everything\"", line)
			}
		}
		names := quoted.FindAllStringSubmatch(cells[0], -1)
		if names == nil {
			return nil, fmt.Errorf("row %q names no package", line)
		}
		for _, m := range names {
			if _, dup := rules[m[1]]; dup {
				return nil, fmt.Errorf("package %s has two rows", m[1])
			}
			rules[m[1]] = ru
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rules) < 5 {
		return nil, fmt.Errorf("found %d packages in the table: is its header still \"| package | owns | may import (of the project) |\"?", len(rules))
	}
	return rules, nil
}

type pkg struct {
	ImportPath string
	Imports    []string
}

// projectPackages lists the module's packages with their project imports,
// relative to the module ("bridge", "sandbox/agent").
func projectPackages(t *testing.T) map[string][]string {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		deps := []string{}
		for _, imp := range p.Imports {
			if dep, ok := strings.CutPrefix(imp, module+"/"); ok {
				deps = append(deps, dep)
			}
		}
		pkgs[rel] = deps
	}
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func TestPackageBoundaries(t *testing.T) {
	t.Parallel()
	f, err := os.Open(doc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules, err := parseTable(f)
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	pkgs := projectPackages(t)
	for name, ru := range rules {
		if _, ok := pkgs[name]; !ok {
			t.Errorf("docs/ARCHITECTURE.md names package %s, which does not exist", name)
		}
		for _, a := range ru.allowed {
			if !slices.ContainsFunc(keys(pkgs), func(p string) bool { return permitted([]string{a}, p) }) {
				t.Errorf("docs/ARCHITECTURE.md lets %s import %s, which does not exist", name, a)
			}
		}
	}
	for name, deps := range pkgs {
		ru, ok := rules[name]
		if !ok {
			t.Errorf("package %s has no row in docs/ARCHITECTURE.md's package table", name)
			continue
		}
		for _, dep := range deps {
			if !ru.everything && !permitted(ru.allowed, dep) {
				t.Errorf("%s imports %s, which docs/ARCHITECTURE.md does not allow", name, dep)
			}
		}
	}
}

// TestOnlyCommandsImportBridge keeps the phone server at the top: the
// packages under it speak the protocol through wire, and only the commands
// compose bridge with the rest. The table cannot allow otherwise.
func TestOnlyCommandsImportBridge(t *testing.T) {
	t.Parallel()
	for name, deps := range projectPackages(t) {
		if !strings.HasPrefix(name, "cmd/") && slices.ContainsFunc(deps, func(d string) bool { return d == "bridge" || strings.HasPrefix(d, "bridge/") }) {
			t.Errorf("%s imports bridge: only commands may", name)
		}
	}
}

func keys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
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
	t.Parallel()
	if !permitted([]string{"sandbox/..."}, "sandbox/demo") || permitted([]string{"sandbox/..."}, "sandboxes") ||
		permitted(nil, "bridge") || !permitted([]string{"store"}, "store") || permitted([]string{"store"}, "store/x") {
		t.Fatal("permitted() is wrong")
	}
}

func TestParseTable(t *testing.T) {
	t.Parallel()
	const table = "intro\n\n| package | owns | may import (of the project) |\n|---|---|---|\n" +
		"| `cmd/x` | the `run` | everything |\n" +
		"| `a`, `b/c` | things, `x` | `store`, `sandbox/...` only |\n" +
		"| `store` | SQLite | nothing |\n" +
		"| `d` | d | nothing (it must not share `a`'s types) |\n" +
		"| `e` | e | nothing |\n\nafter\n| `f` | not | in the table |\n"
	rules, err := parseTable(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]rule{
		"cmd/x": {everything: true},
		"a":     {allowed: []string{"store", "sandbox/..."}},
		"b/c":   {allowed: []string{"store", "sandbox/..."}},
		"store": {},
		"d":     {},
		"e":     {},
	}
	if fmt.Sprint(rules) != fmt.Sprint(want) {
		t.Errorf("got %v\nwant %v", rules, want)
	}
	for _, bad := range []string{
		"| package | owns | may import |\n|---|---|---|\n| `a` | a | `b` |\n",
		"| package | owns | may import |\n|---|---|---|\n| `a` | a | b and c |\n| `b` | b | nothing |\n| `c` | c | nothing |\n| `d` | d | nothing |\n| `e` | e | nothing |\n",
		"| package | owns | may import |\n|---|---|---|\n| `a` | a | nothing |\n| `a` | a | nothing |\n",
	} {
		if _, err := parseTable(strings.NewReader(bad)); err == nil {
			t.Errorf("no error for\n%s", bad)
		}
	}
}
