package pairing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/tetherdev/tether/tailnet"
)

// Connection modes of the protocol.
const (
	ModeLocalOnly      = "local_only"
	ModePrivateNetwork = "private_network"
	ModeSecureRemote   = "secure_remote"
	ModeDirectPublic   = "direct_public"
	ModeMisconfigured  = "misconfigured"
)

// Modes are the modes a connection can be accepted in, most trusted first;
// --allow-modes names a subset of them.
var Modes = []string{ModeLocalOnly, ModeSecureRemote, ModePrivateNetwork, ModeDirectPublic}

// Reasons a connection is refused; Classification.Refused holds one of them.
var (
	// ErrInsecureTransport: no TLS between the client and the daemon (or
	// its trusted proxy) and the client is not this machine.
	ErrInsecureTransport = errors.New("pairing: unencrypted connection from a peer that is not this machine")
	// ErrModeForbidden: the user forbade the connection's mode.
	ErrModeForbidden = errors.New("pairing: connection mode not allowed")
	// ErrProxyHeaders: a trusted proxy did not say who the client is, or
	// a proxy that is not trusted forwarded a connection over loopback.
	ErrProxyHeaders = errors.New("pairing: proxy forwarding is misconfigured")
)

// cgnat is 100.64.0.0/10, where tailnet addresses live; it is also
// carrier-grade NAT space, so an address in it proves nothing.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Classification is a connection's mode and a sentence for the user.
type Classification struct {
	Mode        string
	Description string
	// Client is the client's address: the socket's peer, or the address a
	// trusted proxy forwarded.
	Client netip.Addr
	// Proxy is the socket's peer when it is a trusted proxy; zero otherwise.
	Proxy netip.Addr
	// Secure is true when the client's connection is encrypted: TLS on the
	// socket, or X-Forwarded-Proto https from a trusted proxy.
	Secure bool
	// Host is the host the client asked for: X-Forwarded-Host or Host from
	// a trusted proxy, else the request's Host.
	Host string
	// Refused is why the connection must be refused (ErrInsecureTransport,
	// ErrModeForbidden or ErrProxyHeaders); Mode is then misconfigured.
	// Nil when the connection is accepted.
	Refused error
}

// ClassifyAddr classifies a peer by its address alone: loopback is
// local_only; RFC 1918, IPv6 unique-local and link-local are
// private_network; anything else is direct_public. A tailnet peer is
// secure_remote only when tailscaled vouches for it, which an address
// cannot show (100.64.0.0/10 is also carrier-grade NAT), so this function
// never returns secure_remote.
func ClassifyAddr(a netip.Addr) Classification {
	a = a.Unmap()
	c := Classification{Client: a}
	switch {
	case a.IsLoopback():
		c.Mode, c.Description = ModeLocalOnly, "Loopback connection from this machine ("+a.String()+")"
	case a.IsPrivate():
		c.Mode, c.Description = ModePrivateNetwork, "Private network address "+a.String()+" (RFC 1918 or IPv6 ULA)"
	case a.IsLinkLocalUnicast():
		c.Mode, c.Description = ModePrivateNetwork, "Link-local address "+a.String()
	case cgnat.Contains(a):
		c.Mode, c.Description = ModeDirectPublic, "Address "+a.String()+" in 100.64.0.0/10 that tailscaled does not know: carrier-grade NAT, not a tailnet peer"
	default:
		c.Mode, c.Description = ModeDirectPublic, "Public address "+a.String()+" without a tunnel"
	}
	return c
}

// Tailnet names the tailnet peer behind an address; *tailnet.Client
// implements it. WhoIs returns tailnet.ErrUnknownPeer for an address that
// is not a tailnet peer.
type Tailnet interface {
	WhoIs(ctx context.Context, addr string) (tailnet.Peer, error)
}

// Classifier classifies connections from the socket: the tailnet first
// (tailscaled's WhoIs), then the address. Forwarding headers count only
// from TrustedProxies, and only when X-Forwarded-For is present: a
// connection from a trusted proxy's address without it is that address's
// own. The zero value classifies by address alone.
type Classifier struct {
	// Tailnet asks tailscaled who a peer is; nil without a tailnet.
	Tailnet Tailnet
	// TrustedProxies are the peers whose X-Forwarded-For,
	// X-Forwarded-Proto and X-Forwarded-Host (or Host) are believed.
	TrustedProxies []netip.Prefix
	// Allowed are the modes accepted; nil accepts every mode.
	Allowed []string
	// Logger receives tailscaled failures; nil discards them.
	Logger *slog.Logger
}

