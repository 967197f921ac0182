package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/internal/wstest"
	"github.com/tetherdev/tether/wire"
)

// webPairLink runs `tether pair` (the web QR by default) and returns the
// link it prints.
func webPairLink(t *testing.T, d *daemon) string {
	t.Helper()
	code, out, errOut := runCmd(t, d.env, "pair")
	if code != 0 {
		t.Fatalf("pair: %d %s", code, errOut)
	}
	m := regexp.MustCompile(`open: +(\S+)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "█") || !strings.Contains(out, "phone's camera") {
		t.Fatalf("pair printed no web QR and link:\n%s", out)
	}
	return m[1]
}

func TestPairShowsTheWebLinkByDefault(t *testing.T) {
	d := newDaemon(t)
	link := webPairLink(t, d)
	host := strings.TrimSuffix(strings.TrimPrefix(d.info.URL, "wss://"), "/ws")
	prefix := "https://" + host + "/#pair="
	if !strings.HasPrefix(link, prefix) || !strings.HasPrefix(strings.TrimPrefix(link, prefix), "tpc_") {
		t.Fatalf("link %q, want %s tpc_…", link, prefix)
	}
	// The code in the link pairs a device, once.
	code := strings.TrimPrefix(link, prefix)
	c := d.connect(code, map[string]any{"device_name": "from the link"})
	var ack wire.ConnectionAck
	c.Expect(wire.TypeConnectionAck, &ack)
	if ack.DeviceName != "from the link" || !strings.HasPrefix(ack.DeviceToken, "tdt_") {
		t.Fatalf("pairing with the link's code: %+v", ack)
	}
	c2 := d.connect(code, nil)
	c2.Expect(wire.TypeConnectionError, nil)

	// --app keeps the JSON payload QR, --json the payload.
	_, out, _ := runCmd(t, d.env, "pair", "--app")
	if !strings.Contains(out, "with the app") || strings.Contains(out, "#pair=") || !strings.Contains(out, "app code") {
		t.Fatalf("pair --app:\n%s", out)
	}
	_, out, _ = runCmd(t, d.env, "pair", "--json")
	var p struct{ URL, Token string }
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.URL != d.info.URL || !strings.HasPrefix(p.Token, "tpc_") {
		t.Fatalf("pair --json: %q (%v)", out, err)
	}
}

func TestDaemonServesTheWebClient(t *testing.T) {
	d := newDaemon(t)
	base := strings.Replace(strings.TrimSuffix(d.info.URL, "/ws"), "wss://", "https://", 1)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	page, err := url.Parse(d.info.PairPage)
	if err != nil || page.Query().Get("key") == "" {
		t.Fatalf("pairing page %q: %v", d.info.PairPage, err)
	}
	tests := []struct {
		path, want string
		status     int
	}{
		{"/", `<script type="module" src="/app.js">`, 200},
		{"/app.js", "new Connection(", 200},
		{"/healthz", `"status":"ok"`, 200},
		{page.RequestURI() + "&format=json", `"token":"tpc_`, 200},
		{"/pair?format=json", "the key", 403},
		{"/nothing-here", "404", 404},
	}
	for _, tt := range tests {
		resp, err := client.Get(base + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.want) {
			t.Errorf("GET %s: %d %.200q", tt.path, resp.StatusCode, body)
		}
	}
}

// deviceReply sends one device request and returns the answer.
func deviceReply(c *wstest.Client, typ string, payload any) wire.Envelope {
	id := fmt.Sprintf("%s-%d", typ, time.Now().UnixNano())
	c.Send(typ, id, payload)
	for {
		env := c.Read()
		if env.ID == id {
			return env
		}
	}
}

