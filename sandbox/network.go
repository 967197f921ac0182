package sandbox

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/tetherdev/tether/sandbox/egress"
)

// EnvEgressFD is an inherited file descriptor of a Unix socket pair on
// which the bridge sends the daemon the listening socket of its egress
// proxy, made inside the sandbox's network namespace (set when the sandbox
// has Egress).
const EnvEgressFD = "TETHER_SANDBOX_EGRESS_FD"

// ProxyAddr is where the egress proxy listens inside a sandbox: on its own
// loopback, which nothing else shares.
const ProxyAddr = "127.0.0.1:3128"

// proxyEnv points an agent's HTTP clients at the egress proxy, and keeps
// Claude Code from reaching for anything but its API.
func proxyEnv() []string {
	u := "http://" + ProxyAddr
	return []string{
		"HTTPS_PROXY=" + u, "HTTP_PROXY=" + u, "https_proxy=" + u, "http_proxy=" + u,
		"NO_PROXY=", "no_proxy=",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
	}
}

// egressPair makes the socket pair the bridge hands its proxy listener
// over: the daemon's end, and the file the bridge inherits.
func egressPair() (*net.UnixConn, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: egress socket pair: %w", err)
	}
	own := os.NewFile(uintptr(fds[0]), "egress")
	defer own.Close()
	c, err := net.FileConn(own)
	if err != nil {
		_ = syscall.Close(fds[1]) // never used: closing it has nothing to report
		return nil, nil, fmt.Errorf("sandbox: egress socket pair: %w", err)
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "egress-child"), nil
}

// serveEgress receives the proxy's listening socket from the bridge and
// serves spec.Egress on it until the sandbox ends.
func (s *Sandbox) serveEgress(c *net.UnixConn, spec Spec) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(spec.ReadyTimeout))
	oob := make([]byte, syscall.CmsgSpace(4))
	_, oobn, _, _, err := c.ReadMsgUnix(make([]byte, 1), oob)
	if err != nil {
		s.warn("the sandbox's egress proxy did not start: its agent reaches no network", "err", err)
		return
	}
	ln, err := listenerFromRights(oob[:oobn])
	if err != nil {
		s.warn("the sandbox's egress proxy did not start: its agent reaches no network", "err", err)
		return
	}
	s.proxyEgress(ln, spec.Egress)
}

// proxyEgress serves the destinations allow on the proxy's listening
// socket until the sandbox ends or the daemon detaches from it.
func (s *Sandbox) proxyEgress(ln net.Listener, allow []string) {
	s.connMu.Lock()
	s.egressLn = ln
	s.connMu.Unlock()
	go func() {
		<-s.done
		ln.Close()
	}()
	p := &egress.Proxy{Allow: allow, Logger: s.log}
	if err := p.Serve(ln); err != nil && !s.detached.Load() {
		s.log.Warn("egress proxy", "err", err)
	}
}

// listenerFromRights is the listener whose descriptor a control message
// carries.
func listenerFromRights(oob []byte) (net.Listener, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("sandbox: egress: no descriptor from the bridge (%v)", err)
	}
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, fmt.Errorf("sandbox: egress: no descriptor from the bridge (%v)", err)
	}
	f := os.NewFile(uintptr(fds[0]), "egress-listener")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("sandbox: egress: %w", err)
	}
	return ln, nil
}

// sendEgressListener is the bridge's side: it listens on ProxyAddr inside
// the sandbox's network namespace and sends the socket to the daemon over
// the inherited pair, which it then closes. With keep it returns the
// socket, for each daemon that adopts the bridge later (sent with its
// "ready"), else nil.
func sendEgressListener(pair *os.File, keep bool) (*os.File, error) {
	defer pair.Close()
	ln, err := net.Listen("tcp", ProxyAddr)
	if err != nil {
		return nil, fmt.Errorf("sandbox: egress listen: %w", err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return nil, fmt.Errorf("sandbox: egress listen: %w", err)
	}
	c, err := net.FileConn(pair)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: egress: %w", err)
	}
	defer c.Close()
	_, _, err = c.(*net.UnixConn).WriteMsgUnix([]byte{'E'}, syscall.UnixRights(int(f.Fd())), nil)
	if err != nil || !keep {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("sandbox: egress: %w", err)
		}
		return nil, nil
	}
	return f, nil
}
