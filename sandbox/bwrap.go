package sandbox

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/tetherdev/tether/sandbox/agent"
)

// command builds the bridge's command line: bwrap around the executable
// where available. The bridge inherits the notify pipe as fd 3 and its
// listening socket as fd 4; with seccomp, bwrap reads the filter from
// seccompFD, the last inherited file.
func (s *Sandbox) command(caps Capabilities, spec Spec, sock string, egress bool, seccompFD int) *exec.Cmd {
	env := AgentEnv(spec.Agent, spec.Env)
	env = append(env,
		EnvSocket+"="+sock, EnvSandboxID+"="+spec.ID, EnvAgent+"="+spec.Agent,
		EnvWorkDir+"="+spec.WorkDir, EnvRlimits+"="+FormatRlimits(s.Layers.Rlimits),
		EnvNotifyFD+"=3", EnvListenFD+"=4")
	if egress {
		env = append(env, EnvEgressFD+"=5")
		env = append(env, proxyEnv()...)
	}
	if spec.AgentSessionID != "" {
		env = append(env, EnvAgentSession+"="+spec.AgentSessionID)
	}
	if spec.RunMember != "" {
		env = append(env, EnvRunMember+"="+spec.RunMember)
	}
	if spec.StateDir != "" {
		env = append(env, EnvStateDir+"="+spec.StateDir)
	}
	if spec.Settings != (agent.Settings{}) {
		b, _ := json.Marshal(spec.Settings)
		env = append(env, EnvAgentSettings+"="+string(b))
	}
	if spec.OrphanTimeout > 0 {
		env = append(env, EnvOrphanTimeout+"="+spec.OrphanTimeout.String())
	}
	var cmd *exec.Cmd
	// Its own session: a signal to the daemon's process group (^C in
	// its terminal) is not the sandbox's.
	attr := &syscall.SysProcAttr{Setsid: true}
	if spec.OrphanTimeout < 0 {
		attr.Pdeathsig = syscall.SIGKILL
	}
	if caps.Bwrap.Available {
		args := bwrapArgs(spec)
		if s.Layers.Seccomp {
			args = append([]string{"--seccomp", strconv.Itoa(seccompFD)}, args...)
		}
		cmd = exec.Command(caps.Bwrap.Detail, args...)
	} else {
		cmd = exec.Command(spec.Executable, spec.Args...)
		cmd.Dir = spec.WorkDir
	}
	cmd.SysProcAttr = attr
	cmd.Env = env
	cmd.Stderr = s.stderr
	if s.cg != nil {
		s.cg.prepare(attr)
	}
	return cmd
}

// sessionView is what a session's sandbox sees: the system, the user's
// home as an empty directory, the working directory and state directory
// read-write, the executable and ReadOnly read-only, what the agent's
// profile adds, and nothing of Hide. Not its socket directory: the bridge
// accepts on the listening socket it inherits and needs no path, and a
// directory of the data disk the agent could write would let it fill the
// disk, or plant files where the daemon looks when it adopts the sandbox.
func sessionView(spec Spec) view {
	binds := []Bind{{Src: spec.WorkDir, Writable: true}, {Src: spec.Executable}}
	for _, p := range spec.ReadOnly {
		binds = append(binds, Bind{Src: p})
	}
	binds = append(binds, spec.Binds...)
	if spec.StateDir != "" {
		binds = append(binds, Bind{Src: spec.StateDir, Writable: true})
	}
	return view{
		home:  envValue(spec.Env, "HOME"),
		path:  envValue(AgentEnv(spec.Agent, spec.Env), "PATH"),
		masks: []string{envValue(spec.Env, "XDG_RUNTIME_DIR"), spec.SocketDir},
		binds: binds,
		hide:  spec.Hide,
	}
}

func bwrapArgs(spec Spec) []string {
	a := sessionView(spec).args()
	a = append(a, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net")
	// A bridge that outlives its daemon (OrphanTimeout) is not killed with
	// it: a new daemon adopts it, or it ends itself.
	if spec.OrphanTimeout < 0 {
		a = append(a, "--die-with-parent")
	}
	a = append(a, "--new-session", "--chdir", spec.WorkDir, "--", spec.Executable)
	return append(a, spec.Args...)
}