func TestDeviceMessages(t *testing.T) {
	d := newDaemon(t)
	c, ack := d.phone(nil)

	// A second device, to rename and revoke.
	_, out, _ := runCmd(t, d.env, "pair", "--json")
	var p struct{ Token string }
	json.Unmarshal([]byte(out), &p)
	other := d.connect(p.Token, map[string]any{"device_name": "lost phone"})
	var otherAck wire.ConnectionAck
	other.Expect(wire.TypeConnectionAck, &otherAck)

	var list wire.DeviceList
	env := deviceReply(c, wire.TypeDeviceList, nil)
	wstest.Decode(t, env, &list)
	if env.Type != wire.TypeDeviceListResponse || len(list.Devices) != 2 {
		t.Fatalf("device_list: %s %+v", env.Type, list)
	}
	for _, dev := range list.Devices {
		if dev.Current != (dev.DeviceID == ack.DeviceID) || !dev.Online || dev.Revoked || dev.PairedAt == "" {
			t.Errorf("device %+v (this connection is %s)", dev, ack.DeviceID)
		}
	}

	malformed := []struct {
		name, typ, raw, code string
	}{
		{"list payload not an object", wire.TypeDeviceList, `[]`, wire.CodeInvalidMessage},
		{"rename without id", wire.TypeDeviceRename, `{"name":"x"}`, wire.CodeInvalidMessage},
		{"rename empty name", wire.TypeDeviceRename, `{"device_id":"` + otherAck.DeviceID + `","name":"  "}`, wire.CodeInvalidMessage},
		{"rename name too long", wire.TypeDeviceRename, `{"device_id":"` + otherAck.DeviceID + `","name":"` + strings.Repeat("é", bridge.MaxDeviceName+1) + `"}`, wire.CodeInvalidMessage},
		{"rename name not a string", wire.TypeDeviceRename, `{"device_id":"` + otherAck.DeviceID + `","name":7}`, wire.CodeInvalidMessage},
		{"rename unknown device", wire.TypeDeviceRename, `{"device_id":"dev_nope","name":"x"}`, wire.CodeDeviceNotFound},
		{"revoke without id", wire.TypeDeviceRevoke, `{}`, wire.CodeInvalidMessage},
		{"revoke id not a string", wire.TypeDeviceRevoke, `{"device_id":["a"]}`, wire.CodeInvalidMessage},
		{"revoke unknown device", wire.TypeDeviceRevoke, `{"device_id":"dev_nope"}`, wire.CodeDeviceNotFound},
		{"revoke payload a string", wire.TypeDeviceRevoke, `"dev"`, wire.CodeInvalidMessage},
	}
	for i, tt := range malformed {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("bad-%d", i)
			c.SendRaw(`{"type":"` + tt.typ + `","id":"` + id + `","payload":` + tt.raw + `}`)
			var e wire.ErrorPayload
			env := c.Expect(wire.TypeError, &e)
			if env.ID != id || e.Code != tt.code || !e.Recoverable {
				t.Fatalf("%s: %+v", env.ID, e)
			}
		})
	}

	env = deviceReply(c, wire.TypeDeviceRename, map[string]any{"device_id": otherAck.DeviceID, "name": "  Ana's old phone "})
	wstest.Decode(t, env, &list)
	if env.Type != wire.TypeDeviceListResponse || list.Devices[1].Name != "Ana's old phone" {
		t.Fatalf("after rename: %s %+v", env.Type, list)
	}

	// Revoking cuts the other device's socket at once, and its token stops
	// working.
	start := time.Now()
	env = deviceReply(c, wire.TypeDeviceRevoke, map[string]any{"device_id": otherAck.DeviceID})
	wstest.Decode(t, env, &list)
	if !list.Devices[1].Revoked || list.Devices[1].Online || list.Devices[1].RevokedAt == "" {
		t.Fatalf("after revoke: %+v", list.Devices[1])
	}
	var ce wire.ErrorPayload
	other.WaitFor(wire.TypeConnectionError, &ce, nil)
	if ce.Code != wire.CodeAuthFailed {
		t.Fatalf("revoked device got %+v", ce)
	}
	if code := other.ExpectClose(); code != 1008 {
		t.Fatalf("revoked socket closed with %d", code)
	}
	if since := time.Since(start); since > 200*time.Millisecond {
		t.Errorf("the revoked device was cut off after %s", since)
	}
	again := d.connect(otherAck.DeviceToken, nil)
	again.Expect(wire.TypeConnectionError, nil)
	// The revoking device stays connected.
	if env := deviceReply(c, wire.TypeDeviceList, map[string]any{}); env.Type != wire.TypeDeviceListResponse {
		t.Fatalf("the revoking device: %s", env.Type)
	}
}

