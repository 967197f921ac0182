package sandbox_test

import (
	"os/exec"
	"slices"
	"testing"

	"github.com/tetherdev/tether/sandbox"
)

func TestAgentEnv(t *testing.T) {
	in := []string{
		"PATH=/bin", "HOME=/root", "LANG=C.UTF-8", "TERM=xterm", "LC_ALL=C",
		"ANTHROPIC_API_KEY=k", "ANTHROPIC_BASE_URL=http://127.0.0.1:1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"OPENAI_API_KEY=o", "CODEX_HOME=/c",
		"AWS_SECRET_ACCESS_KEY=no", "TETHER_HOOK_TOKEN=no", "TETHER_SANDBOX_ID=forged", "SSH_AUTH_SOCK=/no",
		"ANTHROPIC_=no", "PATHX=no", "malformed",
	}
	tests := []struct {
		agent string
		want  []string
	}{
		{"demo", in[:5]},
		{"claude-code", in[:8]},
		{"codex", append(in[:5:5], in[8:10]...)},
		{"unknown", in[:5]},
	}
	for _, tt := range tests {
		if got := sandbox.AgentEnv(tt.agent, in); !slices.Equal(got, tt.want) {
			t.Errorf("AgentEnv(%q) = %q, want %q", tt.agent, got, tt.want)
		}
	}
}

func TestProbe(t *testing.T) {
	c := probeOnce()
	t.Logf("capabilities: %+v", c)
	if _, err := exec.LookPath("bwrap"); err != nil && c.Bwrap.Available {
		t.Error("bwrap reported available but is not on PATH")
	}
	if c.Cgroup.Available != (c.CgroupVersion != 0) {
		t.Errorf("cgroup available %v with version %d", c.Cgroup.Available, c.CgroupVersion)
	}
	for _, l := range []sandbox.Layer{c.Bwrap, c.Cgroup} {
		if l.Detail == "" {
			t.Errorf("layer %+v without detail", l)
		}
	}
}

func TestRlimitsRoundTrip(t *testing.T) {
	limits := []sandbox.Rlimit{{Name: "nofile", Value: 4096}, {Name: "fsize", Value: 1 << 40}, {Name: "core", Value: 0}}
	got, err := sandbox.ParseRlimits(sandbox.FormatRlimits(limits))
	if err != nil || !slices.Equal(got, limits) {
		t.Errorf("round trip: %v, %v", got, err)
	}
	for _, bad := range []string{"nofile", "stack=1", "nofile=-1", "nofile=1,"} {
		if _, err := sandbox.ParseRlimits(bad); err == nil {
			t.Errorf("ParseRlimits(%q) accepted", bad)
		}
	}
}
