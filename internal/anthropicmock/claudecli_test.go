package anthropicmock

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestClaudeBinOverride(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "claude")
	plain := filepath.Join(dir, "plain")
	for path, mode := range map[string]os.FileMode{exe: 0o755, plain: 0o644} {
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		env     string
		want    string
		wantErr bool
	}{
		{exe, exe, false},
		{plain, "", true},
		{dir, "", true},
		{filepath.Join(dir, "missing"), "", true},
	}
	for _, tt := range tests {
		t.Setenv("TETHER_CLAUDE_BIN", tt.env)
		got, err := claudeBin()
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("claudeBin with TETHER_CLAUDE_BIN=%s = %q, %v; want %q, error %v", tt.env, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestClaudeBinProjectLocal(t *testing.T) {
	t.Setenv("TETHER_CLAUDE_BIN", "")
	got, err := claudeBin()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("claudeBin under CI: %v", err)
		}
		t.Skipf("no project-local CLI: %v", err)
	}
	if !strings.HasSuffix(got, filepath.Join(".tools", "bin", "claude")) {
		t.Errorf("claudeBin = %q, want the project-local .tools/bin/claude", got)
	}
}

func TestClaudeEnv(t *testing.T) {
	t.Parallel()
	s := New(t, Queue())
	env := s.ClaudeEnv("/home/dev")
	joined := "\n" + strings.Join(env, "\n") + "\n"
	for _, want := range []string{"\nHOME=/home/dev\n", "\nANTHROPIC_BASE_URL=" + s.URL + "\n", "\nCLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1\n", "\nANTHROPIC_API_KEY="} {
		if !strings.Contains(joined, want) {
			t.Errorf("ClaudeEnv lacks %q: %q", strings.TrimSpace(want), env)
		}
	}
}

func TestInstalledClaudeVersion(t *testing.T) {
	t.Parallel()
	bin := ClaudeBin(t)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	if got := strings.Fields(string(out)); len(got) == 0 || got[0] != ClaudeVersion {
		t.Errorf("%s --version = %q, want %s", bin, out, ClaudeVersion)
	}
}
