package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tetherdev/tether/control"
	"github.com/tetherdev/tether/internal/wstest"
)

// TestMain lets the test binary stand in for the tether binary: inside
// sandboxes (the daemon re-executes itself as `tether sandbox-bridge`), as
// a whole daemon process when TETHER_TEST_AS_TETHER is set, and installed
// under the name tether (the systemd test's service runs it so).
func TestMain(m *testing.M) {
	asTether := os.Getenv("TETHER_TEST_AS_TETHER") == "1" || filepath.Base(os.Args[0]) == "tether"
	if len(os.Args) > 1 && (os.Args[1] == "sandbox-bridge" || os.Args[1] == "mcp" || asTether) {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// syncBuffer is a bytes.Buffer safe for a goroutine writing while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// isolated keeps a test's daemon away from a tailscaled that may run on
// the developer's machine (--tls auto would pick its certificate), unless
// the test names a socket itself.
func isolated(env []string) []string {
	if _, ok := envMap(env)["TETHER_TAILSCALE_SOCKET"]; ok {
		return env
	}
	return append(env[:len(env):len(env)], "TETHER_TAILSCALE_SOCKET=/nonexistent/tailscaled.sock")
}

func runCmd(t testing.TB, env []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, isolated(env), &out, &errb)
	return code, out.String(), errb.String()
}

// startDaemon runs `tether serve` on a free loopback port and waits until
// it has recorded its runtime info.
func startDaemon(t testing.TB, env []string, args ...string) (runtimeInfo, *syncBuffer, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), isolated(env), stdout, stderr)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Errorf("serve exited %d: %s", code, stderr)
				}
			case <-time.After(15 * time.Second):
				t.Error("serve did not stop within 15 s")
			}
		})
	}
	t.Cleanup(stop)
	dir := dataDirOf(env)
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(20 * time.Millisecond) {
		if info, err := readRuntimeInfo(dir); err == nil && info.PID == os.Getpid() && strings.Contains(stdout.String(), "`tether pair`") {
			return info, stdout, stop
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s", code, stderr)
		default:
		}
	}
	t.Fatalf("daemon did not start: %s", stderr)
	return runtimeInfo{}, nil, nil
}

func dataDirOf(env []string) string {
	return envMap(env)["TETHER_DATA"]
}

func authOver(t *testing.T, url, fp, token string) (*websocket.Conn, map[string]any) {
	t.Helper()
	ws, _, err := wstest.PinnedDialer(fp).Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { ws.Close() })
	ws.WriteJSON(map[string]any{"type": "auth", "id": "a", "payload": map[string]any{"token": token, "platform": "ios"}})
	var env struct {
		Type    string
		Payload map[string]any
	}
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := ws.ReadJSON(&env); err != nil {
		t.Fatal(err)
	}
	if env.Type != "connection_ack" {
		t.Fatalf("auth: %s %v", env.Type, env.Payload)
	}
	return ws, env.Payload
}

