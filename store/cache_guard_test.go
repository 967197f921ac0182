package store

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryWriterInvalidates reads the package's source: every function
// whose SQL writes the sessions or the approvals table must drop the
// matching listCache, so that a writer added later cannot forget to
// (TestListsFollowEveryWrite checks the writers it knows of by running
// them).
func TestEveryWriterInvalidates(t *testing.T) {
	t.Parallel()
	writes := map[string]*regexp.Regexp{
		"live":    regexp.MustCompile(`(?i)(INSERT (OR \w+ )?INTO|UPDATE|DELETE FROM) sessions\b`),
		"pending": regexp.MustCompile(`(?i)(INSERT (OR \w+ )?INTO|UPDATE|DELETE FROM) approvals\b|\bcreateApproval\b`),
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range src.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			var text strings.Builder
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.BasicLit:
					text.WriteString(n.Value + "\n")
				case *ast.Ident:
					text.WriteString(n.Name + "\n")
				}
				return true
			})
			body := text.String()
			for cache, re := range writes {
				if !re.MatchString(body) {
					continue
				}
				checked++
				if !strings.Contains(body, cache+"\ninvalidate\n") {
					t.Errorf("%s: %s writes its table but does not call s.%s.invalidate()", fset.Position(fn.Pos()), fn.Name.Name, cache)
				}
			}
		}
	}
	if checked < 9 {
		t.Fatalf("found %d writers; the patterns no longer match the package's SQL", checked)
	}
}
