package sandbox_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"golang.org/x/sys/unix"
)

// TestMain lets the test binary stand in for the tether binary: run as
// "sandbox-bridge" it is the bridge, with the test agents below besides the
// built-in ones; run as "echo-server" it is the benchmarks' baseline.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "sandbox-bridge":
			os.Exit(testBridge())
		case "echo-server":
			os.Exit(echoServer(os.Args[2]))
		case "dial-unix":
			if c, err := net.Dial("unix", os.Args[2]); err != nil {
				fmt.Println(err)
			} else {
				c.Close()
				fmt.Println("connected to", os.Args[2])
			}
			os.Exit(0)
		case "listen-unix":
			if ln, err := net.Listen("unix", os.Args[2]); err != nil {
				fmt.Println(err)
			} else {
				ln.Close()
				fmt.Println("listening on", os.Args[2])
			}
			os.Exit(0)
		case "syscalls":
			trySyscalls()
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

func testBridge() int {
	cfg, err := sandbox.BridgeConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.Agents = sandbox.DefaultAgents()
	for name, q := range testAgents {
		cfg.Agents[name] = func(sandbox.AgentOptions) (agent.Agent, error) { return funcAgent(q), nil }
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := sandbox.RunBridge(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// hogged holds what the hog agent allocates, out of the compiler's reach.
var hogged [][]byte

// testAgents misbehave on purpose.
var testAgents = map[string]func(ctx context.Context, prompt string, host agent.Host) error{
	// crash panics, which ends the bridge process with status 2.
	"crash": func(context.Context, string, agent.Host) error { panic("test agent crashes") },
	// hog allocates and touches memory until the OOM killer ends it.
	"hog": func(ctx context.Context, _ string, host agent.Host) error {
		host.Emit(json.RawMessage(`{"type":"system","subtype":"init","session_id":"hog"}`))
		for ctx.Err() == nil {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			hogged = append(hogged, b)
		}
		return ctx.Err()
	},
	// huge emits a message with a 3 MB string, one of 2 MB that holds
	// no long string, asks to write 2 MB, and reports the answer.
	"huge": func(ctx context.Context, _ string, host agent.Host) error {
		long, _ := json.Marshal(map[string]any{"type": "assistant", "text": strings.Repeat("x", 3<<20)})
		host.Emit(long)
		many, _ := json.Marshal(map[string]any{"type": "assistant", "parts": slices.Repeat([]string{"0123456789"}, 200_000)})
		host.Emit(many)
		input, _ := json.Marshal(map[string]any{"file_path": "big.txt", "content": strings.Repeat("y", 2<<20)})
		d, err := host.RequestPermission(ctx, agent.PermissionRequest{ToolName: "Write", Input: input, ToolUseID: "w"})
		if err != nil {
			return err
		}
		result, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "result": d.Behavior + ": " + d.Message})
		host.Emit(result)
		return nil
	},
	// oversize writes a line longer than DefaultMaxLine straight to the
	// daemon's socket, past the bridge, as an agent that took the
	// bridge's connection would; then ends its turn.
	"oversize": func(ctx context.Context, _ string, host agent.Host) error {
		line := append([]byte(`{"ev":"message","data":{"type":"assistant","text":"`), bytes.Repeat([]byte("z"), 3<<20)...)
		line = append(line, "\"}}\n"...)
		writeToDaemon(line)
		result, _ := json.Marshal(map[string]any{"type": "result", "subtype": "success", "result": "after the long line"})
		host.Emit(result)
		return nil
	},
	// forge emits a message (seq 1 in a new bridge), then writes its
	// prompt as a line straight to the daemon's socket, as an agent that
	// took the bridge's connection would, then ends its turn.
	"forge": func(ctx context.Context, prompt string, host agent.Host) error {
		host.Emit(json.RawMessage(`{"type":"assistant","text":"genuine"}`))
		writeToDaemon([]byte(prompt + "\n"))
		host.Emit(json.RawMessage(`{"type":"result","subtype":"success","result":"the turn's end"}`))
		return nil
	},
	// hang stops the whole bridge process, as a deadlock would.
	"hang": func(ctx context.Context, _ string, _ agent.Host) error {
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		<-ctx.Done()
		return ctx.Err()
	},
}

// writeToDaemon writes line to every connected socket of the process:
// the daemon's connection, past the bridge's outbox.
func writeToDaemon(line []byte) {
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if n, err := strconv.Atoi(fd.Name()); err == nil {
			if sa, err := unix.Getpeername(n); err == nil && sa != nil {
				// The whole line at once: blocking, not interleaved
				// with the bridge's own.
				unix.SetNonblock(n, false)
				for rest := line; len(rest) > 0; {
					w, err := unix.Write(n, rest)
					if err != nil {
						break
					}
					rest = rest[w:]
				}
				unix.SetNonblock(n, true)
			}
		}
	}
}

