package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

const (
	cgroupRoot    = "/sys/fs/cgroup"
	cpuPeriod     = 100_000 // µs
	destroyWait   = 2 * time.Second
	destroyPoll   = 5 * time.Millisecond
	errCgroupBusy = "cgroup still has processes"
)

// cgroup is one sandbox's control group, version 1 or 2.
type cgroup interface {
	// prepare sets attr so that the child starts inside the cgroup, where
	// the kernel can (v2: CLONE_INTO_CGROUP).
	prepare(attr *syscall.SysProcAttr)
	// enterThread moves the calling OS thread into the cgroup, so that a
	// child it forks starts there (v1); leaveThread moves it back.
	enterThread() error
	leaveThread() error
	// oomKills counts the out-of-memory kills inside the cgroup.
	oomKills() uint64
	// killAll sends SIGKILL to every process in the cgroup but the daemon.
	killAll()
	// destroy kills what is left and removes the cgroup.
	destroy() error
}

func newCgroup(version int, name string, l Limits) (cgroup, error) {
	switch version {
	case 1:
		return newCgroupV1(name, l)
	case 2:
		return newCgroupV2(name, l)
	}
	return nil, fmt.Errorf("sandbox: cgroup version %d", version)
}

// v1Subsystems are the v1 controllers a sandbox uses.
var v1Subsystems = []cgroup1.Name{cgroup1.Memory, cgroup1.Pids, cgroup1.Cpu}

func v1Hierarchy() ([]cgroup1.Subsystem, error) {
	all, err := cgroup1.Default()
	if err != nil {
		return nil, fmt.Errorf("sandbox: cgroup v1 hierarchy: %w", err)
	}
	var out []cgroup1.Subsystem
	for _, s := range all {
		if slices.Contains(v1Subsystems, s.Name()) {
			out = append(out, s)
		}
	}
	if len(out) != len(v1Subsystems) {
		return nil, fmt.Errorf("sandbox: cgroup v1 needs controllers %v, found %d of them", v1Subsystems, len(out))
	}
	return out, nil
}

type cgroupV1 struct {
	cg, parent cgroup1.Cgroup
}

func newCgroupV1(name string, l Limits) (*cgroupV1, error) {
	h, err := v1Hierarchy()
	if err != nil {
		return nil, err
	}
	mem, pids := l.MemoryBytes, l.Pids
	quota := int64(l.CPUs * cpuPeriod)
	period := uint64(cpuPeriod)
	res := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem},
		Pids:   &specs.LinuxPids{Limit: &pids},
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "memory", "memory.memsw.limit_in_bytes")); err == nil {
		res.Memory.Swap = &mem // no escape into swap
	}
	parent, err := cgroup1.Load(cgroup1.NestedPath(""), cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return h, nil }))
	if err != nil {
		return nil, fmt.Errorf("sandbox: cgroup v1 parent: %w", err)
	}
	cg, err := cgroup1.New(cgroup1.NestedPath(name), res, cgroup1.WithHierarchy(func() ([]cgroup1.Subsystem, error) { return h, nil }))
	if err != nil {
		return nil, fmt.Errorf("sandbox: cgroup v1 %s: %w", name, err)
	}
	return &cgroupV1{cg: cg, parent: parent}, nil
}

func (c *cgroupV1) prepare(*syscall.SysProcAttr) {}

func (c *cgroupV1) enterThread() error {
	return c.cg.AddTask(cgroup1.Process{Pid: unix.Gettid()})
}

func (c *cgroupV1) leaveThread() error {
	return c.parent.AddTask(cgroup1.Process{Pid: unix.Gettid()})
}

func (c *cgroupV1) oomKills() uint64 {
	st, err := c.cg.Stat(cgroup1.IgnoreNotExist)
	if err != nil || st.MemoryOomControl == nil {
		return 0
	}
	return st.MemoryOomControl.OomKill
}

func (c *cgroupV1) pids() []int {
	procs, err := c.cg.Processes(cgroup1.Pids, true)
	if err != nil {
		return nil
	}
	var out []int
	for _, p := range procs {
		if p.Pid != os.Getpid() {
			out = append(out, p.Pid)
		}
	}
	return out
}

