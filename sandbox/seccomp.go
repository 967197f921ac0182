package sandbox

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter every sandboxed process runs under (bwrap installs it
// just before it executes the bridge or the command; children inherit it).
//
// socket(2) is allowed for AF_INET, AF_INET6, and AF_NETLINK with
// NETLINK_ROUTE (getaddrinfo and getifaddrs use it) only; any other family
// or netlink protocol fails with EACCES: a host Unix socket (the session
// bus, docker.sock, ssh-agent, gpg-agent, a database) can be neither
// reached nor bound, even where its path is visible, nor can AF_VSOCK reach
// a virtual machine's host or sock_diag list sockets. Arguments are
// compared as whole 64-bit values against the allowed ones, so high bits
// set (the kernel reads only the low 32) make the call fail rather than
// pass. socketpair(2) stays: Node, Bun and shells use it for their
// children's pipes, and it reaches nothing outside.
//
// Failing with EPERM, because no agent needs them and each has served
// sandbox escapes or kernel exploits:
//   - unshare(2), and clone(2) with CLONE_NEWUSER: a new user namespace
//     regains capabilities (mount, …) inside it and opens much of the
//     kernel's attack surface; mount(2) and its kin then stay refused for
//     want of CAP_SYS_ADMIN, so they need no rule of their own;
//   - keyctl, add_key, request_key: the user's kernel keyrings are shared
//     with processes outside the sandbox;
//   - bpf, perf_event_open, userfaultfd: kernel attack surface, and
//     userfaultfd widens race windows in exploits.
//
// Failing with ENOSYS, so that callers fall back to what the filter sees:
//   - io_uring_setup, io_uring_enter, io_uring_register: io_uring performs
//     socket and connect operations that seccomp never sees;
//   - clone3(2): its flags sit in memory a filter cannot read; libc then
//     uses clone(2), whose flags it can.
//
// System calls of another architecture (32-bit int 0x80 on x86-64) kill
// the process: the numbers below are the native ones; x32 calls on x86-64
// fail with ENOSYS.
//
// The filter is a few dozen classic BPF instructions assembled here with
// golang.org/x/net/bpf. github.com/elastic/go-seccomp-bpf (v1.6.0) was
// tried first: its argument comparisons leave the argument, not the system
// call number, in the accumulator when they fail, so every rule after a
// conditional one compares the wrong value (socket(AF_UNIX) passed).
// libseccomp-golang needs cgo and the C library.
var filterOnce = sync.OnceValues(assembleFilter)

// auditArch is the native architecture as seccomp_data.arch names it.
var auditArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}

// Offsets into struct seccomp_data, little-endian.
const (
	offNr      = 0
	offArch    = 4
	offArg0Lo  = 16
	offArg0Hi  = 20
	offArg2Lo  = 32
	offArg2Hi  = 36
	x32Bit     = 0x40000000
	retAllow   = unix.SECCOMP_RET_ALLOW
	retKill    = unix.SECCOMP_RET_KILL_PROCESS
	retErrno   = unix.SECCOMP_RET_ERRNO
	labelAllow = "allow"
)

// step is an instruction of the program being assembled: a jump names its
// targets by label ("" is the next instruction).
type step struct {
	ins    bpf.Instruction
	label  string // a label this step defines; ins is nil
	isJump bool
	cond   bpf.JumpTest
	val    uint32
	jt, jf string
}

type program []step

func (p *program) load(off uint32) { *p = append(*p, step{ins: bpf.LoadAbsolute{Off: off, Size: 4}}) }
func (p *program) ret(v uint32)    { *p = append(*p, step{ins: bpf.RetConstant{Val: v}}) }
func (p *program) mark(l string)   { *p = append(*p, step{label: l}) }
func (p *program) jump(cond bpf.JumpTest, val uint32, jt, jf string) {
	*p = append(*p, step{isJump: true, cond: cond, val: val, jt: jt, jf: jf})
}

