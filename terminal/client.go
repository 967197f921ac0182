package terminal

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/term"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/sandbox/claude"
)

// Options configure Run.
type Options struct {
	// Claude is the claude executable.
	Claude string
	// Args are the user's arguments to claude.
	Args []string
	// Socket is the daemon's SocketName.
	Socket string
	// Dir is the terminal's working directory.
	Dir string
	// Stdin and Stdout are the terminal; Stderr gets tether's own notes.
	Stdin, Stdout *os.File
	Stderr        io.Writer
	// Exec replaces the process with claude, unchanged, when the phone
	// cannot be offered (no daemon, a session picked at start); nil is
	// syscall.Exec.
	Exec func(argv0 string, argv, env []string) error
}

// Banner is what the terminal shows while the phone drives its session.
const Banner = "continued from the phone · press any key to take it back"

// stopWait is how long claude gets to exit after SIGTERM before SIGKILL.
const stopWait = 3 * time.Second

// Run is `tether claude ARGS…`: claude in the terminal, its session
// offered to the phone. It returns claude's exit status.
func Run(ctx context.Context, o Options) int {
	if o.Exec == nil {
		o.Exec = syscall.Exec
	}
	id, args, ok := sessionArgs(o.Args)
	if !ok {
		return o.plain("a session picked at start (--continue, --resume without an id), a printing run (-p) or a command of claude's is not offered to the phone")
	}
	ctl, err := dialControl(o.Socket, id, o.Dir)
	if err != nil {
		return o.plain(err.Error())
	}
	w := &wrapper{o: o, id: id, ctl: ctl, redial: make(chan *controlConn)}
	return w.run(ctx, args)
}

// plain runs claude unchanged after one line saying why the phone is not
// offered the session.
func (o Options) plain(why string) int {
	tell(o.Stderr, "tether: %s; running claude without the phone.\n", why)
	err := o.Exec(o.Claude, append([]string{o.Claude}, o.Args...), os.Environ())
	tell(o.Stderr, "tether: cannot run %s: %v\n", o.Claude, err)
	return 127
}

// tell writes to the user's terminal (standard output or error), which is
// where failures are reported: one writing there has nowhere else to go.
func tell(out io.Writer, format string, args ...any) {
	_, _ = fmt.Fprintf(out, format, args...)
}

// sessionArgs finds the Claude Code session the arguments name (--resume
// ID, --session-id ID), or names a new one (--session-id, added); ok is
// false when the session is unknown until claude picks it, or claude is
// not interactive.
func sessionArgs(args []string) (id string, out []string, ok bool) {
	if len(args) > 0 && subcommands[args[0]] {
		return "", nil, false
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := strings.Cut(a, "=")
		switch name {
		case "-p", "--print", "-c", "--continue":
			return "", nil, false
		case "-r", "--resume", "--session-id":
			if !hasValue {
				if i+1 >= len(args) || strings.HasPrefix(args[i+1], "-") {
					return "", nil, false
				}
				value = args[i+1]
			}
			if !idPattern.MatchString(value) {
				return "", nil, false
			}
			return value, args, true
		}
	}
	id = newUUID()
	return id, append(append([]string{}, args...), "--session-id", id), true
}

// subcommands are claude's commands that start no session (`claude
// --help`): they run unchanged.
var subcommands = map[string]bool{
	"agents": true, "auth": true, "auto-mode": true, "doctor": true, "gateway": true, "install": true, "mcp": true,
	"plugin": true, "plugins": true, "project": true, "setup-token": true, "ultrareview": true, "update": true, "upgrade": true,
}

// resumeArgs are the user's options, without those that name or pick a
// session and without the prompt given on the command line (it ran
// once), plus --resume of id. An option's value is told from the prompt by
// the options claude documents as taking one (or several, up to the next
// option).
func resumeArgs(args []string, id string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "-") {
			continue // the prompt
		}
		n, known := valueOptions[name]
		if name == "-r" || name == "--resume" || name == "--session-id" {
			if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
			continue
		}
		out = append(out, a)
		if !known || hasValue {
			continue
		}
		for taken := 0; i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && (n < 0 || taken < n); taken++ {
			i++
			out = append(out, args[i])
		}
	}
	return append(out, "--resume", id)
}

