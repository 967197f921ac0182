package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	t.Parallel()
	info := func(mainVersion string, settings ...string) func() (*debug.BuildInfo, bool) {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/tetherdev/tether", Version: mainVersion}}
		for i := 0; i < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return func() (*debug.BuildInfo, bool) { return bi, true }
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	const rev = "e81f413761cabc6b9d727cbc26351372020f4c72"
	const pseudo = "v0.0.0-20261127140250-e81f413761ca"
	for _, c := range []struct {
		name, ld string
		read     func() (*debug.BuildInfo, bool)
		want     string
	}{
		{"-ldflags -X", "v1.4.0", info("v1.3.0"), "v1.4.0"},
		{"go install @version", "", info("v1.3.0"), "v1.3.0"},
		{"checkout", "", info(pseudo, "vcs.revision", rev, "vcs.modified", "false"), pseudo},
		{"checkout with changes", "", info(pseudo+"+dirty", "vcs.revision", rev, "vcs.modified", "true"), pseudo + "+dirty"},
		{"no vcs", "", info("(devel)"), "0.1.0-dev"},
		{"no build info", "", none, "0.1.0-dev"},
	} {
		if got := buildVersion(c.ld, c.read); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestVersionOfACheckoutBuild builds tether from this checkout as a
// developer does and asks it its version: it names the commit.
func TestVersionOfACheckoutBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tether")
	}
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// go build stamps a checkout whose .git is a directory: a git
	// worktree's is a file.
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		t.Skip("skipped: not a git checkout of its own (a worktree's .git is a file, which go build does not stamp)")
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "tether")
	// -buildvcs=true: a GOFLAGS of the machine's may turn stamping off.
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/tether")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	rev := strings.TrimSpace(string(head))
	first, _, _ := strings.Cut(string(out), "\n")
	// A tag, else a pseudo-version naming the commit.
	if !strings.HasPrefix(first, "tether v") || !strings.Contains(string(out), "commit "+rev+" of ") {
		t.Errorf("tether version of a build of %s:\n%s", rev, out)
	}
}