func (c *cgroupV1) killAll() {
	for _, pid := range c.pids() {
		// One that exited since the listing fails this, with nothing
		// left to kill; retryRemove tries again for the others.
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func (c *cgroupV1) destroy() error {
	return retryRemove(func() error {
		c.killAll()
		return c.cg.Delete()
	})
}

type cgroupV2 struct {
	m  *cgroup2.Manager
	fd *os.File
}

// v2Group returns the group path for name, nested under the daemon's own.
func v2Group(name string) (string, error) {
	g, err := cgroup2.NestedGroupPath(name)
	if err != nil {
		return "", fmt.Errorf("sandbox: cgroup v2 path: %w", err)
	}
	return g, nil
}

func newCgroupV2(name string, l Limits) (*cgroupV2, error) {
	g, err := v2Group(name)
	if err != nil {
		return nil, err
	}
	mem := l.MemoryBytes
	quota := int64(l.CPUs * cpuPeriod)
	period := uint64(cpuPeriod)
	m, err := cgroup2.NewManager(cgroupRoot, g, &cgroup2.Resources{
		Memory: &cgroup2.Memory{Max: &mem},
		Pids:   &cgroup2.Pids{Max: l.Pids},
		CPU:    &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period)},
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: cgroup v2 %s: %w", g, err)
	}
	fd, err := os.Open(filepath.Join(cgroupRoot, g))
	if err != nil {
		if derr := m.Delete(); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove it: %w", derr))
		}
		return nil, fmt.Errorf("sandbox: cgroup v2 %s: %w", g, err)
	}
	return &cgroupV2{m: m, fd: fd}, nil
}

func (c *cgroupV2) prepare(attr *syscall.SysProcAttr) {
	attr.UseCgroupFD = true
	attr.CgroupFD = int(c.fd.Fd())
}

func (c *cgroupV2) enterThread() error { return nil }
func (c *cgroupV2) leaveThread() error { return nil }

func (c *cgroupV2) oomKills() uint64 {
	st, err := c.m.Stat()
	if err != nil || st.MemoryEvents == nil {
		return 0
	}
	return st.MemoryEvents.OomKill
}

func (c *cgroupV2) killAll() {
	procs, err := c.m.Procs(true)
	if err != nil {
		return
	}
	for _, p := range procs {
		if int(p) != os.Getpid() {
			// One that exited since the listing fails this, with
			// nothing left to kill; retryRemove tries again for the
			// others.
			_ = syscall.Kill(int(p), syscall.SIGKILL)
		}
	}
}

func (c *cgroupV2) destroy() error {
	err := retryRemove(func() error {
		c.killAll()
		return c.m.Delete()
	})
	c.fd.Close()
	return err
}

// retryRemove calls remove until it succeeds or destroyWait passes: killed
// processes take a moment to leave their cgroup.
func retryRemove(remove func() error) error {
	deadline := time.Now().Add(destroyWait)
	for {
		err := remove()
		if err == nil || errors.Is(err, cgroup1.ErrCgroupDeleted) || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox: %s: %w", errCgroupBusy, err)
		}
		time.Sleep(destroyPoll)
	}
}

// staleCgroupAge is how old an empty sandbox cgroup must be to be taken
// for stale: one made this moment is empty until its sandbox joins it,
// perhaps another daemon's on this machine.
const staleCgroupAge = time.Minute

// RemoveStaleCgroups removes the empty sandbox cgroups ("tether-…" below the
// daemon's own) that a daemon killed without its cleanup left behind, and
// returns how many directories it removed. Live sandboxes' cgroups are not
// empty and stay: the kernel refuses to remove them; nor is one removed
// that was made in the last staleCgroupAge, which a sandbox starting now
// (this daemon's or another's) has not joined yet. Call it at start.
func RemoveStaleCgroups(caps Capabilities) (int, error) {
	var parents []string
	switch caps.CgroupVersion {
	case 0:
		return 0, nil
	case 1:
		h, err := v1Hierarchy()
		if err != nil {
			return 0, err
		}
		own := cgroup1.NestedPath("")
		for _, s := range h {
			p, err := own(s.Name())
			if err != nil {
				return 0, fmt.Errorf("sandbox: cgroup v1 path: %w", err)
			}
			if ps, ok := s.(interface{ Path(string) string }); ok {
				parents = append(parents, ps.Path(p))
			}
		}
	default:
		g, err := v2Group("")
		if err != nil {
			return 0, err
		}
		parents = append(parents, filepath.Join(cgroupRoot, g))
	}
	n := 0
	for _, parent := range parents {
		stale, err := filepath.Glob(filepath.Join(parent, "tether-*"))
		if err != nil {
			return n, fmt.Errorf("sandbox: stale cgroups: %w", err)
		}
		for _, dir := range stale {
			if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < staleCgroupAge {
				continue
			}
			if os.Remove(dir) == nil {
				n++
			}
		}
	}
	return n, nil
}