func TestServePairAndDevices(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	env := []string{"TETHER_DATA=" + dir, "HOME=" + t.TempDir()}
	info, stdout, _ := startDaemon(t, env)

	// First start with nothing paired: a QR code, the URL and the fingerprint.
	out := stdout.String()
	for _, want := range []string{"No device is paired yet", info.URL, info.Fingerprint, "█", "tether pair"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve output lacks %q:\n%s", want, out)
		}
	}
	for name, mode := range map[string]os.FileMode{"": 0o700, dbFile: 0o600, runtimeFile: 0o600, "tls/key.pem": 0o600, control.SocketName: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, %v; want %v", name, fi.Mode().Perm(), err, mode)
		}
	}

	code, out, errOut := runCmd(t, env, "pair", "--json")
	if code != 0 {
		t.Fatalf("pair --json: %d %s", code, errOut)
	}
	var p struct {
		V                   int
		URL, Token, FP, Exp string
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("pair --json printed %q", out)
	}
	if p.V != 1 || p.URL != info.URL || p.FP != info.Fingerprint || !strings.HasPrefix(p.FP, "sha256:") || len(p.FP) != 71 {
		t.Fatalf("payload %+v, daemon %+v", p, info)
	}
	if exp, err := time.Parse(time.RFC3339, p.Exp); err != nil || time.Until(exp) < 9*time.Minute || time.Until(exp) > 10*time.Minute {
		t.Fatalf("exp %q", p.Exp)
	}

	ws, ack := authOver(t, p.URL, p.FP, p.Token)
	id := ack["device_id"].(string)

	code, out, _ = runCmd(t, env, "devices", "list", "--json")
	var devs []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &devs) != nil || len(devs) != 1 || devs[0]["id"] != id || devs[0]["platform"] != "ios" || devs[0]["last_address"] != "127.0.0.1" {
		t.Fatalf("devices list --json: %d %s", code, out)
	}
	token := ack["device_token"].(string)
	// The daemon remembers the device it authenticated; the rename
	// reaches it through the control socket, so the next connection
	// carries the new name.
	authOver(t, p.URL, p.FP, token)
	if code, out, _ = runCmd(t, env, "devices", "rename", id, "Ana's phone"); code != 0 || !strings.Contains(out, "the running daemon uses the new name") {
		t.Fatalf("rename: %d %s", code, out)
	}
	if _, again := authOver(t, p.URL, p.FP, token); again["device_name"] != "Ana's phone" {
		t.Fatalf("after rename, connection_ack names %v", again["device_name"])
	}
	code, out, _ = runCmd(t, env, "devices", "list")
	if code != 0 || !strings.Contains(out, "Ana's phone") || !strings.Contains(out, "LAST SEEN") {
		t.Fatalf("devices list: %s", out)
	}

	// The revocation reaches the daemon through its control socket: the
	// command returns once the connection is being closed.
	if code, out, _ = runCmd(t, env, "devices", "revoke", id); code != 0 || !strings.Contains(out, "the running daemon has closed its connections") {
		t.Fatalf("revoke: %d %s", code, out)
	}
	ws.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
				t.Fatalf("after revoke: %v", err)
			}
			break
		}
	}
	// The remembered device is forgotten: its token is refused.
	again, _, err := wstest.PinnedDialer(p.FP).Dial(p.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	again.WriteJSON(map[string]any{"type": "auth", "id": "a", "payload": map[string]any{"token": token}})
	var refused struct {
		Type    string
		Payload struct{ Code string }
	}
	again.SetReadDeadline(time.Now().Add(5 * time.Second))
	if err := again.ReadJSON(&refused); err != nil || refused.Type != "connection_error" || refused.Payload.Code != "AUTH_FAILED" {
		t.Fatalf("a revoked device's token: %+v, %v", refused, err)
	}
	if code, _, errOut = runCmd(t, env, "devices", "revoke", "dev_nope"); code != 1 || !strings.Contains(errOut, "no device") {
		t.Fatalf("revoke unknown: %d %s", code, errOut)
	}
}

func TestPairWithoutDaemon(t *testing.T) {
	dir := t.TempDir()
	env := []string{"TETHER_DATA=" + dir}
	code, out, errOut := runCmd(t, env, "pair", "--json", "--listen", "127.0.0.1:9999")
	if code != 0 {
		t.Fatalf("pair: %d %s", code, errOut)
	}
	var p struct{ URL, FP string }
	json.Unmarshal([]byte(out), &p)
	if p.URL != "wss://127.0.0.1:9999/ws" || !strings.HasPrefix(p.FP, "sha256:") {
		t.Fatalf("payload %s", out)
	}
	// The daemon then serves the very certificate the code pins.
	info, _, _ := startDaemon(t, env)
	if info.Fingerprint != p.FP {
		t.Fatalf("daemon fingerprint %s, pairing payload %s", info.Fingerprint, p.FP)
	}
	code, out, _ = runCmd(t, env, "pair", "--url", "wss://devbox.example:443/ws")
	if code != 0 || !strings.Contains(out, "wss://devbox.example:443/ws") || !strings.Contains(out, "█") {
		t.Fatalf("pair --url: %s", out)
	}
}

