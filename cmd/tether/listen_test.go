package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/certs"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

// TestDefaultListenReachesAPhone starts the daemon with the default
// --listen (auto, here on port 0) and no tailnet: it listens on every
// address, the QR code and `tether pair` name the address of the default
// route's interface, never loopback, and a phone connecting to that
// address (not to loopback) pairs.
func TestDefaultListenReachesAPhone(t *testing.T) {
	t.Parallel()
	lan, ok := routeAddr()
	if !ok {
		t.Skip("this machine has no default route: no address a phone could use")
	}
	root := t.TempDir()
	env := []string{"TETHER_DATA=" + filepath.Join(t.TempDir(), "data"), "HOME=" + root, "TETHER_ROOT=" + root}
	info, stdout, _ := startDaemon(t, env, "--listen", "auto:0")
	u, err := url.Parse(info.URL)
	if err != nil {
		t.Fatal(err)
	}
	if host, _ := netip.ParseAddr(u.Hostname()); host != lan {
		t.Fatalf("advertised %s, want the default route's address %s", info.URL, lan)
	}
	if strings.Contains(stdout.String(), "loopback address: a phone cannot reach it") {
		t.Fatalf("the banner calls a LAN URL unreachable:\n%s", stdout)
	}
	code, out, _ := runCmd(t, env, "pair")
	if code != 0 || !strings.Contains(out, "https://"+u.Host+"/#pair=tpc_") || strings.Contains(out, "127.0.0.1") {
		t.Fatalf("tether pair:\n%s", out)
	}
	// A phone on the LAN: it dials the advertised address, which is not loopback.
	_, port, _ := net.SplitHostPort(u.Host)
	_, out, _ = runCmd(t, env, "pair", "--json")
	token := out[strings.Index(out, `"token":"`)+len(`"token":"`):]
	token = token[:strings.IndexByte(token, '"')]
	c := wstest.Dial(t, wstest.PinnedDialer(info.Fingerprint), "wss://"+net.JoinHostPort(lan.String(), port)+"/ws", nil)
	c.Send(wire.TypeAuth, "auth", map[string]any{"token": token, "client_version": "1.0.0", "platform": "test"})
	var ack wire.ConnectionAck
	c.Expect(wire.TypeConnectionAck, &ack)
	if ack.ConnectionMode == "local_only" || ack.DeviceToken == "" {
		t.Fatalf("connection_ack from %s: %+v", lan, ack)
	}
}

// TestLoopbackOnlySaysPhonesCannotReachIt: with --listen on loopback, the
// banner and `tether pair` say plainly that a phone cannot open the URL.
func TestLoopbackOnlySaysPhonesCannotReachIt(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	code, out, _ := runCmd(t, d.env, "pair")
	if code != 0 || !strings.Contains(out, "loopback address: a phone cannot reach it") || !strings.Contains(out, "without --listen") {
		t.Fatalf("tether pair on loopback:\n%s", out)
	}
}

// TestLocalCATrustedByAPhone runs the daemon with --tls local-ca: a phone
// that installed the certificate /ca.crt serves (and only that: no
// fingerprint pin, no exception) connects over wss, the iOS profile holds
// the same certificate, and the pairing page links to the guide.
func TestLocalCATrustedByAPhone(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	env := []string{"TETHER_DATA=" + filepath.Join(t.TempDir(), "data"), "HOME=" + root, "TETHER_ROOT=" + root}
	info, stdout, _ := startDaemon(t, env, "--tls", "local-ca")
	if info.Fingerprint != "" || !strings.Contains(stdout.String(), "ca once and install it") {
		t.Fatalf("fingerprint %q; banner:\n%s", info.Fingerprint, stdout)
	}
	base := "https://" + strings.TrimSuffix(strings.TrimPrefix(info.URL, "wss://"), "/ws")
	// The first visit: the phone does not trust the daemon yet.
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(path string) (*http.Response, []byte) {
		resp, err := insecure.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	resp, der := get("/ca.crt")
	ca, err := x509.ParseCertificate(der)
	if err != nil || resp.Header.Get("Content-Type") != "application/x-x509-ca-cert" || !ca.IsCA {
		t.Fatalf("/ca.crt: %v %s", err, resp.Header.Get("Content-Type"))
	}
	resp, profile := get("/ca.mobileconfig")
	var plist struct {
		Data []string `xml:"dict>array>dict>data"`
	}
	if err := xml.Unmarshal(profile, &plist); err != nil || len(plist.Data) != 1 || plist.Data[0] != base64.StdEncoding.EncodeToString(der) ||
		resp.Header.Get("Content-Type") != "application/x-apple-aspen-config" {
		t.Fatalf("/ca.mobileconfig: %v %+v\n%s", err, plist, profile)
	}
	if _, guide := get("/ca"); !strings.Contains(string(guide), "Certificate Trust Settings") || !strings.Contains(string(guide), certs.Fingerprint(ca)) {
		t.Fatalf("/ca guide:\n%s", guide)
	}
	page, _ := url.Parse(info.PairPage)
	if _, body := get(page.RequestURI()); !strings.Contains(string(body), base+"/ca") {
		t.Fatalf("the pairing page does not link to the guide:\n%s", body)
	}

	// With the CA installed, the phone verifies the daemon like any site.
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	dialer := &websocket.Dialer{TLSClientConfig: &tls.Config{RootCAs: roots}}
	_, out, _ := runCmd(t, env, "pair", "--json")
	var p struct{ Token string }
	json.Unmarshal([]byte(out), &p)
	c := wstest.Dial(t, dialer, info.URL, nil)
	c.Send(wire.TypeAuth, "auth", map[string]any{"token": p.Token, "client_version": "1.0.0", "platform": "test"})
	c.Expect(wire.TypeConnectionAck, nil)
}
