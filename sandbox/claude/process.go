package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tetherdev/tether/sandbox/agent"
)

// drainDelay is how long the reader goes on after the CLI exited, for lines
// still in the pipe, before it gives up on children holding the pipe open.
const drainDelay = time.Second

// process is one running CLI.
type process struct {
	cmd *exec.Cmd
	log *slog.Logger

	wmu   sync.Mutex
	stdin io.WriteCloser

	// lines carries the CLI's output lines; it is closed when the output
	// ends, which is at the latest drainDelay after the process exited.
	lines chan []byte
	// quit, once closed, makes the reader drop lines instead of blocking.
	quit     chan struct{}
	quitOnce sync.Once
	// done is closed once the process has been reaped; err is then Wait's
	// result.
	done chan struct{}
	err  error
}

// args returns the CLI's command line arguments.
func args(opts Options, s agent.Settings, resumeID string) []string {
	a := []string{
		"-p",
		"--input-format", "stream-json",
		"--output-format", "stream-json",
		"--verbose",
		"--permission-prompt-tool", "stdio",
		"--include-partial-messages",
	}
	if s.Model != "" {
		a = append(a, "--model", s.Model)
	}
	if s.PermissionMode != "" {
		a = append(a, "--permission-mode", s.PermissionMode)
	}
	if opts.MCPConfig != "" {
		a = append(a, "--mcp-config", opts.MCPConfig)
	}
	if len(opts.AllowedTools) > 0 {
		a = append(a, "--allowedTools", strings.Join(opts.AllowedTools, ","))
	}
	if resumeID != "" {
		a = append(a, "--resume", resumeID)
	} else if opts.NewSessionID != "" {
		a = append(a, "--session-id", opts.NewSessionID)
	}
	return a
}

// startProcess starts the CLI in a process group of its own, so that the
// tools it runs can be signalled with it.
func startProcess(opts Options, s agent.Settings, resumeID string, log *slog.Logger) (*process, error) {
	cmd := exec.Command(opts.Bin, args(opts, s, resumeID)...)
	cmd.Dir = opts.WorkDir
	cmd.Env = opts.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = drainDelay
	stderr := &lineLogger{log: log}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("claude: stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = stdin.Close() // never written: closing it has nothing to report
		return nil, fmt.Errorf("claude: stdout pipe: %w", err)
	}
	cmd.Stdout = outW
	if err := cmd.Start(); err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("claude: start %s: %w", opts.Bin, err)
	}
	outW.Close()
	log.Debug("claude: started CLI", "pid", cmd.Process.Pid, "resume", resumeID)
	p := &process{
		cmd:   cmd,
		log:   log,
		stdin: stdin,
		lines: make(chan []byte, 64),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go p.read(outR)
	go func() {
		p.err = cmd.Wait()
		stderr.flush()
		close(p.done)
		// Children of the CLI may still hold its output open: stop
		// reading after a while so that the turn learns of the exit.
		time.AfterFunc(drainDelay, func() { outR.Close() })
	}()
	return p, nil
}

// read passes the CLI's output lines on until the output ends. Lines can be
// long (file contents, tool inputs), so they are read whole with no limit.
func (p *process) read(r io.ReadCloser) {
	defer close(p.lines)
	defer r.Close()
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			select {
			case p.lines <- line:
			case <-p.quit:
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				p.log.Warn("claude: reading CLI output", "err", err)
			}
			return
		}
	}
}

// send writes v as one JSON line to the CLI's input.
func (p *process) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
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

// waitErr returns how the process ended; call it after done is closed.
func (p *process) waitErr() error {
	<-p.done
	return p.err
}

// stop ends the process: it closes the CLI's input and waits up to grace
// for it to exit, then sends SIGTERM to its process group and waits again,
// then SIGKILL. It returns once the process is reaped.
func (p *process) stop(grace time.Duration) error {
	p.quitOnce.Do(func() { close(p.quit) })
	p.wmu.Lock()
	err := p.stdin.Close()
	p.wmu.Unlock()
	if err != nil && !errors.Is(err, os.ErrClosed) {
		p.log.Debug("claude: closing CLI input", "err", err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-p.done:
			return nil
		case <-time.After(grace):
		}
		if err := p.signal(sig); err != nil {
			return err
		}
	}
	<-p.done
	return nil
}

// kill ends the process at once with SIGKILL to its process group and waits
// until it is reaped.
func (p *process) kill() error {
	p.quitOnce.Do(func() { close(p.quit) })
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.done
	return nil
}

// signal sends sig to the CLI's process group unless the CLI is already
// reaped.
func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return nil
	}
	p.log.Debug("claude: signalling CLI", "pid", p.cmd.Process.Pid, "signal", sig)
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("claude: signal %v: %w", sig, err)
	}
	return nil
}

// lineLogger logs what the CLI writes to its standard error, a line a record.
// exec's copying goroutine is its only writer.
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
		l.log.Info("claude: stderr", "line", string(line))
	}
}
