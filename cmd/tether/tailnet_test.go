package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/internal/netnstest"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/wire"
)

// magicName is the fake tailnet's MagicDNS name for this machine.
const magicName = "devbox.tail1234.ts.net"

// fakeTailscaled serves the LocalAPI calls tether makes (status, whois,
// cert) on a real unix socket, as a tailscaled on a tailnet with HTTPS
// certificates would. peers maps an address prefix ("100.64.0.2:") of
// WhoIs queries to the node name it answers with.
type fakeTailscaled struct {
	socket string
	ca     *x509.Certificate
	addrs  []string
	peers  map[string]string
}

func newFakeTailscaled(t *testing.T, addrs []string, peers map[string]string) *fakeTailscaled {
	t.Helper()
	caKey, ca := newCA(t)
	certPEM, keyPEM := issue(t, ca, caKey, magicName)
	f := &fakeTailscaled{socket: filepath.Join(t.TempDir(), "tailscaled.sock"), ca: ca, addrs: addrs, peers: peers}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /localapi/v0/status", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{
			"BackendState": "Running", "TUN": true, "TailscaleIPs": f.addrs,
			"Self":           map[string]any{"DNSName": magicName + "."},
			"CurrentTailnet": map[string]any{"Name": "alice@example.com", "MagicDNSSuffix": "tail1234.ts.net", "MagicDNSEnabled": true},
			"CertDomains":    []string{magicName},
		})
	})
	mux.HandleFunc("GET /localapi/v0/whois", func(w http.ResponseWriter, r *http.Request) {
		addr := r.URL.Query().Get("addr")
		for prefix, node := range f.peers {
			if strings.HasPrefix(addr, prefix) {
				json.NewEncoder(w).Encode(map[string]any{
					"Node":        map[string]any{"Name": node + ".", "ComputedName": strings.Split(node, ".")[0]},
					"UserProfile": map[string]any{"LoginName": "alice@example.com"},
				})
				return
			}
		}
		http.Error(w, "no match for IP:port", http.StatusNotFound)
	})
	mux.HandleFunc("GET /localapi/v0/cert/{domain}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("domain") != magicName {
			http.Error(w, "invalid domain", http.StatusBadRequest)
			return
		}
		w.Write(append(append([]byte{}, keyPEM...), certPEM...))
	})
	ln, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return f
}

func newCA(t *testing.T) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test tailnet CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, ca
}