func TestFlagsAndEnvironment(t *testing.T) {
	tests := []struct {
		name    string
		env     []string
		args    []string
		code    int
		errPart string
	}{
		{"no command", nil, nil, 2, "Usage"},
		{"unknown command", nil, []string{"frobnicate"}, 2, "unknown command"},
		{"tls off on all interfaces", nil, []string{"serve", "--tls", "off", "--listen", "0.0.0.0:7420"}, 2, "loopback"},
		{"tls off from the environment", []string{"TETHER_TLS=off", "TETHER_LISTEN=[::]:7420"}, []string{"serve"}, 2, "loopback"},
		{"bad tls mode", nil, []string{"serve", "--tls", "maybe"}, 2, "--tls"},
		{"files without cert", nil, []string{"serve", "--tls", "files"}, 2, "--cert"},
		{"bad listen", nil, []string{"serve", "--listen", "nope"}, 2, "--listen"},
		{"bad env value", []string{"TETHER_TTL=soon"}, []string{"pair"}, 2, "TETHER_TTL"},
		{"bad url", nil, []string{"pair", "--url", "http://x"}, 2, "--url"},
		{"devices usage", nil, []string{"devices", "revoke"}, 2, "Usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{"TETHER_DATA=" + t.TempDir()}, tt.env...)
			code, _, errOut := runCmd(t, env, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.errPart) {
				t.Fatalf("exit %d, stderr %q; want %d containing %q", code, errOut, tt.code, tt.errPart)
			}
		})
	}
	if code, out, _ := runCmd(t, nil, "version"); code != 0 || !strings.HasPrefix(out, "tether ") {
		t.Fatalf("version: %d %q", code, out)
	}
}

func TestDefaultDataDir(t *testing.T) {
	if got := defaultDataDir(map[string]string{"XDG_DATA_HOME": "/x/data", "HOME": "/h"}); got != "/x/data/tether" {
		t.Errorf("with XDG_DATA_HOME: %s", got)
	}
	if got := defaultDataDir(map[string]string{"XDG_DATA_HOME": "relative", "HOME": "/h"}); got != "/h/.local/share/tether" {
		t.Errorf("relative XDG_DATA_HOME is ignored per the spec: %s", got)
	}
	if got := defaultDataDir(map[string]string{"HOME": "/h"}); got != "/h/.local/share/tether" {
		t.Errorf("without XDG_DATA_HOME: %s", got)
	}
}

// TestUsageListsTheCommands: `tether help` names every command meant for
// users, one a line, and holds nothing else in its list (a merge once left
// Go code there).
func TestUsageListsTheCommands(t *testing.T) {
	t.Parallel()
	code, out, _ := runCmd(t, nil, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	list, _, _ := strings.Cut(strings.SplitN(out, "Usage:\n", 2)[1], "\n\n")
	named := map[string]bool{}
	for _, line := range strings.Split(list, "\n") {
		switch {
		case strings.HasPrefix(line, "  tether "):
			named[strings.Fields(line)[1]] = true
		case strings.HasPrefix(line, strings.Repeat(" ", 20)) && strings.TrimSpace(line) != "":
		default:
			t.Errorf("usage line %q is neither a command nor its continuation", line)
		}
	}
	for _, c := range []string{"serve", "pair", "devices", "doctor", "hooks", "hook", "claude", "service", "backup", "runs", "version"} {
		if !named[c] {
			t.Errorf("usage does not name %q:\n%s", c, list)
		}
	}
}

// TestSecondDaemonOnTheSameDataDirIsRefused: a second `tether serve` on a
// data directory a daemon serves (a service and a terminal, say) stops
// before it touches anything, and says which daemon has it.
func TestSecondDaemonOnTheSameDataDirIsRefused(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	code, _, errOut := runCmd(t, d.env, "serve", "--listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errOut, "already serves the data directory") || !strings.Contains(errOut, fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("a second daemon: exit %d, %s", code, errOut)
	}
	if _, ack := d.phone(nil); ack.ServerVersion == "" {
		t.Fatal("the first daemon no longer answers")
	}
}