// TestWebClientInABrowser drives Debian's chromium through the web client
// (web/e2e/scenarios.mjs) against this daemon with the demo agent, and
// does what the script asks at each point: check a commit, stop and start
// the daemon (sending a message while the browser is away), pair a second
// browser. It runs twice: over WebSockets, then with every page's
// WebSocket failing to open, where the client must fall back to plain
// HTTPS by itself. Screenshots go to $TETHER_SCREENSHOTS (the fallback's
// under fallback/), or a temporary directory.
func TestWebClientInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a real browser")
	}
	for _, transport := range []string{"websocket", "fallback"} {
		t.Run(transport, func(t *testing.T) { webScenarios(t, transport) })
	}
}

// browserScript returns the path of the browser scenario web/e2e/NAME,
// failing the test when Chromium or Playwright is missing.
func browserScript(t *testing.T, name string) string {
	t.Helper()
	script, _ := filepath.Abs(filepath.Join("../../web/e2e", name))
	for _, need := range []string{"/usr/bin/chromium", filepath.Join(filepath.Dir(script), "node_modules/playwright-core")} {
		if _, err := os.Stat(need); err != nil {
			t.Fatalf("%s is missing: run scripts/install-deps", need)
		}
	}
	return script
}

// runBrowser runs the browser scenario web/e2e/NAME against d, with
// PAIR_URL, PROJECT and SHOTS (screenshots: $TETHER_SCREENSHOTS, or a
// temporary directory) in its environment; the test fails unless the
// scenario reached "STEP done" without a page error.
func runBrowser(t *testing.T, d *daemon, name string) {
	t.Helper()
	script := browserScript(t, name)
	shots := os.Getenv("TETHER_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "PAIR_URL="+webPairLink(t, d), "PROJECT="+d.project, "SHOTS="+shots)
	out, err := cmd.CombinedOutput()
	t.Logf("browser:\n%s", out)
	if err != nil || strings.Contains(string(out), "PAGEERROR") || !strings.Contains(string(out), "STEP done") {
		t.Fatalf("the browser scenario failed: %v", err)
	}
}

func webScenarios(t *testing.T, transport string) {
	script := browserScript(t, "scenarios.mjs")
	shots := os.Getenv("TETHER_SCREENSHOTS")
	switch {
	case shots == "":
		shots = t.TempDir()
	case transport != "websocket":
		shots = filepath.Join(shots, transport)
	}
	os.MkdirAll(shots, 0o755)

	d := newDaemon(t)
	listen := d.info.Listen
	gitIn(t, d.project, "config", "user.name", "Ana")
	gitIn(t, d.project, "config", "user.email", "ana@example.com")
	os.WriteFile(filepath.Join(d.project, "main.go"), []byte("package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n"), 0o644)
	os.MkdirAll(filepath.Join(d.project, "pkg"), 0o755)
	var big strings.Builder
	big.WriteString("package pkg\n")
	for i := 2; i <= 1100; i++ {
		fmt.Fprintf(&big, "var v%d = %d // line %d\n", i, i, i)
	}
	os.WriteFile(filepath.Join(d.project, "pkg", "big.go"), []byte(big.String()), 0o644)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "PAIR_URL="+webPairLink(t, d), "PROJECT="+d.project, "SHOTS="+shots, "TRANSPORT="+transport)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	answer := func(s string) { fmt.Fprintln(stdin, s) }
	var steps []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		what, arg, _ := strings.Cut(line, " ")
		switch what {
		case "STEP":
			steps = append(steps, arg)
			t.Log("browser:", arg)
		case "FAIL", "PAGEERROR":
			t.Error("browser:", line)
		case "NEED":
			switch arg = strings.TrimSpace(arg); arg {
			case "committed":
				log := gitIn(t, d.project, "log", "--name-only", "--format=%s", "-1")
				if !strings.Contains(log, "Add main.go from the phone") || !strings.Contains(log, "main.go") || strings.Contains(log, "big.go") {
					t.Errorf("the commit: %q", log)
				}
				answer("ok")
			case "edited":
				// A longer main.go, committed, then changed at both ends: two
				// hunks; and a remote without upstream.
				var body strings.Builder
				body.WriteString("package main\n")
				for i := 2; i <= 20; i++ {
					fmt.Fprintf(&body, "// line %d\n", i)
				}
				os.WriteFile(filepath.Join(d.project, "main.go"), []byte(body.String()), 0o644)
				gitIn(t, d.project, "commit", "-q", "-am", "Longer main.go")
				edited := strings.Replace(body.String(), "// line 2\n", "// line 2, first hunk\n", 1)
				os.WriteFile(filepath.Join(d.project, "main.go"), []byte(strings.Replace(edited, "// line 19\n", "// line 19, second hunk\n", 1)), 0o644)
				bare := filepath.Join(filepath.Dir(d.project), "origin.git")
				gitIn(t, d.project, "init", "-q", "--bare", "-b", "main", bare)
				gitIn(t, d.project, "remote", "add", "origin", bare)
				answer("ok")
			case "hunk-staged":
				if cached := gitIn(t, d.project, "diff", "--cached"); !strings.Contains(cached, "second hunk") || strings.Contains(cached, "first hunk") {
					t.Errorf("staged after one hunk:\n%s", cached)
				}
				answer("ok")
			case "pushed":
				head := gitIn(t, d.project, "rev-parse", "HEAD")
				if remote := gitIn(t, d.project, "rev-parse", "origin/main"); remote != head || strings.Contains(gitIn(t, d.project, "show", "HEAD:main.go"), "first hunk") {
					t.Errorf("pushed %s, HEAD %s", remote, head)
				}
				if up := gitIn(t, d.project, "rev-parse", "--abbrev-ref", "main@{upstream}"); strings.TrimSpace(up) != "origin/main" {
					t.Errorf("upstream %q", up)
				}
				answer("ok")
			case "stop":
				d.stop()
				answer("ok")
			case "start":
				d.start("--listen", listen)
				c, ack := d.phone(nil)
				if len(ack.ActiveSessions) != 1 {
					t.Fatalf("after restart: %+v", ack.ActiveSessions)
				}
				id := ack.ActiveSessions[0].SessionID
				c.Send(wire.TypeMessage, "away", map[string]any{"session_id": id, "content": "sent while the browser was away"})
				c.WaitFor(wire.TypeTurnComplete, nil, forSession(id))
				answer("ok")
			case "pair":
				answer(webPairLink(t, d))
			case "terminal-turn":
				// A Claude Code session in a terminal: a turn of two API
				// messages in its transcript (Claude Code's own lines),
				// and its hooks.
				id := "5d1c3c4e-0e55-4d59-9a51-1f3e1f9f7a10"
				path := filepath.Join(envMap(d.env)["HOME"], ".claude", "projects", "-terminal", id+".jsonl")
				lines, err := os.ReadFile("../../session/testdata/transcript.jsonl")
				if err == nil {
					err = os.MkdirAll(filepath.Dir(path), 0o700)
				}
				if err == nil {
					err = os.WriteFile(path, lines, 0o600)
				}
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range []string{"UserPromptSubmit", "Stop"} {
					if code, out := d.postHook(hookBody(id, ev, d.project, map[string]any{"transcript_path": path})); code != 200 {
						t.Fatalf("%s: %d %s", ev, code, out)
					}
				}
				answer(id)
			default:
				t.Errorf("the script needs %q", arg)
				answer("")
			}
		default:
			t.Log("browser:", line)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("scenarios: %v\n%s", err, stderr.String())
	}
	if len(steps) == 0 || steps[len(steps)-1] != "done" {
		t.Fatalf("the scenarios stopped after %q", steps)
	}
	if _, err := os.Stat(filepath.Join(d.project, "rejected-file")); err == nil {
		t.Error("the rejected command ran")
	}
	for _, name := range []string{"sessions", "chat", "approvals", "git-diff", "git-branches", "files", "offline", "devices", "chat-dark", "chat-image", "chat-two-devices", "terminal-usage"} {
		if fi, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || fi.Size() < 1000 {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
}