// assemble resolves the labels: every jump goes forward.
func (p program) assemble() ([]bpf.Instruction, error) {
	at := map[string]int{}
	n := 0
	for _, s := range p {
		if s.label != "" {
			at[s.label] = n
			continue
		}
		n++
	}
	var out []bpf.Instruction
	for _, s := range p {
		if s.label != "" {
			continue
		}
		if !s.isJump {
			out = append(out, s.ins)
			continue
		}
		skip := func(l string) (uint8, error) {
			if l == "" {
				return 0, nil
			}
			target, ok := at[l]
			d := target - len(out) - 1
			if !ok || d < 0 || d > 255 {
				return 0, fmt.Errorf("seccomp: bad jump to %q", l)
			}
			return uint8(d), nil
		}
		jt, err := skip(s.jt)
		if err != nil {
			return nil, err
		}
		jf, err := skip(s.jf)
		if err != nil {
			return nil, err
		}
		out = append(out, bpf.JumpIf{Cond: s.cond, Val: s.val, SkipTrue: jt, SkipFalse: jf})
	}
	return out, nil
}

// filterProgram is the filter described above, for this architecture.
func filterProgram() ([]bpf.Instruction, error) {
	native, ok := auditArch[runtime.GOARCH]
	if !ok {
		return nil, fmt.Errorf("seccomp: no filter for %s", runtime.GOARCH)
	}
	eperm := []uintptr{unix.SYS_UNSHARE, unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
		unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD}
	enosys := []uintptr{unix.SYS_CLONE3, unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER}
	var p program
	p.load(offArch)
	p.jump(bpf.JumpEqual, native, "", "kill")
	p.load(offNr)
	if runtime.GOARCH == "amd64" {
		p.jump(bpf.JumpGreaterOrEqual, x32Bit, "enosys", "")
	}
	p.jump(bpf.JumpEqual, unix.SYS_SOCKET, "socket", "")
	p.jump(bpf.JumpEqual, unix.SYS_CLONE, "clone", "")
	for _, nr := range eperm {
		p.jump(bpf.JumpEqual, uint32(nr), "eperm", "")
	}
	for _, nr := range enosys {
		p.jump(bpf.JumpEqual, uint32(nr), "enosys", "")
	}
	p.ret(retAllow)

	// socket(family, …): family must be one of the allowed, high half 0.
	p.mark("socket")
	p.load(offArg0Hi)
	p.jump(bpf.JumpEqual, 0, "", "eacces")
	p.load(offArg0Lo)
	p.jump(bpf.JumpEqual, unix.AF_INET, labelAllow, "")
	p.jump(bpf.JumpEqual, unix.AF_INET6, labelAllow, "")
	p.jump(bpf.JumpEqual, unix.AF_NETLINK, "", "eacces")
	// netlink: NETLINK_ROUTE (addresses, routes) only.
	p.load(offArg2Hi)
	p.jump(bpf.JumpEqual, 0, "", "eacces")
	p.load(offArg2Lo)
	p.jump(bpf.JumpEqual, unix.NETLINK_ROUTE, labelAllow, "")
	p.mark("eacces")
	p.ret(retErrno | uint32(unix.EACCES))

	// clone(flags, …): flags is the first argument on amd64 and arm64.
	p.mark("clone")
	p.load(offArg0Lo)
	p.jump(bpf.JumpBitsSet, unix.CLONE_NEWUSER, "eperm", labelAllow)

	p.mark("eperm")
	p.ret(retErrno | uint32(unix.EPERM))
	p.mark("enosys")
	p.ret(retErrno | uint32(unix.ENOSYS))
	p.mark("kill")
	p.ret(retKill)
	p.mark(labelAllow)
	p.ret(retAllow)
	return p.assemble()
}

// assembleFilter returns the filter as the array of struct sock_filter
// that bwrap's --seccomp reads.
func assembleFilter() ([]byte, error) {
	prog, err := filterProgram()
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	var buf bytes.Buffer
	for _, ins := range raw {
		// A fixed-size struct into a bytes.Buffer: this write cannot fail.
		_ = binary.Write(&buf, binary.NativeEndian, unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K})
	}
	return buf.Bytes(), nil
}

// filterLen is the filter's length in instructions, 0 when it does not
// assemble.
func filterLen() int {
	prog, _ := filterOnce()
	return len(prog) / 8
}

// seccompFile returns a file to read the filter from, for bwrap's --seccomp.
func seccompFile() (*os.File, error) {
	prog, err := filterOnce()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	defer w.Close()
	// A pipe holds 64 KiB; the filter is a few hundred bytes.
	if _, err := w.Write(prog); err != nil {
		r.Close()
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	return r, nil
}