// valueOptions are claude's options that take a value (1: one, also
// those whose value is optional, which claude takes from the next argument
// too) or several (-1: up to the next option), as `claude --help` lists
// them.
var valueOptions = map[string]int{
	"--model": 1, "--fallback-model": 1, "--permission-mode": 1, "--settings": 1, "--setting-sources": 1,
	"--append-system-prompt": 1, "--system-prompt": 1, "--agent": 1, "--agents": 1, "--output-format": 1,
	"--input-format": 1, "--max-budget-usd": 1, "--json-schema": 1, "--effort": 1, "--name": 1, "-n": 1,
	"--debug-file": 1, "--plugin-dir": 1, "--plugin-url": 1, "--remote-control-session-name-prefix": 1,
	"-d": 1, "--debug": 1, "--from-pr": 1, "--prompt-suggestions": 1, "--remote-control": 1, "-w": 1, "--worktree": 1,
	"--add-dir": -1, "--mcp-config": -1, "--allowedTools": -1, "--allowed-tools": -1, "--disallowedTools": -1,
	"--disallowed-tools": -1, "--tools": -1, "--betas": -1, "--file": -1,
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// control is the wrapper's control connection.
type controlConn struct {
	conn net.Conn
	msgs chan Msg // closed at the connection's end
}

func dialControl(socket, id, dir string) (*controlConn, error) {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return nil, errors.New("the tether daemon is not running")
	}
	if err := write(c, Msg{Op: OpHello, Role: RoleControl, SessionID: id, Cwd: dir}); err != nil {
		c.Close()
		return nil, fmt.Errorf("the tether daemon did not answer: %v", err)
	}
	r := newReader(c)
	c.SetReadDeadline(time.Now().Add(helloWait))
	m, err := r.next()
	c.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		c.Close()
		return nil, fmt.Errorf("the tether daemon did not answer: %v", err)
	case m.Op == OpError:
		c.Close()
		return nil, fmt.Errorf("the tether daemon refused this session: %s", m.Message)
	case m.Op != OpAttached:
		c.Close()
		return nil, fmt.Errorf("the tether daemon answered %q", m.Op)
	}
	cc := &controlConn{conn: c, msgs: make(chan Msg, 4)}
	go func() {
		defer close(cc.msgs)
		for {
			m, err := r.next()
			if err != nil {
				return
			}
			cc.msgs <- m
		}
	}()
	return cc, nil
}

// wrapper is one `tether claude`.
type wrapper struct {
	o   Options
	id  string
	ctl *controlConn // nil once the daemon went away
	in  chan []byte  // the terminal's input, read once for all modes
	// raw and cooked switch the terminal's modes (no-ops when it is not
	// one).
	raw, cooked func()
	// redial delivers a new control connection once a daemon that went
	// away is back (redialing runs while the wrapper has none).
	redial chan *controlConn
}

func (w *wrapper) note(format string, args ...any) {
	tell(w.o.Stdout, "\r\n\x1b[2m── tether: "+format+" ──\x1b[0m\r\n", args...)
}