func issue(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(90 * 24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// tailnetDialer trusts the fake tailnet's CA and connects to addr whatever
// the URL's host, as a phone resolving the MagicDNS name would.
func (f *fakeTailscaled) tailnetDialer(addr string, dial func(network, addr string) (net.Conn, error)) *websocket.Dialer {
	pool := x509.NewCertPool()
	pool.AddCert(f.ca)
	return &websocket.Dialer{
		HandshakeTimeout: wstest.Timeout,
		TLSClientConfig:  &tls.Config{RootCAs: pool},
		NetDial:          func(network, _ string) (net.Conn, error) { return dial(network, addr) },
	}
}

// TestTailnetCertificateAndWhoIs serves the tailnet's certificate for the
// MagicDNS name, pairs without a fingerprint, and classifies a peer that
// tailscaled names as secure_remote even from 127.0.0.1 (userspace
// networking).
func TestTailnetCertificateAndWhoIs(t *testing.T) {
	ts := newFakeTailscaled(t, []string{"100.64.0.1"}, map[string]string{"127.0.0.1:": "phone.tail1234.ts.net"})
	root := t.TempDir()
	env := []string{"TETHER_DATA=" + filepath.Join(root, "data"), "HOME=" + root, "TETHER_ROOT=" + root}
	info, _, _ := startDaemon(t, env, "--tls", "tailscale", "--tailscale-socket", ts.socket)
	_, port, _ := net.SplitHostPort(info.Listen)
	if want := "wss://" + magicName + ":" + port + "/ws"; info.URL != want || info.Fingerprint != "" {
		t.Fatalf("advertised %s fingerprint %q, want %s and none", info.URL, info.Fingerprint, want)
	}
	_, out, _ := runCmd(t, env, "pair", "--json")
	var p struct {
		URL   string
		FP    string
		Token string
	}
	json.Unmarshal([]byte(out), &p)
	if p.URL != info.URL || p.FP != "" || strings.Contains(out, `"fp"`) {
		t.Fatalf("pairing payload %s", out)
	}
	c := wstest.Dial(t, ts.tailnetDialer(info.Listen, net.Dial), info.URL, nil)
	env1 := c.Auth(p.Token, nil)
	var ack wire.ConnectionAck
	if env1.Type != wire.TypeConnectionAck {
		t.Fatalf("auth: %s %s", env1.Type, env1.Payload)
	}
	wstest.Decode(t, env1, &ack)
	if ack.ConnectionMode != pairing.ModeSecureRemote || !strings.Contains(ack.ConnectionModeDescription, "phone.tail1234.ts.net") || !strings.Contains(ack.ConnectionModeDescription, "alice@example.com") {
		t.Fatalf("mode %s (%s)", ack.ConnectionMode, ack.ConnectionModeDescription)
	}
	c.Send(wire.TypeHealthCheck, "h", map[string]any{"client_timestamp": time.Now().UTC().Format(time.RFC3339Nano)})
	var hs wire.HealthStatus
	c.WaitFor(wire.TypeHealthStatus, &hs, nil)
	if !hs.Checks.TLSValid || hs.CertificateExpires == "" || !hs.Ready {
		t.Fatalf("health_status %+v", hs)
	}
}

// TestListenTailnet runs the daemon in a namespace holding the tailnet
// address tailscaled reports: tailnet peers reach it, and are
// secure_remote only when tailscaled knows them; the private network does
// not reach it at all.
func TestListenTailnet(t *testing.T) {
	topo := nsTopology{netnstest.New(t), netnstest.New(t)}
	netnstest.Link(t,
		topo.server, []string{"100.64.0.1/10", "10.77.1.1/24"},
		topo.client, []string{"100.64.0.2/10", "100.64.0.3/10", "10.77.1.2/24"})
	ts := newFakeTailscaled(t, []string{"100.64.0.1"}, map[string]string{"100.64.0.2:": "phone.tail1234.ts.net"})
	d := startNSDaemon(t, topo.server, "--listen", "tailnet:0", "--tailscale-socket", ts.socket)
	if want := "wss://" + magicName + ":" + d.port + "/ws"; d.info.URL != want || d.info.Fingerprint != "" {
		t.Fatalf("--tls auto with tailnet certificates: advertised %s fingerprint %q, want %s", d.info.URL, d.info.Fingerprint, want)
	}
	_, out, _ := runCmd(t, d.env, "pair", "--json")
	var p struct{ Token string }
	json.Unmarshal([]byte(out), &p)
	from := func(src string) func(network, addr string) (net.Conn, error) {
		return func(network, addr string) (net.Conn, error) {
			var c net.Conn
			var err error
			nerr := topo.client.Do(func() {
				dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
				c, err = dl.Dial(network, addr)
			})
			if nerr != nil {
				return nil, nerr
			}
			return c, err
		}
	}
	tailnetAddr := net.JoinHostPort("100.64.0.1", d.port)
	c := wstest.Dial(t, ts.tailnetDialer(tailnetAddr, from("100.64.0.2")), d.info.URL, nil)
	var ack wire.ConnectionAck
	wstest.Decode(t, c.Auth(p.Token, nil), &ack)
	if ack.ConnectionMode != pairing.ModeSecureRemote || !strings.Contains(ack.ConnectionModeDescription, "phone.tail1234.ts.net") {
		t.Fatalf("tailnet peer: %s (%s)", ack.ConnectionMode, ack.ConnectionModeDescription)
	}
	token := ack.DeviceToken

	c = wstest.Dial(t, ts.tailnetDialer(tailnetAddr, from("100.64.0.3")), d.info.URL, nil)
	wstest.Decode(t, c.Auth(token, nil), &ack)
	if ack.ConnectionMode != pairing.ModeDirectPublic {
		t.Fatalf("100.64.0.3, unknown to tailscaled: %s (%s)", ack.ConnectionMode, ack.ConnectionModeDescription)
	}

	if conn, err := from("10.77.1.2")("tcp", net.JoinHostPort("10.77.1.1", d.port)); err == nil {
		conn.Close()
		t.Fatal("--listen tailnet is reachable from the private network")
	}
}
