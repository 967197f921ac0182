package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// drainDelay is how long the reader goes on after the app-server exited,
// for lines still in the pipe, before it gives up on children holding the
// pipe open.
const drainDelay = time.Second

// process is one running `codex app-server`, spoken to in JSON-RPC over
// its standard input and output.
type process struct {
	cmd *exec.Cmd
	log *slog.Logger
	// keep are command lines of children that outlive a turn (MCP servers),
	// which killChildren spares.
	keep [][]string

	wmu   sync.Mutex
	stdin io.WriteCloser

	ids atomic.Uint64

	mu    sync.Mutex
	calls map[uint64]chan message // the adapter's requests waiting for their response
	queue []message               // the server's requests and notifications not taken yet
	// ready gets a token whenever queue grows.
	ready chan struct{}

	// done is closed once the process has been reaped; err is then Wait's
	// result. gone is closed when its output has ended.
	done chan struct{}
	err  error
	gone chan struct{}
}

// startProcess starts `codex app-server` with the configuration overrides
// in opts, in a process group of its own.
func startProcess(opts Options, log *slog.Logger) (*process, error) {
	args := []string{"app-server"}
	for _, c := range opts.Config {
		args = append(args, "-c", c)
	}
	cmd := exec.Command(opts.Bin, args...)
	cmd.Dir = opts.WorkDir
	cmd.Env = opts.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = drainDelay
	stderr := &lineLogger{log: log}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("codex: stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = stdin.Close() // never written: closing it has nothing to report
		return nil, fmt.Errorf("codex: stdout pipe: %w", err)
	}
	cmd.Stdout = outW
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("codex: start %s: %w", opts.Bin, err)
	}
	outW.Close()
	log.Debug("codex: started app-server", "pid", cmd.Process.Pid)
	p := &process{
		cmd:   cmd,
		log:   log,
		keep:  opts.keep,
		stdin: stdin,
		calls: map[uint64]chan message{},
		ready: make(chan struct{}, 1),
		done:  make(chan struct{}),
		gone:  make(chan struct{}),
	}
	go p.read(outR)
	go func() {
		p.err = cmd.Wait()
		stderr.flush()
		close(p.done)
		time.AfterFunc(drainDelay, func() { outR.Close() })
	}()
	return p, nil
}

// read dispatches the app-server's lines: responses to the calls waiting
// for them, everything else to the queue.
func (p *process) read(r io.ReadCloser) {
	defer close(p.gone)
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			p.dispatch(line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				p.log.Warn("codex: reading app-server output", "err", err)
			}
			p.mu.Lock()
			for id, ch := range p.calls {
				close(ch)
				delete(p.calls, id)
			}
			p.mu.Unlock()
			return
		}
	}
}

func (p *process) dispatch(line []byte) {
	m, err := decodeMessage(line)
	if err != nil {
		p.log.Warn("codex: dropping app-server line", "err", err, "line", truncate(line, 200))
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if m.isResponse() {
		id, err := strconv.ParseUint(string(m.ID), 10, 64)
		ch := p.calls[id]
		if err != nil || ch == nil {
			p.log.Debug("codex: response to no request", "id", string(m.ID))
			return
		}
		delete(p.calls, id)
		ch <- m
		return
	}
	p.queue = append(p.queue, m)
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

// take returns the queued messages and empties the queue.
func (p *process) take() []message {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	p.queue = nil
	return q
}

// call sends a request and waits for its response, ctx's end or the
// process's.
func (p *process) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := p.ids.Add(1)
	ch := make(chan message, 1)
	p.mu.Lock()
	p.calls[id] = ch
	p.mu.Unlock()
	if err := p.send(request{ID: &id, Method: method, Params: params}); err != nil {
		p.forget(id)
		return nil, err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%w during %s", ErrExited, method)
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %w", method, m.Error)
		}
		return m.Result, nil
	case <-ctx.Done():
		p.forget(id)
		return nil, ctx.Err()
	}
}

func (p *process) forget(id uint64) {
	p.mu.Lock()
	delete(p.calls, id)
	p.mu.Unlock()
}

// send writes v as one JSON line to the app-server's input.
func (p *process) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("codex: encode: %w", err)
	}
	b = append(b, '\n')
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if _, err := p.stdin.Write(b); err != nil {
		return fmt.Errorf("%w: %w", ErrExited, err)
	}
	return nil
}

// exited tells whether the process has been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop ends the process: it kills the commands still running, closes its
// input and waits up to grace for it to exit, then sends SIGTERM to its
// process group and waits again, then SIGKILL. It returns once the process is reaped.
func (p *process) stop(grace time.Duration) {
	p.killChildren()
	p.wmu.Lock()
	// Its end of input: a pipe already broken fails this, and the
	// signals below end the process either way.
	_ = p.stdin.Close()
	p.wmu.Unlock()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
		p.signal(sig)
	}
	<-p.done
}

// signal sends sig to the app-server's process group unless it is reaped.
func (p *process) signal(sig syscall.Signal) {
	if p.exited() {
		return
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		p.log.Warn("codex: signalling app-server", "signal", sig, "err", err)
	}
}

// killChildren kills, with their process groups, the processes the
// app-server started and that still run: the commands of an interrupted
// turn, which Codex leaves running (docs/codex-observed.md). The MCP
// servers it runs for the thread (p.keep) are spared. It reports how many
// it killed.
func (p *process) killChildren() int {
	n := 0
	for _, pid := range descendants(p.cmd.Process.Pid) {
		if p.kept(pid) {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
			// A group that is gone since the listing fails this, with
			// nothing left to kill.
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// kept tells whether pid runs one of the command lines of p.keep.
func (p *process) kept(pid int) bool {
	if len(p.keep) == 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	for _, k := range p.keep {
		if slices.Equal(args, k) {
			return true
		}
	}
	return false
}

// descendants lists the processes below pid, read from /proc: a process's
// children, theirs, and so on.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := map[int]int{}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces and parentheses: the fields
		// after it follow the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			parent[child] = pp
		}
	}
	var out []int
	for child := range parent {
		for a, hops := parent[child], 0; a != 0 && hops < 64; a, hops = parent[a], hops+1 {
			if a == pid {
				out = append(out, child)
				break
			}
		}
	}
	return out
}

// lineLogger logs what the app-server writes to its standard error, a
// line a record. exec's copying goroutine is its only writer.
type lineLogger struct {
	log *slog.Logger
	buf []byte
}

func (l *lineLogger) Write(b []byte) (int, error) {
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	return len(b), nil
}

func (l *lineLogger) flush() {
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

func (l *lineLogger) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) > 0 {
		l.log.Info("codex: stderr", "line", string(line))
	}
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}
