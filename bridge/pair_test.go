package bridge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/tailnet"
	"github.com/tetherdev/tether/wire"
)

func get(t *testing.T, h *harness, path, host string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", h.ts.URL+path, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := h.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

const pairKey = "k3y-only-the-terminal-has"

func withPairKey(s *Server) { s.PairKey = pairKey }

func TestPairPage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPairKey)
	h.srv.Fingerprint = pairing.Fingerprint(h.srv.Certificate.Raw)

	resp, body := get(t, h, "/pair?key="+pairKey, "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `<img alt="Pairing QR code" src="data:image/png;base64,`) ||
		!strings.Contains(string(body), h.srv.Fingerprint) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("/pair = %d %s", resp.StatusCode, body)
	}

	resp, body = get(t, h, "/pair?format=json&key="+pairKey, "localhost")
	var p struct {
		V                   int
		URL, Token, FP, Exp string
	}
	if err := json.Unmarshal(body, &p); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/pair?format=json = %d %s", resp.StatusCode, body)
	}
	if p.V != 1 || p.URL != h.wsURL || p.FP != h.srv.Fingerprint || p.Exp == "" {
		t.Fatalf("payload = %+v", p)
	}
	// The code it shows pairs a device.
	if env := h.dial(nil).Auth(p.Token, nil); env.Type != wire.TypeConnectionAck {
		t.Fatalf("code from /pair: %s %s", env.Type, env.Payload)
	}

	// A page reached under a foreign host name (DNS rebinding) is refused.
	if resp, _ := get(t, h, "/pair?key="+pairKey, "evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("/pair with Host evil.example = %d", resp.StatusCode)
	}
}

// TestPairPageNeedsTheKey: reaching loopback is not enough to be handed a
// pairing code (a sandbox, another program of the machine): the page needs
// the key only the user's terminal has, and without one it is off.
func TestPairPageNeedsTheKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withPairKey)
	for _, path := range []string{"/pair", "/pair?format=json", "/pair?format=json&key=", "/pair?format=json&key=" + pairKey[:len(pairKey)-1], "/pair?format=json&key=" + pairKey + "x"} {
		resp, body := get(t, h, path, "")
		if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "tpc_") {
			t.Errorf("GET %s = %d %s", path, resp.StatusCode, body)
		}
	}
	off := newHarness(t, nil)
	if resp, body := get(t, off, "/pair?format=json&key=", ""); resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "tpc_") {
		t.Errorf("without a key configured: %d %s", resp.StatusCode, body)
	}
}

// userspaceTailnet is tailscaled in userspace-networking mode: its peers'
// connections arrive from 127.0.0.1.
type userspaceTailnet struct{}

func (userspaceTailnet) WhoIs(context.Context, string) (tailnet.Peer, error) {
	return tailnet.Peer{User: "mallory@example.com", Node: "other.tail1234.ts.net", Addr: netip.MustParseAddr("100.64.0.9")}, nil
}

// TestPairPageRefusesATailnetPeerFromLoopback: a tailnet peer is not this
// machine's user even when tailscaled hands its connection over from
// 127.0.0.1; /pair is classified like /ws.
func TestPairPageRefusesATailnetPeerFromLoopback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(s *Server) {
		withPairKey(s)
		s.Classifier = &pairing.Classifier{Tailnet: userspaceTailnet{}}
	})
	if resp, body := get(t, h, "/pair?format=json&key="+pairKey, ""); resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), "tpc_") {
		t.Fatalf("/pair from a userspace tailnet peer = %d %s", resp.StatusCode, body)
	}
}

func TestPairPNGDecodesToThePayload(t *testing.T) {
	t.Parallel()
	zbar, err := exec.LookPath("zbarimg")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("zbarimg missing in CI: scripts/install-deps installs zbar-tools")
		}
		t.Skip("zbarimg not installed (scripts/install-deps installs zbar-tools)")
	}
	h := newHarness(t, withPairKey)
	resp, png := get(t, h, "/pair?format=png&key="+pairKey, "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("/pair?format=png = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	file := filepath.Join(t.TempDir(), "qr.png")
	os.WriteFile(file, png, 0o600)
	out, err := exec.Command(zbar, "--raw", "-q", file).Output()
	if err != nil {
		t.Fatalf("zbarimg: %v", err)
	}
	var p struct{ URL, Token string }
	if err := json.Unmarshal(out, &p); err != nil || p.URL != h.wsURL {
		t.Fatalf("QR holds %q", out)
	}
	if env := h.dial(nil).Auth(p.Token, nil); env.Type != wire.TypeConnectionAck {
		t.Fatalf("code from the QR image: %s", env.Type)
	}
}
