package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// errNotReady is returned when a started server does not accept an
// authenticated connection in time.
var errNotReady = errors.New("server did not become ready")

// A server is a target's server process that the load tool started.
type server struct {
	cmd *exec.Cmd
	// done is closed when the process has exited; exit is then its status.
	done chan struct{}
	exit error
}

// startServer runs command with sh -c (through exec, so that the process
// is the server itself and its PID is the server's), records the PID in
// c's target, and waits until the server accepts an authenticated
// connection. The server's stderr goes to stderr.
func startServer(ctx context.Context, c *client, command string, stderr io.Writer) (*server, error) {
	cmd := exec.Command("sh", "-c", "exec "+command)
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.target.Name, err)
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	go func() { s.exit = cmd.Wait(); close(s.done) }()
	c.target.PID = cmd.Process.Pid

	deadline := time.Now().Add(c.timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("start %s: exited: %w", c.target.Name, s.exit)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		conn, err := c.connect(ctx)
		if err == nil {
			err = c.close(conn)
		}
		if err == nil {
			return s, nil
		}
		if fatal(err) {
			s.stop()
			return nil, fmt.Errorf("start %s: %w", c.target.Name, err)
		}
		lastErr = err
	}
	s.stop()
	return nil, fmt.Errorf("%w: %s: %w", errNotReady, c.target.Name, lastErr)
}

// stop ends the server with SIGTERM, and SIGKILL if it is still there
// after five seconds. The exit status is not an error: a server killed by
// a signal has done what was asked.
func (s *server) stop() {
	// A signal fails only when the server has exited already: done then.
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}