type funcAgent func(ctx context.Context, prompt string, host agent.Host) error

func (f funcAgent) Query(ctx context.Context, prompt string, host agent.Host) error {
	return f(ctx, prompt, host)
}
func (f funcAgent) SessionID() string { return "" }
func (f funcAgent) Close() error      { return nil }

// trySyscalls makes the system calls the sandbox's seccomp filter is about
// and prints each one's outcome.
func trySyscalls() {
	report := func(name string, err error) {
		if err == nil {
			fmt.Println(name + ": ok")
			return
		}
		fmt.Println(name+":", err)
	}
	raw := func(name string, trap uintptr, args ...uintptr) {
		var a [6]uintptr
		copy(a[:], args)
		_, _, e := unix.RawSyscall6(trap, a[0], a[1], a[2], a[3], a[4], a[5])
		if e == 0 {
			report(name, nil)
			return
		}
		report(name, e)
	}
	socket := func(name string, domain, typ, proto int) {
		fd, err := unix.Socket(domain, typ, proto)
		if err == nil {
			unix.Close(fd)
		}
		report(name, err)
	}
	socket("socket(AF_UNIX)", unix.AF_UNIX, unix.SOCK_STREAM, 0)
	socket("socket(AF_UNIX, SOCK_DGRAM)", unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	socket("socket(AF_INET)", unix.AF_INET, unix.SOCK_STREAM, 0)
	socket("socket(AF_INET6)", unix.AF_INET6, unix.SOCK_STREAM, 0)
	socket("socket(AF_NETLINK, NETLINK_ROUTE)", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	socket("socket(AF_NETLINK, NETLINK_SOCK_DIAG)", unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_SOCK_DIAG)
	socket("socket(AF_VSOCK)", unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	// The kernel reads the family's low 32 bits only.
	r, _, e := unix.RawSyscall(unix.SYS_SOCKET, 1<<32|unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if e == 0 {
		unix.Close(int(r))
		report("socket(1<<32|AF_UNIX)", nil)
	} else {
		report("socket(1<<32|AF_UNIX)", e)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err == nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
	}
	report("socketpair(AF_UNIX)", err)
	report("unshare(CLONE_NEWUSER)", unix.Unshare(unix.CLONE_NEWUSER))
	pid, _, e := unix.RawSyscall6(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	switch {
	case e == 0 && pid == 0:
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	case e == 0:
		report("clone(CLONE_NEWUSER)", nil)
	default:
		report("clone(CLONE_NEWUSER)", e)
	}
	_, err = unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_USER_KEYRING, 0, 0, 0)
	report("keyctl", err)
	raw("bpf", unix.SYS_BPF, unix.BPF_PROG_LOAD, 0, 0)
	raw("perf_event_open", unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0)
	raw("userfaultfd", unix.SYS_USERFAULTFD, 0)
	raw("io_uring_setup", unix.SYS_IO_URING_SETUP, 1, 0)
	raw("clone3", unix.SYS_CLONE3, 0, 0)
}

// echoServer accepts one connection on path and writes every line back.
func echoServer(path string) int {
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("listening")
	conn, err := ln.Accept()
	if err != nil {
		return 1
	}
	ln.Close()
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return 0
		}
		if _, err := conn.Write(line); err != nil {
			return 0
		}
	}
}
