package pairing

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/tetherdev/tether/tailnet"
)

// fakeTailnet is tailscaled as the classifier sees it: the addresses
// ("ip:port" or "ip") of known peers, or an error for everything.
type fakeTailnet struct {
	peers map[string]tailnet.Peer
	err   error
	asked []string
}

func (f *fakeTailnet) WhoIs(_ context.Context, addr string) (tailnet.Peer, error) {
	f.asked = append(f.asked, addr)
	if f.err != nil {
		return tailnet.Peer{}, f.err
	}
	if p, ok := f.peers[addr]; ok {
		return p, nil
	}
	return tailnet.Peer{}, tailnet.ErrUnknownPeer
}

func TestClassify(t *testing.T) {
	t.Parallel()
	phone := tailnet.Peer{User: "alice@example.com", Node: "phone.tail1234.ts.net"}
	phoneAt := tailnet.Peer{User: "alice@example.com", Node: "phone.tail1234.ts.net", Addr: netip.MustParseAddr("100.64.0.2")}
	ts := &fakeTailnet{peers: map[string]tailnet.Peer{
		"100.64.0.2:40000":             phone,
		"[fd7a:115c:a1e0::2]:40000":    phone,
		"127.0.0.1:41111":              phoneAt, // userspace networking: tailscaled proxies the peer from loopback
		"100.64.0.9":                   phone,   // a tailnet peer behind a trusted proxy (no port)
		"[fd7a:115c:a1e0::9]:1":        phone,   // a port that never matches
		"[fd7a:115c:a1e0:ab12::9]:400": phone,
	}}
	proxies := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.9.0.0/16")}
	tests := []struct {
		name    string
		remote  string
		tls     bool
		headers map[string]string
		tailnet Tailnet
		proxies []netip.Prefix
		allowed []string
		mode    string
		refused error
		client  string
		secure  bool
		desc    string // a part of the description
	}{
		{name: "IPv4 loopback plain", remote: "127.0.0.1:5000", mode: ModeLocalOnly, client: "127.0.0.1"},
		{name: "IPv4 loopback other", remote: "127.8.9.10:5000", tls: true, mode: ModeLocalOnly, client: "127.8.9.10", secure: true},
		{name: "IPv6 loopback", remote: "[::1]:5000", mode: ModeLocalOnly, client: "::1"},
		{name: "IPv4-mapped loopback", remote: "[::ffff:127.0.0.1]:5000", mode: ModeLocalOnly, client: "127.0.0.1"},
		{name: "RFC 1918 10/8", remote: "10.1.2.3:5000", tls: true, mode: ModePrivateNetwork, client: "10.1.2.3", secure: true},
		{name: "RFC 1918 172.16/12", remote: "172.31.255.254:5000", tls: true, mode: ModePrivateNetwork, client: "172.31.255.254", secure: true},
		{name: "RFC 1918 192.168/16", remote: "192.168.1.20:5000", tls: true, mode: ModePrivateNetwork, client: "192.168.1.20", secure: true},
		{name: "IPv4-mapped private", remote: "[::ffff:192.168.1.20]:5000", tls: true, mode: ModePrivateNetwork, client: "192.168.1.20", secure: true},
		{name: "IPv6 ULA", remote: "[fd12:3456::1]:5000", tls: true, mode: ModePrivateNetwork, client: "fd12:3456::1", secure: true},
		{name: "IPv4 link-local", remote: "169.254.10.1:5000", tls: true, mode: ModePrivateNetwork, client: "169.254.10.1", secure: true},
		{name: "IPv6 link-local", remote: "[fe80::1%eth0]:5000", tls: true, mode: ModePrivateNetwork, client: "fe80::1%eth0", secure: true},
		{name: "just outside 172.16/12", remote: "172.32.0.1:5000", tls: true, mode: ModeDirectPublic, client: "172.32.0.1", secure: true},
		{name: "IPv4 public", remote: "203.0.113.7:5000", tls: true, mode: ModeDirectPublic, client: "203.0.113.7", secure: true, desc: "Public address"},
		{name: "IPv6 public", remote: "[2001:db8::7]:5000", tls: true, mode: ModeDirectPublic, client: "2001:db8::7", secure: true},
		{name: "CGNAT without tailnet", remote: "100.64.0.2:40000", tls: true, mode: ModeDirectPublic, client: "100.64.0.2", secure: true, desc: "carrier-grade NAT"},
		{name: "CGNAT unknown to tailscaled", remote: "100.100.1.1:40000", tls: true, tailnet: ts, mode: ModeDirectPublic, client: "100.100.1.1", secure: true, desc: "does not know"},
		{name: "CGNAT with tailscaled down", remote: "100.64.0.2:40000", tls: true, tailnet: &fakeTailnet{err: errors.New("dial unix: no such file")}, mode: ModeDirectPublic, client: "100.64.0.2", secure: true},
		{name: "tailnet IPv4 peer", remote: "100.64.0.2:40000", tls: true, tailnet: ts, mode: ModeSecureRemote, client: "100.64.0.2", secure: true, desc: "phone.tail1234.ts.net of alice@example.com"},
		{name: "tailnet IPv6 peer", remote: "[fd7a:115c:a1e0::2]:40000", tls: true, tailnet: ts, mode: ModeSecureRemote, client: "fd7a:115c:a1e0::2", secure: true, desc: "alice@example.com"},
		{name: "tailnet peer over userspace networking", remote: "127.0.0.1:41111", tls: true, tailnet: ts, mode: ModeSecureRemote, client: "100.64.0.2", secure: true},
		{name: "tailnet peer without TLS", remote: "100.64.0.2:40000", tailnet: ts, mode: ModeMisconfigured, refused: ErrInsecureTransport, client: "100.64.0.2"},
		{name: "plain ws from private", remote: "10.1.2.3:5000", mode: ModeMisconfigured, refused: ErrInsecureTransport, client: "10.1.2.3"},
		{name: "plain ws from public", remote: "203.0.113.7:5000", mode: ModeMisconfigured, refused: ErrInsecureTransport},
		{name: "plain ws from IPv6 ULA", remote: "[fd00::5]:5000", mode: ModeMisconfigured, refused: ErrInsecureTransport},

		// Forwarding headers from peers that are not trusted are ignored.
		{name: "spoofed XFF loopback from private", remote: "10.1.2.3:5000", tls: true, headers: map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "https"},
			mode: ModePrivateNetwork, client: "10.1.2.3", secure: true},
		{name: "spoofed XFF with proxies configured", remote: "10.1.2.3:5000", tls: true, proxies: proxies, headers: map[string]string{"X-Forwarded-For": "127.0.0.1"},
			mode: ModePrivateNetwork, client: "10.1.2.3", secure: true},
		{name: "spoofed XFF tailnet address from public", remote: "203.0.113.7:5000", tls: true, tailnet: ts, headers: map[string]string{"X-Forwarded-For": "100.64.0.9"},
			mode: ModeDirectPublic, client: "203.0.113.7", secure: true},
		{name: "spoofed X-Forwarded-Proto on plain ws", remote: "10.1.2.3:5000", headers: map[string]string{"X-Forwarded-Proto": "https"},
			mode: ModeMisconfigured, refused: ErrInsecureTransport},
		{name: "spoofed XFF from IPv6 private", remote: "[fd00::5]:5000", tls: true, headers: map[string]string{"X-Forwarded-For": "::1"},
			mode: ModePrivateNetwork, client: "fd00::5", secure: true},
		{name: "untrusted loopback proxy", remote: "127.0.0.1:5000", headers: map[string]string{"X-Forwarded-For": "203.0.113.7"},
			mode: ModeMisconfigured, refused: ErrProxyHeaders},
		{name: "untrusted loopback proxy, Forwarded", remote: "[::1]:5000", headers: map[string]string{"Forwarded": "for=203.0.113.7"},
			mode: ModeMisconfigured, refused: ErrProxyHeaders},

		// Trusted proxies.
		{name: "trusted proxy, public client over https", remote: "127.0.0.1:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"},
			mode: ModeDirectPublic, client: "203.0.113.7", secure: true, desc: "via trusted proxy 127.0.0.1"},
		{name: "trusted proxy, IPv6 client with port", remote: "[::1]:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-For": "[2001:db8::7]:443", "X-Forwarded-Proto": "wss"},
			mode: ModeDirectPublic, client: "2001:db8::7", secure: true},
		{name: "trusted proxy, private client", remote: "10.9.1.1:5000", tls: true, proxies: proxies, headers: map[string]string{"X-Forwarded-For": "192.168.7.7:1234", "X-Forwarded-Proto": "https"},
			mode: ModePrivateNetwork, client: "192.168.7.7", secure: true},
		{name: "trusted proxy, local client over http", remote: "127.0.0.1:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http"},
			mode: ModeLocalOnly, client: "127.0.0.1"},
		{name: "trusted proxy, client over http", remote: "127.0.0.1:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-For": "10.1.2.3", "X-Forwarded-Proto": "http"},
			mode: ModeMisconfigured, refused: ErrInsecureTransport, client: "10.1.2.3"},
		{name: "trusted proxy, no X-Forwarded-Proto", remote: "127.0.0.1:5000", tls: true, proxies: proxies, headers: map[string]string{"X-Forwarded-For": "10.1.2.3"},
			mode: ModeMisconfigured, refused: ErrInsecureTransport},
		{name: "trusted proxy, mixed X-Forwarded-Proto", remote: "127.0.0.1:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-For": "10.1.2.3", "X-Forwarded-Proto": "https, http"},
			mode: ModeMisconfigured, refused: ErrInsecureTransport},
		{name: "trusted proxy chain, spoofed left-most", remote: "127.0.0.1:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-For": "127.0.0.1, 203.0.113.7, 10.9.3.3", "X-Forwarded-Proto": "https"},
			mode: ModeDirectPublic, client: "203.0.113.7", secure: true},
		{name: "trusted proxy chain all trusted", remote: "127.0.0.1:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-For": "10.9.0.1, 10.9.0.2", "X-Forwarded-Proto": "https"},
			mode: ModePrivateNetwork, client: "10.9.0.1", secure: true},
		{name: "trusted proxy address, no XFF: a direct connection", remote: "127.0.0.1:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example"},
			mode: ModeLocalOnly, client: "127.0.0.1"},
		{name: "trusted private proxy address, no XFF, plain", remote: "10.9.0.5:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-Proto": "https"},
			mode: ModeMisconfigured, refused: ErrInsecureTransport},
		{name: "trusted proxy, empty XFF", remote: "127.0.0.1:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-For": "", "X-Forwarded-Proto": "https"},
			mode: ModeMisconfigured, refused: ErrProxyHeaders},
		{name: "trusted proxy, garbage XFF", remote: "127.0.0.1:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-For": "unknown", "X-Forwarded-Proto": "https"},
			mode: ModeMisconfigured, refused: ErrProxyHeaders},
		{name: "trusted proxy, empty XFF element", remote: "127.0.0.1:5000", proxies: proxies, headers: map[string]string{"X-Forwarded-For": "203.0.113.7,,", "X-Forwarded-Proto": "https"},
			mode: ModeMisconfigured, refused: ErrProxyHeaders},
		{name: "trusted proxy, tailnet client", remote: "127.0.0.1:5000", proxies: proxies, tailnet: ts, headers: map[string]string{"X-Forwarded-For": "100.64.0.9", "X-Forwarded-Proto": "https"},
			mode: ModeSecureRemote, client: "100.64.0.9", secure: true, desc: "via trusted proxy"},

		// --allow-modes.
		{name: "allowed", remote: "100.64.0.2:40000", tls: true, tailnet: ts, allowed: []string{ModeLocalOnly, ModeSecureRemote}, mode: ModeSecureRemote, client: "100.64.0.2", secure: true},
		{name: "private forbidden", remote: "10.1.2.3:5000", tls: true, allowed: []string{ModeLocalOnly, ModeSecureRemote}, mode: ModeMisconfigured, refused: ErrModeForbidden, client: "10.1.2.3", secure: true, desc: "--allow-modes"},
		{name: "local forbidden", remote: "127.0.0.1:5000", allowed: []string{ModeSecureRemote}, mode: ModeMisconfigured, refused: ErrModeForbidden},
		{name: "insecure before forbidden", remote: "203.0.113.7:5000", allowed: []string{ModeLocalOnly}, mode: ModeMisconfigured, refused: ErrInsecureTransport},
		{name: "unreadable remote address", remote: "pipe", tls: true, mode: ModeMisconfigured, refused: ErrProxyHeaders},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/ws", nil)
			r.RemoteAddr = tt.remote
			r.TLS = nil
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			c := &Classifier{Tailnet: tt.tailnet, TrustedProxies: tt.proxies, Allowed: tt.allowed}
			got := c.Classify(context.Background(), r)
			if got.Mode != tt.mode || !errors.Is(got.Refused, tt.refused) || (tt.refused == nil) != (got.Refused == nil) {
				t.Fatalf("mode %s refused %v, want %s %v (%s)", got.Mode, got.Refused, tt.mode, tt.refused, got.Description)
			}
			if tt.client != "" && got.Client.String() != tt.client {
				t.Errorf("client %s, want %s", got.Client, tt.client)
			}
			if tt.refused == nil && got.Secure != tt.secure {
				t.Errorf("secure %v, want %v", got.Secure, tt.secure)
			}
			if got.Description == "" || !strings.Contains(got.Description, tt.desc) {
				t.Errorf("description %q, want it to contain %q", got.Description, tt.desc)
			}
		})
	}
}

