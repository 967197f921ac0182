package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetherdev/tether/certs"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/tailnet"
)

// listenTailnet is the --listen host that means the tailnet addresses
// tailscaled reports, plus loopback.
const listenTailnet = "tailnet"

// listenAuto, the default --listen host, is where a phone can reach the
// daemon: listenTailnet when tailscaled is connected, else every address
// of the machine. Connection modes still decide who is served.
const listenAuto = "auto"

// netSetup is what validate derives from the connection-mode flags and
// tailscaled's state.
type netSetup struct {
	proxies []netip.Prefix
	// hooksFrom are the peers the hook endpoint answers besides loopback.
	hooksFrom []netip.Prefix
	allowed   []string // nil: every mode
	ts        *tailnet.Client
	// asked is true when tailscaled was asked for its state; state and
	// stateErr are its answer.
	asked    bool
	state    tailnet.State
	stateErr error
	// tlsWhy says why --tls auto chose what it chose.
	tlsWhy string
	// binds are the addresses to listen on, the advertised one first.
	binds []string
	// listenWhy says what --listen auto chose and why.
	listenWhy string
}

// resolveNet parses --trusted-proxy and --allow-modes, asks tailscaled
// when --tls or --listen need it, resolves --tls auto and the addresses
// to bind.
func (c *config) resolveNet() error {
	n := &c.net
	n.proxies = nil
	for _, p := range c.TrustedProxies {
		pfx, err := parsePrefix(p)
		if err != nil {
			return fmt.Errorf("--trusted-proxy %q: %w", p, err)
		}
		n.proxies = append(n.proxies, pfx)
	}
	n.hooksFrom = nil
	for _, p := range c.HooksFrom {
		pfx, err := parsePrefix(p)
		if err != nil {
			return fmt.Errorf("--hooks-from %q: %w", p, err)
		}
		n.hooksFrom = append(n.hooksFrom, pfx)
	}
	n.allowed = nil
	for _, m := range c.AllowModes {
		if !slices.Contains(pairing.Modes, m) {
			return fmt.Errorf("--allow-modes: %q is not one of %s", m, strings.Join(pairing.Modes, ", "))
		}
		n.allowed = append(n.allowed, m)
	}
	n.ts = tailnet.New(c.TailscaleSocket)
	host, port, _ := net.SplitHostPort(c.Listen)
	if c.TLS == tlsAuto || c.TLS == tlsTailscale || host == listenTailnet || host == listenAuto {
		n.askTailscaled()
	}
	if host == listenAuto {
		host = n.autoListen()
		c.Listen = net.JoinHostPort(host, port)
	}
	n.binds = []string{c.Listen}
	if host == listenTailnet {
		if n.stateErr != nil {
			return fmt.Errorf("--listen tailnet: %w", n.stateErr)
		}
		n.binds = nil
		for _, a := range n.state.Addrs {
			n.binds = append(n.binds, net.JoinHostPort(a.String(), port))
		}
		if len(n.binds) == 0 {
			return errors.New("--listen tailnet: tailscaled reports no tailnet address")
		}
		n.binds = append(n.binds, net.JoinHostPort("127.0.0.1", port))
	}
	certName := n.state.CertName()
	switch c.TLS {
	case tlsTailscale:
		if n.stateErr != nil {
			return fmt.Errorf("--tls tailscale: %w", n.stateErr)
		}
		if certName == "" {
			return fmt.Errorf("--tls tailscale: %w (enable HTTPS certificates and MagicDNS in the tailnet's admin console)", tailnet.ErrNoCertificate)
		}
	case tlsAuto:
		switch {
		case errors.Is(n.stateErr, tailnet.ErrNotRunning):
			c.TLS, n.tlsWhy = tlsSelfSigned, "tailscaled is not connected to a tailnet"
		case n.stateErr != nil:
			c.TLS, n.tlsWhy = tlsSelfSigned, "tailscaled is not reachable"
		case certName == "":
			c.TLS, n.tlsWhy = tlsSelfSigned, "the tailnet offers no HTTPS certificate for this machine"
		case !n.tailnetReachable(host):
			c.TLS, n.tlsWhy = tlsSelfSigned, "--listen "+c.Listen+" is not reachable from the tailnet"
		default:
			c.TLS, n.tlsWhy = tlsTailscale, "tailscaled offers a certificate for "+certName
		}
	}
	return nil
}

