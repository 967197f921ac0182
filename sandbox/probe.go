package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/cgroups/v3"
)

const probeTimeout = 5 * time.Second

// Layer is one isolation layer's availability.
type Layer struct {
	// Available is true when the layer works on this machine.
	Available bool
	// Detail is what was found (bwrap: its path), or why it is missing.
	Detail string
}

// Capabilities are the isolation layers this machine offers. Rlimits and the
// environment allow-list are always applied and are not listed.
type Capabilities struct {
	// Bwrap is bubblewrap: filesystem, PID and network isolation.
	Bwrap Layer
	// Seccomp is the system call filter bwrap installs (no Unix sockets,
	// no new user namespaces …); it needs Bwrap.
	Seccomp Layer
	// Cgroup is memory, pids and CPU limits through cgroups.
	Cgroup Layer
	// CgroupVersion is 1 or 2 when Cgroup is available.
	CgroupVersion int
}

// Probe finds out, by trying, which layers work here. It takes a few
// milliseconds: call it once at start, for `tether doctor` and for
// Spec.Capabilities.
func Probe() Capabilities {
	var c Capabilities
	c.Bwrap = probeBwrap()
	c.Seccomp = probeSeccomp(c.Bwrap)
	c.Cgroup, c.CgroupVersion = probeCgroup()
	return c
}

func probeBwrap() Layer {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return Layer{Detail: "bwrap not found (install the bubblewrap package)"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
		"--tmpfs", "/tmp", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
		"--die-with-parent", "--new-session", "--", "true").CombinedOutput()
	if err != nil {
		return Layer{Detail: fmt.Sprintf("bwrap cannot run here: %v: %s", err, strings.TrimSpace(string(out)))}
	}
	return Layer{Available: true, Detail: path}
}

func probeCgroup() (Layer, int) {
	version := 1
	switch cgroups.Mode() {
	case cgroups.Unavailable:
		return Layer{Detail: "no cgroup file system mounted"}, 0
	case cgroups.Unified:
		version = 2
	}
	name := "tether-probe-" + strconv.Itoa(os.Getpid())
	cg, err := newCgroup(version, name, DefaultLimits())
	if err != nil {
		return Layer{Detail: err.Error()}, 0
	}
	if err := cg.destroy(); err != nil {
		return Layer{Detail: err.Error()}, 0
	}
	return Layer{Available: true, Detail: fmt.Sprintf("cgroup v%d under %s", version, filepath.Clean(cgroupRoot))}, version
}

// probeSeccomp runs bwrap with the filter: the kernel must take it.
func probeSeccomp(bwrap Layer) Layer {
	if !bwrap.Available {
		return Layer{Detail: "needs bubblewrap"}
	}
	f, err := seccompFile()
	if err != nil {
		return Layer{Detail: err.Error()}
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap.Detail, "--seccomp", "3", "--ro-bind", "/", "/", "--dev", "/dev",
		"--unshare-pid", "--die-with-parent", "--", "true")
	cmd.ExtraFiles = []*os.File{f}
	if out, err := cmd.CombinedOutput(); err != nil {
		return Layer{Detail: fmt.Sprintf("bwrap --seccomp fails here: %v: %s", err, strings.TrimSpace(string(out)))}
	}
	return Layer{Available: true, Detail: "filter of " + strconv.Itoa(filterLen()) + " instructions"}
}
