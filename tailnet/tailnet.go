// Package tailnet is tether's access to the local tailscaled through its
// LocalAPI socket: who a peer is (WhoIs), the state of this node (running,
// tailnet name, MagicDNS name, addresses, certificate domains) and the
// tailnet's TLS certificate for this node's MagicDNS name.
package tailnet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"tailscale.com/client/local"
	"tailscale.com/paths"
)

// ErrUnknownPeer is returned by WhoIs for an address tailscaled does not
// know as a tailnet peer.
var ErrUnknownPeer = errors.New("tailnet: not a peer known to tailscaled")

// ErrNotRunning is returned by State when tailscaled answers but is not
// connected to a tailnet (logged out, stopped, starting).
var ErrNotRunning = errors.New("tailnet: tailscaled is not running")

// ErrNoCertificate is returned when the tailnet offers no HTTPS
// certificate for this node (HTTPS disabled in the tailnet, or no MagicDNS
// name).
var ErrNoCertificate = errors.New("tailnet: no HTTPS certificate available for this node")

// DefaultTimeout bounds each LocalAPI call that has no deadline of its
// own.
const DefaultTimeout = 3 * time.Second

// Peer is a tailnet node as tailscaled knows it.
type Peer struct {
	// User is the login name of the node's owner (alice@example.com), or
	// its tags when the node is tagged.
	User string
	// Node is the node's MagicDNS name without the trailing dot, or its
	// host name when it has none.
	Node string
	// Addr is the node's own tailnet address (its IPv4 one when it has
	// one): the address to key it by, since with userspace networking its
	// connections arrive from 127.0.0.1.
	Addr netip.Addr
}

// State is this node's standing in its tailnet.
type State struct {
	// Backend is tailscaled's backend state ("Running", "NeedsLogin", …).
	Backend string
	// Tailnet is the tailnet's name.
	Tailnet string
	// DNSName is this node's MagicDNS name without the trailing dot; empty
	// without MagicDNS.
	DNSName string
	// Addrs are this node's tailnet addresses.
	Addrs []netip.Addr
	// CertDomains are the names the tailnet can issue certificates for;
	// empty when HTTPS certificates are not enabled.
	CertDomains []string
	// TUN is false when tailscaled runs in userspace-networking mode.
	TUN bool
}

// Running reports whether the node is connected to its tailnet.
func (s State) Running() bool { return s.Backend == "Running" }

// CertName is the name a tailnet certificate can be served for: the
// MagicDNS name when the tailnet issues certificates for it, else "".
func (s State) CertName() string {
	for _, d := range s.CertDomains {
		if strings.EqualFold(strings.TrimSuffix(d, "."), s.DNSName) && s.DNSName != "" {
			return s.DNSName
		}
	}
	return ""
}

// Client talks to one tailscaled over its LocalAPI socket. The zero value
// is not usable: build one with New.
type Client struct {
	lc      *local.Client
	timeout time.Duration
}

// New returns a client of the tailscaled listening on socket; an empty
// socket means the platform's default. It dials the socket itself: the
// library's own dialer keeps retrying for the first seconds of a process,
// which would delay every start on a machine without tailscaled, and a
// dial error it sees as such is decorated with a hint that costs
// milliseconds to work out, on every connection.
func New(socket string) *Client {
	if socket == "" {
		socket = DefaultSocket()
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", socket)
		if err != nil {
			return nil, &dialError{err}
		}
		return c, nil
	}
	return &Client{lc: &local.Client{Socket: socket, UseSocketOnly: true, Dial: dial}, timeout: DefaultTimeout}
}

// dialError is a failed dial of the LocalAPI socket.
type dialError struct{ err error }

func (e *dialError) Error() string { return "tailscaled is not reachable: " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// DefaultSocket is the platform's tailscaled LocalAPI socket.
func DefaultSocket() string { return paths.DefaultTailscaledSocket() }

func (c *Client) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}

// WhoIs names the tailnet user and node behind addr ("ip:port" or "ip").
// It returns ErrUnknownPeer when tailscaled does not know the address, and
// another error when tailscaled cannot be asked.
func (c *Client) WhoIs(ctx context.Context, addr string) (Peer, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	res, err := c.lc.WhoIs(ctx, addr)
	if errors.Is(err, local.ErrPeerNotFound) {
		return Peer{}, ErrUnknownPeer
	}
	if err != nil {
		return Peer{}, fmt.Errorf("tailnet: whois %s: %w", addr, err)
	}
	if res == nil || res.Node == nil {
		return Peer{}, ErrUnknownPeer
	}
	p := Peer{Node: strings.TrimSuffix(res.Node.Name, ".")}
	if p.Node == "" {
		p.Node = res.Node.ComputedName
	}
	for _, a := range res.Node.Addresses {
		if !p.Addr.IsValid() || (a.Addr().Is4() && !p.Addr.Is4()) {
			p.Addr = a.Addr()
		}
	}
	if res.UserProfile != nil {
		p.User = res.UserProfile.LoginName
	}
	if len(res.Node.Tags) > 0 {
		p.User = strings.Join(res.Node.Tags, ",")
	}
	return p, nil
}

// State reports this node's state. A tailscaled that cannot be reached is
// an error; one that answers but is not connected returns its state with
// ErrNotRunning.
func (c *Client) State(ctx context.Context) (State, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	st, err := c.lc.StatusWithoutPeers(ctx)
	if err != nil {
		return State{}, fmt.Errorf("tailnet: status: %w", err)
	}
	s := State{Backend: st.BackendState, Addrs: st.TailscaleIPs, CertDomains: st.CertDomains, TUN: st.TUN}
	if st.CurrentTailnet != nil {
		s.Tailnet = st.CurrentTailnet.Name
	}
	if st.Self != nil {
		s.DNSName = strings.TrimSuffix(st.Self.DNSName, ".")
	}
	if !s.Running() {
		return s, ErrNotRunning
	}
	return s, nil
}

// Certificate fetches the tailnet's certificate for name (this node's
// MagicDNS name); tailscaled renews it and caches it on disk.
func (c *Client) Certificate(ctx context.Context, name string) (*tls.Certificate, error) {
	if name == "" {
		return nil, ErrNoCertificate
	}
	certPEM, keyPEM, err := c.lc.CertPair(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("tailnet: certificate for %s: %w", name, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tailnet: certificate for %s: %w", name, err)
	}
	return &cert, nil
}