// Trusted reports whether a is a trusted proxy.
func (c *Classifier) Trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Classify classifies the connection of an HTTP request from its socket's
// remote address, whether the socket is TLS, and (from a trusted proxy)
// its forwarding headers.
func (c *Classifier) Classify(ctx context.Context, r *http.Request) Classification {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return refuse(Classification{Description: "Unreadable peer address"}, ErrProxyHeaders)
	}
	h := r.Header
	peer := ap.Addr().Unmap()
	cl := Classification{Client: peer, Secure: r.TLS != nil, Host: r.Host}
	// WhoIs before the address: with userspace networking a tailnet peer
	// arrives from 127.0.0.1.
	if p, ok := c.whoIs(ctx, netip.AddrPortFrom(peer, ap.Port()).String()); ok {
		return c.finish(tailnetClass(cl, p, ""))
	}
	via := ""
	xff := h.Values("X-Forwarded-For")
	if c.Trusted(peer) && len(xff) > 0 {
		client, err := ForwardedFor(xff, c.Trusted)
		if err != nil {
			cl.Description = "Trusted proxy " + peer.String() + " sent an X-Forwarded-For that does not name the client"
			return refuse(cl, ErrProxyHeaders)
		}
		cl.Client, cl.Proxy = client, peer
		cl.Secure = ForwardedSecure(h.Values("X-Forwarded-Proto"))
		if fh := firstValue(h.Values("X-Forwarded-Host")); fh != "" {
			cl.Host = fh
		}
		via = ", via trusted proxy " + peer.String()
		if p, ok := c.whoIs(ctx, client.String()); ok {
			return c.finish(tailnetClass(cl, p, via))
		}
	} else if !c.Trusted(peer) && peer.IsLoopback() && (len(xff) > 0 || h.Get("Forwarded") != "") {
		// A proxy on this machine forwards connections but is not
		// trusted: every client would look local. Refuse rather than guess.
		cl.Description = "A proxy on this machine forwards connections but --trusted-proxy does not name it"
		return refuse(cl, ErrProxyHeaders)
	}
	a := ClassifyAddr(cl.Client)
	cl.Mode, cl.Description = a.Mode, a.Description+via
	return c.finish(cl)
}

func tailnetClass(cl Classification, p tailnet.Peer, via string) Classification {
	// The node's tailnet address, not 127.0.0.1 of userspace networking:
	// rate limits and "last seen from" are per peer.
	if p.Addr.IsValid() {
		cl.Client = p.Addr
	}
	cl.Mode = ModeSecureRemote
	cl.Description = fmt.Sprintf("Tailscale peer %s of %s (%s)%s", p.Node, p.User, cl.Client, via)
	return cl
}

// finish refuses an unencrypted connection from elsewhere and a mode the
// user forbade.
func (c *Classifier) finish(cl Classification) Classification {
	if !cl.Secure && cl.Mode != ModeLocalOnly {
		return refuse(cl, ErrInsecureTransport)
	}
	if c.Allowed != nil && !slices.Contains(c.Allowed, cl.Mode) {
		cl.Description = "Connection mode " + cl.Mode + " is not allowed by --allow-modes (" + cl.Description + ")"
		return refuse(cl, ErrModeForbidden)
	}
	return cl
}

func refuse(cl Classification, why error) Classification {
	cl.Mode, cl.Refused = ModeMisconfigured, why
	return cl
}

// whoIs asks tailscaled about addr; false when there is no tailnet, the
// address is not a peer, or tailscaled cannot answer.
func (c *Classifier) whoIs(ctx context.Context, addr string) (tailnet.Peer, bool) {
	if c.Tailnet == nil {
		return tailnet.Peer{}, false
	}
	p, err := c.Tailnet.WhoIs(ctx, addr)
	if err != nil {
		if !errors.Is(err, tailnet.ErrUnknownPeer) && c.Logger != nil {
			c.Logger.Debug("tailscaled whois failed", "addr", addr, "err", err)
		}
		return tailnet.Peer{}, false
	}
	return p, true
}

// ForwardedFor finds the client in X-Forwarded-For header values: the
// right-most address that is not a trusted proxy (each proxy appends the
// address it was reached from), or the left-most when all are trusted.
// Elements may be bare IPs or IP:port. An empty or unparsable list is an
// error: a trusted proxy must say who the client is.
func ForwardedFor(values []string, trusted func(netip.Addr) bool) (netip.Addr, error) {
	var hops []netip.Addr
	for _, v := range values {
		for _, e := range strings.Split(v, ",") {
			a, err := parseHop(strings.TrimSpace(e))
			if err != nil {
				return netip.Addr{}, fmt.Errorf("%w: X-Forwarded-For: %w", ErrProxyHeaders, err)
			}
			hops = append(hops, a)
		}
	}
	if len(hops) == 0 {
		return netip.Addr{}, fmt.Errorf("%w: no X-Forwarded-For", ErrProxyHeaders)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		if !trusted(hops[i]) {
			return hops[i], nil
		}
	}
	return hops[0], nil
}

func parseHop(s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Addr{}, fmt.Errorf("address %q has a zone", s)
		}
		return a.Unmap(), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if ap.Addr().Zone() != "" {
		return netip.Addr{}, fmt.Errorf("address %q has a zone", s)
	}
	return ap.Addr().Unmap(), nil
}

// ForwardedSecure reports whether X-Forwarded-Proto values say the client
// used TLS: present, and every element https or wss.
func ForwardedSecure(values []string) bool {
	n := 0
	for _, v := range values {
		for _, e := range strings.Split(v, ",") {
			switch strings.ToLower(strings.TrimSpace(e)) {
			case "https", "wss":
				n++
			default:
				return false
			}
		}
	}
	return n > 0
}

func firstValue(values []string) string {
	if len(values) == 0 {
		return ""
	}
	first, _, _ := strings.Cut(values[0], ",")
	return strings.TrimSpace(first)
}