func (w *wrapper) run(ctx context.Context, args []string) int {
	if fd := int(w.o.Stdin.Fd()); term.IsTerminal(fd) {
		if state, err := term.MakeRaw(fd); err == nil {
			// A terminal whose mode cannot be set has nobody to tell
			// but itself: it stays as it is.
			w.cooked = func() { _ = term.Restore(fd, state) }
			w.raw = func() { _, _ = term.MakeRaw(fd) }
			defer w.cooked()
		}
	}
	w.in = make(chan []byte, 16)
	go func() {
		defer close(w.in)
		for {
			buf := make([]byte, 4096)
			n, err := w.o.Stdin.Read(buf)
			if n > 0 {
				w.in <- buf[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		if w.ctl != nil {
			w.ctl.conn.Close()
		}
	}()
	for {
		code, released, nonce := w.local(ctx, args)
		if !released {
			return code
		}
		w.remote(ctx, nonce)
		args = resumeArgs(w.o.Args, w.id)
	}
}

// local runs claude in a pseudo-terminal until it exits (its status) or
// the daemon asks for the session (released, with the bridge's nonce).
func (w *wrapper) local(ctx context.Context, args []string) (code int, released bool, nonce string) {
	cmd := exec.Command(w.o.Claude, args...)
	cmd.Dir = w.o.Dir
	ptmx, err := pty.Start(cmd)
	if err != nil {
		tell(w.o.Stderr, "tether: cannot start %s: %v\r\n", w.o.Claude, err)
		return 127, false, ""
	}
	defer ptmx.Close()
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	inheritSize(w.o.Stdin, ptmx)
	copied := make(chan struct{})
	go func() {
		// It ends when claude's side closes (an error, for a pty); a
		// failed write to the terminal has nobody to tell (see tell).
		_, _ = io.Copy(w.o.Stdout, ptmx)
		close(copied)
	}()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // its exit status is in cmd.ProcessState
		close(exited)
	}()
	var msgs chan Msg
	if w.ctl != nil {
		msgs = w.ctl.msgs
	}
	for {
		select {
		case c := <-w.redial:
			w.ctl, msgs = c, c.msgs
		case b, ok := <-w.in:
			if !ok {
				w.in = nil // no more input (not a terminal); claude goes on
				continue
			}
			// Ctrl-Z suspends claude when it runs alone; in its own
			// terminal session it cannot stop (an orphaned process group),
			// so tether claude stops instead, and fg brings it back.
			for {
				i := bytes.IndexByte(b, 0x1a)
				if i < 0 {
					break
				}
				// A write fails once claude has closed its side: it has
				// exited, which the loop then hears.
				_, _ = ptmx.Write(b[:i])
				w.suspend(cmd.Process, ptmx)
				b = b[i+1:]
			}
			_, _ = ptmx.Write(b) // as above
		case <-winch:
			inheritSize(w.o.Stdin, ptmx)
		case <-exited:
			// The rest of claude's output, unless something it left
			// behind holds the terminal open.
			select {
			case <-copied:
			case <-time.After(time.Second):
				ptmx.Close()
				<-copied
			}
			return exitStatus(cmd.ProcessState), false, ""
		case m, ok := <-msgs:
			if !ok {
				// The daemon went away: the terminal keeps its session, and
				// offers it again once a daemon is back.
				w.ctl, msgs = nil, nil
				w.startRedial()
				continue
			}
			if m.Op != OpRelease {
				continue
			}
			stop(cmd.Process, exited)
			ptmx.Close()
			<-copied
			return 0, true, m.Nonce
		case <-ctx.Done():
			// tether claude was told to end (SIGTERM, SIGINT): so is claude.
			stop(cmd.Process, exited)
			return 128 + int(syscall.SIGTERM), false, ""
		}
	}
}

// stop ends claude: SIGTERM, then SIGKILL after stopWait. A signal fails
// only once claude has exited, which exited then says.
func stop(claude *os.Process, exited <-chan struct{}) {
	_ = claude.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopWait):
		_ = claude.Kill()
		<-exited
	}
}

// inheritSize gives claude's pseudo-terminal the size of the user's
// terminal. One whose size cannot be read (not a terminal) leaves claude
// at the size it has.
func inheritSize(from, to *os.File) {
	_ = pty.InheritSize(from, to)
}

// conversationExists reports whether Claude Code has written the
// conversation id (its transcript, <config>/projects/*/<id>.jsonl): it
// does so on the first prompt, and --resume of an id without one fails.
func conversationExists(id string) bool {
	if !idPattern.MatchString(id) {
		return false
	}
	dir := os.Getenv("CLAUDE_CONFIG_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return true
		}
		dir = filepath.Join(home, ".claude")
	}
	m, _ := filepath.Glob(filepath.Join(dir, "projects", "*", id+".jsonl"))
	return len(m) > 0
}

// resetTerminal undoes what a claude stopped in its tracks may have left
// set: the alternate screen, a hidden cursor, bracketed paste, mouse
// reporting, the keyboard protocol, colours.
const resetTerminal = "\x1b[?1049l\x1b[?25h\x1b[?2004l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[<u\x1b[0m"

