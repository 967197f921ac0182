package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUserGitConfigKeepsOnlyWhatGitNeeds: the copy holds the identity and
// the status settings, values intact however they are quoted, and nothing
// of the credentials, URLs, aliases or commands around them; it is made
// again when ~/.gitconfig changes.
func TestUserGitConfigKeepsOnlyWhatGitNeeds(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[user]\n\tname = \"Ana \\\"Q\\\" O\\\\Neil\\tx\"\n\temail = ana@example.com\n" +
		"[status]\n\tshowUntrackedFiles = all\n" +
		"[url \"https://tok_SECRET@github.com/\"]\n\tinsteadOf = https://github.com/\n" +
		"[http]\n\textraHeader = Authorization: Bearer tok_SECRET\n" +
		"[credential]\n\thelper = store\n[alias]\n\tx = !rm -rf ~\n[core]\n\tpager = less\n\tfsmonitor = evil\n")
	u := &userGitConfig{home: home, dir: filepath.Join(t.TempDir(), "git")}
	path, _, err := u.file()
	if err != nil {
		t.Fatal(err)
	}
	list := func(p string) string {
		out, err := exec.Command("git", "config", "-f", p, "--list").CombinedOutput()
		if err != nil {
			t.Fatalf("git reads the copy: %v %s", err, out)
		}
		return string(out)
	}
	got := list(path)
	for _, want := range []string{"user.name=Ana \"Q\" O\\Neil\tx", "user.email=ana@example.com", "status.showuntrackedfiles=all"} {
		if !strings.Contains(got, want) {
			t.Errorf("the copy lacks %q:\n%s", want, got)
		}
	}
	for _, leak := range []string{"SECRET", "credential", "alias", "pager", "fsmonitor", "insteadof"} {
		if strings.Contains(strings.ToLower(got), strings.ToLower(leak)) {
			t.Errorf("the copy holds %q:\n%s", leak, got)
		}
	}
	write("[user]\n\tname = Changed Name\n")
	path2, _, err := u.file()
	if err != nil || !strings.Contains(list(path2), "user.name=Changed Name") {
		t.Fatalf("after a change: %v\n%s", err, list(path2))
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the old copy %s stays", path)
	}
}