// autoListen resolves --listen auto to the host to listen on: the tailnet
// when tailscaled is connected, else every address (the empty host).
func (n *netSetup) autoListen() string {
	switch {
	case n.stateErr == nil && len(n.state.Addrs) > 0:
		n.listenWhy = "tailscaled is connected: the tailnet addresses and loopback"
		return listenTailnet
	case errors.Is(n.stateErr, tailnet.ErrNotRunning):
		n.listenWhy = "tailscaled is not connected to a tailnet: every address of this machine"
	case n.stateErr != nil:
		n.listenWhy = "no tailnet (tailscaled is not reachable): every address of this machine"
	default:
		n.listenWhy = "tailscaled reports no tailnet address: every address of this machine"
	}
	return ""
}

func (n *netSetup) askTailscaled() {
	ctx, cancel := context.WithTimeout(context.Background(), tailnet.DefaultTimeout)
	defer cancel()
	n.asked = true
	n.state, n.stateErr = n.ts.State(ctx)
}

// tailnetReachable reports whether listening on host serves the tailnet.
func (n *netSetup) tailnetReachable(host string) bool {
	if host == listenTailnet || host == "" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && (a.IsUnspecified() || slices.Contains(n.state.Addrs, a.Unmap()))
}

// parsePrefix reads a CIDR or a bare address (a /32 or /128).
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// classifier is the bridge's connection classifier for cfg.
func (c *config) classifier() *pairing.Classifier {
	cl := &pairing.Classifier{TrustedProxies: c.net.proxies, Allowed: c.net.allowed}
	if c.net.ts != nil {
		cl.Tailnet = c.net.ts
	}
	return cl
}

// tlsServing is the TLS the daemon serves.
type tlsServing struct {
	config *tls.Config // nil when TLS is off
	leaf   func() *x509.Certificate
	fp     string // the fingerprint phones pin; self-signed only
	// ca is the local certificate authority phones install (--tls
	// local-ca); nil otherwise.
	ca *x509.Certificate
}

// serverTLS loads or fetches the certificate cfg.TLS names.
func serverTLS(ctx context.Context, cfg *config, logger *slog.Logger, now time.Time) (*tlsServing, error) {
	if cfg.TLS == tlsTailscale {
		r, err := certs.NewRenewing(ctx, cfg.net.ts, cfg.net.state.CertName(), logger, nil)
		if err != nil {
			return nil, err
		}
		return &tlsServing{
			config: &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12},
			leaf:   r.Leaf,
		}, nil
	}
	if cfg.TLS == tlsLocalCA {
		ca, err := localCA(cfg, now)
		if err != nil {
			return nil, err
		}
		return &tlsServing{
			config: &tls.Config{Certificates: []tls.Certificate{ca.Serving.TLS}, MinVersion: tls.VersionTLS12},
			leaf:   func() *x509.Certificate { return ca.Serving.Leaf },
			ca:     ca.CA,
		}, nil
	}
	cert, err := loadCert(cfg, now)
	if err != nil || cert == nil {
		return &tlsServing{leaf: func() *x509.Certificate { return nil }}, err
	}
	return &tlsServing{
		config: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12},
		leaf:   func() *x509.Certificate { return cert.Leaf },
		fp:     fingerprint(cert),
	}, nil
}

// listenAll listens on every address of binds; the first decides the port
// of the others when it is 0.
func listenAll(binds []string) (net.Listener, error) {
	first, err := net.Listen("tcp", binds[0])
	if err != nil {
		return nil, err
	}
	if len(binds) == 1 {
		return first, nil
	}
	_, port, _ := net.SplitHostPort(first.Addr().String())
	lns := []net.Listener{first}
	for _, b := range binds[1:] {
		host, _, _ := net.SplitHostPort(b)
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, err
		}
		lns = append(lns, ln)
	}
	return newMultiListener(lns), nil
}

// multiListener accepts from several listeners as one; its Addr is the
// first's.
type multiListener struct {
	lns    []net.Listener
	conns  chan net.Conn
	errc   chan error
	closed chan struct{}
	once   sync.Once
}

func newMultiListener(lns []net.Listener) *multiListener {
	m := &multiListener{lns: lns, conns: make(chan net.Conn), errc: make(chan error, len(lns)), closed: make(chan struct{})}
	for _, ln := range lns {
		go m.accept(ln)
	}
	return m
}

func (m *multiListener) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			m.errc <- err
			return
		}
		select {
		case m.conns <- c:
		case <-m.closed:
			c.Close()
			return
		}
	}
}

func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case err := <-m.errc:
		return nil, err
	case <-m.closed:
		return nil, net.ErrClosed
	}
}

func (m *multiListener) Close() error {
	var errs []error
	m.once.Do(func() {
		close(m.closed)
		for _, ln := range m.lns {
			errs = append(errs, ln.Close())
		}
	})
	return errors.Join(errs...)
}

func (m *multiListener) Addr() net.Addr { return m.lns[0].Addr() }
