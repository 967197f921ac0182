// Package control is the daemon's local control socket: a Unix socket in
// the data directory through which tether's own commands tell the running
// daemon what they changed in the store (`tether devices revoke` and
// `rename`), so that the daemon acts at once instead of polling the store.
//
// One request a connection: a JSON object on one line, answered by one
// line. Only processes of the daemon's own user reach the socket (0600 in
// a 0700 directory, and the peer's uid is checked); even so a request is
// only a hint: it names what to read again from the store, never what the
// store says.
package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/tetherdev/tether/internal/peercred"
)

// SocketName is the control socket's name in the data directory.
const SocketName = "control.sock"

// OpDeviceChanged asks the daemon to read a device again from the store:
// it was revoked or renamed.
const OpDeviceChanged = "device_changed"

const (
	// maxRequest bounds a request line, newline included.
	maxRequest = 512
	// maxDeviceID bounds a device id (tether's are "dev_" and 26 more).
	maxDeviceID = 64
	// ioWait bounds how long one request may take to arrive and be
	// answered, on either side.
	ioWait = 5 * time.Second
)

// ErrNoDaemon is returned by Send when no daemon serves the data
// directory: no socket, or a stale one nothing listens on.
var ErrNoDaemon = errors.New("no daemon is running on this data directory")

// A Request is one command to the daemon.
type Request struct {
	Op     string `json:"op"`
	Device string `json:"device"`
}

// reply is the daemon's answer to a request.
type reply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Decode parses one request line (without its newline). It accepts
// exactly one JSON object with the fields of Request, a known op and a
// well-formed device id; anything else is an error.
func Decode(line []byte) (Request, error) {
	if len(line) >= maxRequest {
		return Request{}, errors.New("control: request too long")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var r Request
	if err := dec.Decode(&r); err != nil {
		return Request{}, fmt.Errorf("control: malformed request: %w", err)
	}
	if dec.More() {
		return Request{}, errors.New("control: malformed request: data after the object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return Request{}, errors.New("control: malformed request: data after the object")
	}
	if r.Op != OpDeviceChanged {
		return Request{}, fmt.Errorf("control: unknown op %q", r.Op)
	}
	if !validDeviceID(r.Device) {
		return Request{}, errors.New("control: malformed device id")
	}
	return r, nil
}

// validDeviceID reports whether id looks like a device id: 1 to
// maxDeviceID letters, digits, '_' or '-'.
func validDeviceID(id string) bool {
	if id == "" || len(id) > maxDeviceID {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Listen makes the control socket in dir (which the caller keeps 0700)
// with mode 0600. A socket left by a daemon that ended without removing
// it is replaced; one that a running daemon answers on is not.
func Listen(dir string) (net.Listener, error) {
	path := filepath.Join(dir, SocketName)
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("control: another daemon serves %s", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("control: %w", err)
	}
	// The socket is made with the umask's mode and chmod-ed after: the
	// directory's 0700 keeps others out in between.
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control: %w", err)
	}
	return ln, nil
}

// A Server answers requests on the control socket.
type Server struct {
	// Handle carries out a decoded request; its error is sent back.
	Handle func(context.Context, Request) error
	// Logger receives refused requests; never secrets.
	Logger *slog.Logger

	mu     sync.Mutex
	ln     net.Listener
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// Serve accepts connections on ln until Close; it returns nil after Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.ln = ln
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mu.Unlock()
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// Out of file descriptors is passing: wait, as net/http does,
			// rather than leave the daemon deaf to revocations.
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.Logger.Warn("control socket: accept", "err", err, "retry_in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.wg.Go(func() { s.serveConn(c) })
	}
}

// Close stops accepting, ends requests in progress and removes nothing:
// the caller owns the socket file.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	ln, cancel := s.ln, s.cancel
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
		cancel()
	}
	s.wg.Wait()
}

func (s *Server) serveConn(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioWait))
	// The socket's mode already keeps other users out; this holds even
	// if the mode or the directory's were changed.
	if err := peercred.SameUser(c); err != nil {
		s.Logger.Warn("control socket: refused", "err", err)
		return
	}
	line, err := bufio.NewReaderSize(io.LimitReader(c, maxRequest), maxRequest).ReadSlice('\n')
	if err != nil {
		s.answer(c, fmt.Errorf("control: a request is one line of at most %d bytes", maxRequest-1))
		return
	}
	r, err := Decode(bytes.TrimSuffix(line, []byte("\n")))
	if err == nil {
		err = s.Handle(s.ctx, r)
	}
	if err != nil {
		s.Logger.Warn("control socket: request failed", "err", err)
	}
	s.answer(c, err)
}

func (s *Server) answer(c net.Conn, err error) {
	r := reply{OK: err == nil}
	if err != nil {
		r.Error = err.Error()
	}
	b, _ := json.Marshal(r) // a struct of a bool and a string always encodes
	if _, err := c.Write(append(b, '\n')); err != nil {
		s.Logger.Warn("control socket: the answer was not written", "err", err)
	}
}

// Send tells the daemon serving dir about r and waits for its answer. It
// returns ErrNoDaemon when none runs; an error the daemon answered comes
// back as an error.
func Send(ctx context.Context, dir string, r Request) error {
	if _, err := Decode(mustJSON(r)); err != nil {
		return err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", filepath.Join(dir, SocketName))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return ErrNoDaemon
	}
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	defer c.Close()
	deadline := time.Now().Add(ioWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	if _, err := c.Write(append(mustJSON(r), '\n')); err != nil {
		return fmt.Errorf("control: %w", err)
	}
	line, err := bufio.NewReader(io.LimitReader(c, 4096)).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("control: no answer from the daemon: %w", err)
	}
	var rep reply
	if err := json.Unmarshal(line, &rep); err != nil {
		return fmt.Errorf("control: malformed answer: %w", err)
	}
	if !rep.OK {
		return fmt.Errorf("the daemon refused: %s", rep.Error)
	}
	return nil
}

func mustJSON(r Request) []byte {
	b, _ := json.Marshal(r)
	return b
}
