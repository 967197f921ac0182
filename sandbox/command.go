package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// commandWaitDelay bounds how long Wait waits, once the command is killed
// or has exited, for output pipes still held open.
const commandWaitDelay = time.Second

// CommandSpec is a one-off command run in a session's sandbox view: no network, the same filesystem view and seccomp filter as the session's sandbox, its own PID namespace, killed with its parent.
type CommandSpec struct {
	Dir          string   // working directory of the command (must lie under ReadOnly or Writable)
	ReadOnly     []string // bound read-only at the same path (e.g. a repository's top level, ~/.gitconfig)
	Writable     []string // bound read-write at the same path
	Hide         []string // covered last, like Spec.Hide (the data directory)
	Env          []string // the command's whole environment, used as given
	Capabilities *Capabilities
}

// Command returns the command that runs argv[0] with argv[1:] under spec: bwrap around it when this machine has bubblewrap, else argv directly (Isolated false). The caller sets Stdin/Stdout/Stderr and starts it, and closes cmd.ExtraFiles (the seccomp filter) once it has started; ctx kills the whole sandbox.
//
// The view is a session's (system directories, PATH's toolchains, an empty
// home, /tmp, /run and socket directories), with Writable bound read-write,
// then ReadOnly read-only (a read-only path inside a writable one stays
// read-only), then Hide covered. Cancelling ctx kills bwrap, whose PID
// namespace dies with it, every process of the command included; without
// bubblewrap the command's process group is killed. Wait returns at most
// a second after that even when output pipes are held open.
func Command(ctx context.Context, spec CommandSpec, argv []string) (cmd *exec.Cmd, isolated bool, err error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, false, fmt.Errorf("%w: no command", ErrBadSpec)
	}
	dir, err := filepath.Abs(spec.Dir)
	if err != nil || spec.Dir == "" {
		return nil, false, fmt.Errorf("%w: working directory %q", ErrBadSpec, spec.Dir)
	}
	if real := realPath(dir); real != "" {
		dir = real
	}
	var bound []string
	for _, p := range append(slices.Clone(spec.ReadOnly), spec.Writable...) {
		if real := realPath(p); real != "" {
			bound = append(bound, real)
		}
	}
	if !underAny(dir, bound) {
		return nil, false, fmt.Errorf("%w: working directory %s lies under no bound path", ErrBadSpec, dir)
	}
	caps := spec.Capabilities
	if caps == nil {
		c := Probe()
		caps = &c
	}
	if !caps.Bwrap.Available {
		cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir, cmd.Env = dir, spec.Env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
		cmd.Cancel = func() error {
			killSession(cmd.Process.Pid, 0)
			return nil
		}
		cmd.WaitDelay = commandWaitDelay
		return cmd, false, nil
	}
	v := commandView(spec)
	var args []string
	var filter *os.File
	if caps.Seccomp.Available {
		if filter, err = seccompFile(); err != nil {
			return nil, false, err
		}
		args = append(args, "--seccomp", "3")
	}
	args = append(args, v.args()...)
	args = append(args, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
		"--die-with-parent", "--new-session", "--chdir", dir, "--")
	cmd = exec.CommandContext(ctx, caps.Bwrap.Detail, append(args, argv...)...)
	cmd.Env = spec.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// bwrap's child (the sandbox's PID 1) is meant to die with bwrap
	// (--die-with-parent), but a hung git was seen to outlive a killed
	// bwrap: kill the child first, which takes its PID namespace with it.
	cmd.Cancel = func() error {
		killChildren(cmd.Process.Pid)
		return cmd.Process.Kill()
	}
	cmd.WaitDelay = commandWaitDelay
	if filter != nil {
		// The child has its copy once started: the caller closes
		// cmd.ExtraFiles after Start (or Run); else the garbage collector
		// does. (Closing it on ctx's end raced with a Start under way.)
		cmd.ExtraFiles = []*os.File{filter}
	}
	return cmd, true, nil
}

func commandView(spec CommandSpec) view {
	var binds []Bind
	for _, p := range spec.Writable {
		binds = append(binds, Bind{Src: p, Writable: true})
	}
	for _, p := range spec.ReadOnly {
		binds = append(binds, Bind{Src: p})
	}
	return view{
		home:  envValue(spec.Env, "HOME"),
		path:  envValue(spec.Env, "PATH"),
		masks: []string{os.Getenv("XDG_RUNTIME_DIR"), defaultSocketDir()},
		binds: binds,
		hide:  spec.Hide,
	}
}

func defaultSocketDir() string {
	return filepath.Join(os.TempDir(), "tether-"+strconv.Itoa(os.Getuid()))
}

// killChildren sends SIGKILL to the children of pid.
func killChildren(pid int) {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				// One that exited since the listing fails this, with
				// nothing left to kill.
				_ = syscall.Kill(child, syscall.SIGKILL)
			}
		}
	}
}