// remote runs the bridge for the phone until the daemon says the phone is
// done, or goes away.
func (w *wrapper) remote(ctx context.Context, nonce string) {
	_, _ = io.WriteString(w.o.Stdout, resetTerminal) // see tell
	w.note(Banner)
	conn, err := net.Dial("unix", w.o.Socket)
	if err == nil {
		err = write(conn, Msg{Op: OpHello, Role: RoleBridge, SessionID: w.id, Nonce: nonce})
	}
	if err != nil {
		w.note("the daemon went away: back to the terminal")
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// done closes when the bridge has ended, with its error in bridgeErr.
	var bridgeErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		bridgeErr = sandbox.RunBridge(ctx, sandbox.BridgeConfig{
			Conn: newShownConn(conn, w.o.Stdout), SandboxID: "terminal", Agent: "claude-code", AgentSessionID: w.id, WorkDir: w.o.Dir,
			Agents: map[string]sandbox.AgentFactory{"claude-code": func(a sandbox.AgentOptions) (agent.Agent, error) {
				opts := claude.Options{Bin: w.o.Claude, WorkDir: a.WorkDir, ResumeID: a.SessionID, Logger: slog.New(slog.DiscardHandler)}
				if !conversationExists(a.SessionID) {
					// Nobody has prompted the terminal's claude yet: there
					// is nothing to resume, and the phone's claude starts
					// the conversation under the terminal's id.
					opts.ResumeID, opts.NewSessionID = "", a.SessionID
				}
				return claude.New(opts)
			}},
		})
	}()
	asked, interrupted, ended := false, false, false
	var noReclaim <-chan time.Time
	for {
		select {
		case b, ok := <-w.in:
			if !ok {
				w.in = nil
			}
			if ok && !keyPress(b) {
				continue
			}
			switch {
			case w.ctl == nil:
			case !asked:
				asked = true
				w.note("taking the session back after the phone's turn (another key: at once)")
				w.askTakeback(false)
			case !interrupted:
				interrupted = true
				w.note("taking the session back now: the phone's turn is interrupted")
				w.askTakeback(true)
			}
		case <-noReclaim:
			// The bridge ended and the daemon did not say what next: the
			// terminal takes its session back.
			w.note("the phone's session ended: back to the terminal")
			return
		case m, ok := <-w.ctlMsgs():
			if !ok {
				w.ctl = nil
				w.startRedial()
				w.note("the daemon went away: back to the terminal")
				cancel()
				conn.Close()
				if !ended {
					<-done // cancelled: the end it reports is the one asked for
				}
				return
			}
			if m.Op == OpReclaim {
				cancel()
				if !ended {
					<-done // as above
				}
				return
			}
		case <-doneCh(done, ended):
			// The bridge ended before the daemon said so: the daemon will
			// say reclaim, or has gone.
			ended = true
			if bridgeErr != nil {
				w.note("the phone's session stopped: %v", bridgeErr)
			}
			noReclaim = time.After(reclaimWait)
		}
	}
}

// keyPress tells a key from what the terminal sends on its own: the
// answers to the queries the stopped claude made (device attributes,
// colours, cursor position) are escape sequences, as are the arrow and
// function keys, which are not taken for "any key".
func keyPress(b []byte) bool {
	return len(b) > 0 && (b[0] != 0x1b || len(b) == 1)
}

// doneCh is done until the bridge has ended, then nil (never ready).
func doneCh(done chan struct{}, ended bool) chan struct{} {
	if ended {
		return nil
	}
	return done
}

// reclaimWait is how long the terminal waits, after its bridge ended,
// for the daemon's reclaim before it takes its session back itself.
const reclaimWait = 5 * time.Second

// redialEvery is how often a wrapper without a daemon tries to reach one.
const redialEvery = 2 * time.Second

// startRedial tries, every redialEvery, to register the session with a
// daemon again, and delivers the connection on w.redial.
func (w *wrapper) startRedial() {
	go func() {
		tick := time.NewTicker(redialEvery)
		defer tick.Stop()
		for range tick.C {
			if c, err := dialControl(w.o.Socket, w.id, w.o.Dir); err == nil {
				w.redial <- c
				return
			}
		}
	}()
}

// askTakeback asks the daemon for the session back (at once with
// interrupt). A write that fails tells the user: the connection is broken,
// and its reader ends it.
func (w *wrapper) askTakeback(interrupt bool) {
	if err := write(w.ctl.conn, Msg{Op: OpTakeback, Interrupt: interrupt}); err != nil {
		w.note("the daemon did not hear it: %v", err)
	}
}

// ctlMsgs is the control connection's messages; nil (never ready) without
// one.
func (w *wrapper) ctlMsgs() chan Msg {
	if w.ctl == nil {
		return nil
	}
	return w.ctl.msgs
}

// suspend stops tether claude (Ctrl-Z), the terminal cooked, back at the
// shell; on fg the terminal is raw again and claude redraws.
func (w *wrapper) suspend(claude *os.Process, ptmx *os.File) {
	if w.cooked != nil {
		w.cooked()
	}
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	if err := syscall.Kill(os.Getpid(), syscall.SIGTSTP); err != nil {
		w.note("cannot suspend: %v", err)
	} else {
		<-cont // fg
	}
	if w.raw != nil {
		w.raw()
	}
	inheritSize(w.o.Stdin, ptmx)
	// It fails only once claude has exited, which the loop then hears.
	_ = claude.Signal(syscall.SIGWINCH)
}

// exitStatus is claude's exit status as a shell reports it.
func exitStatus(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}