// TestClassifyAsksWhoIsFirst checks that tailscaled is asked about the
// socket's peer, port included, before the address decides.
func TestClassifyAsksWhoIsFirst(t *testing.T) {
	t.Parallel()
	ts := &fakeTailnet{}
	r := httptest.NewRequest("GET", "/ws", nil)
	r.RemoteAddr, r.TLS = "192.168.1.20:5555", &tls.ConnectionState{}
	if got := (&Classifier{Tailnet: ts}).Classify(context.Background(), r); got.Mode != ModePrivateNetwork {
		t.Fatalf("mode %s", got.Mode)
	}
	if len(ts.asked) != 1 || ts.asked[0] != "192.168.1.20:5555" {
		t.Fatalf("asked tailscaled about %q, want [192.168.1.20:5555]", ts.asked)
	}
}

func TestClassifyHost(t *testing.T) {
	t.Parallel()
	proxies := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	for _, tt := range []struct {
		remote, host, fwdHost, want string
	}{
		{"127.0.0.1:1", "127.0.0.1:7420", "tether.example, other", "tether.example"},
		{"127.0.0.1:1", "tether.example", "", "tether.example"},
		{"10.1.2.3:1", "10.0.0.1:7420", "evil.example", "10.0.0.1:7420"},
	} {
		r := httptest.NewRequest("GET", "/ws", nil)
		r.RemoteAddr, r.Host, r.TLS = tt.remote, tt.host, &tls.ConnectionState{}
		r.Header.Set("X-Forwarded-For", "203.0.113.1")
		r.Header.Set("X-Forwarded-Proto", "https")
		if tt.fwdHost != "" {
			r.Header.Set("X-Forwarded-Host", tt.fwdHost)
		}
		if got := (&Classifier{TrustedProxies: proxies}).Classify(context.Background(), r); got.Host != tt.want {
			t.Errorf("%s with Host %s, X-Forwarded-Host %q: host %q, want %q", tt.remote, tt.host, tt.fwdHost, got.Host, tt.want)
		}
	}
}

