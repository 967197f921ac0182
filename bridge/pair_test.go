package bridge

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/bridge/wire"
	"github.com/tetherdev/tether/pairing"
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

func TestPairPage(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.Fingerprint = pairing.Fingerprint(h.srv.Certificate.Raw)

	resp, body := get(t, h, "/pair", "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `<img alt="Pairing QR code" src="data:image/png;base64,`) ||
		!strings.Contains(string(body), h.srv.Fingerprint) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("/pair = %d %s", resp.StatusCode, body)
	}

	resp, body = get(t, h, "/pair?format=json", "localhost")
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
	if resp, _ := get(t, h, "/pair", "evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("/pair with Host evil.example = %d", resp.StatusCode)
	}
}

func TestPairPNGDecodesToThePayload(t *testing.T) {
	zbar, err := exec.LookPath("zbarimg")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("zbarimg missing in CI: scripts/install-deps installs zbar-tools")
		}
		t.Skip("zbarimg not installed (scripts/install-deps installs zbar-tools)")
	}
	h := newHarness(t, nil)
	resp, png := get(t, h, "/pair?format=png", "")
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
