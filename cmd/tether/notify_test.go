package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetherdev/tether/wire"
)

// TestNtfyHearsAnApprovalWaiting runs the daemon with --notify pointing at
// an ntfy server of the test's and an access token from a file: an
// approval a demo session asks for is published to the topic, with the
// tool's name but not the command (--push-detail summary, the default),
// and a click URL that opens the web client on that approval.
func TestNtfyHearsAnApprovalWaiting(t *testing.T) {
	t.Parallel()
	published := make(chan map[string]any, 10)
	ntfy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/" || r.Header.Get("Authorization") != "Bearer tk_from_file" || json.Unmarshal(body, &m) != nil {
			http.Error(w, "unexpected publish", http.StatusBadRequest)
			t.Errorf("publish %s %s %q", r.URL.Path, r.Header.Get("Authorization"), body)
			return
		}
		published <- m
	}))
	defer ntfy.Close()
	tokenFile := filepath.Join(t.TempDir(), "ntfy-token")
	os.WriteFile(tokenFile, []byte("tk_from_file\n"), 0o600)
	d := newDaemon(t, "--notify", ntfy.URL+"/tether-alice", "--notify-token-file", tokenFile)
	c, _ := d.phone(nil)
	const id = "ntfy-session"
	d.startSession(c, id, "ask")
	c.WaitFor(wire.TypeSessionReady, nil, nil)
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "run: echo private-command-text"})
	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	for m := range published {
		if m["title"] != "Approval needed: Bash" {
			continue
		}
		web := strings.Replace(strings.TrimSuffix(d.info.URL, "ws"), "wss://", "https://", 1)
		if m["topic"] != "tether-alice" || m["click"] != web+"#approval="+ar.ToolCallID+"&session="+id || m["priority"] != 4.0 {
			t.Fatalf("published %v; want topic tether-alice, click %s#approval=%s&session=%s", m, web, ar.ToolCallID, id)
		}
		if strings.Contains(m["message"].(string), "private-command-text") {
			t.Fatalf("the summary carries the command: %v", m)
		}
		return
	}
}

// TestWebPushKeyAndContact: the daemon makes its VAPID key pair once, in
// the data directory and readable by its user only, and gives its public
// key to a phone (push_config); a --push-contact that Apple's push service
// would refuse stops `tether serve` before it starts.
func TestWebPushKeyAndContact(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, _ := d.phone(nil)
	c.Send(wire.TypePushConfig, "cfg", nil)
	var cfg wire.PushConfig
	c.WaitFor(wire.TypePushConfigResponse, &cfg, nil)
	path := filepath.Join(envMap(d.env)["TETHER_DATA"], "vapid.json")
	var kept struct{ Public string }
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &kept) != nil || !cfg.Enabled || cfg.VAPIDPublicKey != kept.Public {
		t.Fatalf("push_config %+v; %s holds %s (%v)", cfg, path, b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, %v", path, fi.Mode(), err)
	}

	code, _, stderr := runCmd(t, []string{"HOME=" + t.TempDir()}, "serve", "--push-contact", "mailto:me@devbox.local")
	if code != 2 || !strings.Contains(stderr, "--push-contact") {
		t.Fatalf("serve --push-contact mailto:me@devbox.local: exit %d, %q", code, stderr)
	}
}