func TestForwardedFor(t *testing.T) {
	t.Parallel()
	trusted := func(a netip.Addr) bool { return a.IsLoopback() }
	for _, tt := range []struct {
		values []string
		want   string // "" for an error
	}{
		{[]string{"203.0.113.1"}, "203.0.113.1"},
		{[]string{"203.0.113.1, 127.0.0.1"}, "203.0.113.1"},
		{[]string{"10.0.0.1", "203.0.113.1"}, "203.0.113.1"},
		{[]string{"::ffff:10.0.0.1"}, "10.0.0.1"},
		{[]string{"[2001:db8::1]:80"}, "2001:db8::1"},
		{[]string{"2001:db8::1"}, "2001:db8::1"},
		{[]string{"10.0.0.1:8080"}, "10.0.0.1"},
		{[]string{"127.0.0.1, ::1"}, "127.0.0.1"},
		{nil, ""},
		{[]string{""}, ""},
		{[]string{"unknown"}, ""},
		{[]string{"fe80::1%eth0"}, ""},
		{[]string{"[fe80::1%eth0]:1"}, ""},
		{[]string{"203.0.113.1;"}, ""},
		{[]string{"_hidden, 203.0.113.1"}, ""},
	} {
		got, err := ForwardedFor(tt.values, trusted)
		switch {
		case tt.want == "" && (err == nil || !errors.Is(err, ErrProxyHeaders)):
			t.Errorf("ForwardedFor(%q) = %v, %v; want an ErrProxyHeaders error", tt.values, got, err)
		case tt.want != "" && (err != nil || got.String() != tt.want):
			t.Errorf("ForwardedFor(%q) = %v, %v; want %s", tt.values, got, err, tt.want)
		}
	}
}

func TestForwardedSecure(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		values []string
		want   bool
	}{
		{[]string{"https"}, true},
		{[]string{"WSS"}, true},
		{[]string{"https, https"}, true},
		{[]string{"https", "http"}, false},
		{[]string{"http"}, false},
		{[]string{""}, false},
		{nil, false},
		{[]string{"https,"}, false},
	} {
		if got := ForwardedSecure(tt.values); got != tt.want {
			t.Errorf("ForwardedSecure(%q) = %v", tt.values, got)
		}
	}
}

func FuzzForwardedFor(f *testing.F) {
	for _, s := range []string{"203.0.113.1", "10.0.0.1, 127.0.0.1", "[::1]:80", "unknown", ",", "::ffff:1.2.3.4:5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		trusted := func(a netip.Addr) bool { return a.IsLoopback() }
		a, err := ForwardedFor([]string{s}, trusted)
		if err != nil {
			if !errors.Is(err, ErrProxyHeaders) {
				t.Fatalf("error %v is not ErrProxyHeaders", err)
			}
			return
		}
		if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
			t.Fatalf("ForwardedFor(%q) = %v", s, a)
		}
		if again, err := ForwardedFor([]string{a.String()}, trusted); err != nil || again != a {
			t.Fatalf("ForwardedFor(%q) = %v, which reads back as %v, %v", s, a, again, err)
		}
	})
}
