// Package recursor is a test client that behaves like the ReCursor Flutter
// app (github.com/RecursiveDev/ReCursor) on tether's phone protocol. It
// sends exactly the frames the app sends — ids, payload fields in the app's
// order, its timestamp formats, no id where the app sends none, never seq or
// last_seq — and checks every frame it receives against the app's parsers:
// BridgeMessage.fromJson's frame rules (ParseFrame) and the required
// fields, JSON types and enumerations of each message type (Check), as the
// app's source defines them.
package recursor

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// Timeout bounds every wait of a Client, like the app's own request
// timeouts (10 s for auth and health, 30 s for files).
var Timeout = 20 * time.Second

// ClientVersion is the version the app announces.
const ClientVersion = "0.1.0"

// Agent is the agent the app asks for: hard-coded in ChatNotifier.
const Agent = "claude-code"

// ErrBadQR is returned by ParseQR for a payload the app refuses.
var ErrBadQR = errors.New("the app refuses this QR payload")

// ParseQR reads a scanned pairing payload as _onQrDetect and
// BridgeConnectionValidator do: a JSON object with "url" and "token"
// (trimmed), else a URI's query parameters; both non-empty, the url a wss
// URL with a host. "v", "fp" and "exp" are ignored.
func ParseQR(raw string) (bridgeURL, token string, err error) {
	var m map[string]any
	if json.Unmarshal([]byte(raw), &m) == nil {
		u, uok := m["url"].(string)
		t, tok := m["token"].(string)
		if (m["url"] != nil && !uok) || (m["token"] != nil && !tok) {
			return "", "", fmt.Errorf("%w: url and token must be strings", ErrBadQR)
		}
		bridgeURL, token = strings.TrimSpace(u), strings.TrimSpace(t)
	} else if u, perr := url.Parse(raw); perr == nil {
		bridgeURL, token = strings.TrimSpace(u.Query().Get("url")), strings.TrimSpace(u.Query().Get("token"))
	}
	if bridgeURL == "" || token == "" {
		return "", "", fmt.Errorf("%w: url and token are required", ErrBadQR)
	}
	u, err := url.Parse(bridgeURL)
	if err != nil || u.Host == "" || u.Scheme != "wss" {
		return "", "", fmt.Errorf("%w: the url must be wss://HOST", ErrBadQR)
	}
	return bridgeURL, token, nil
}

// App is the app's saved bridge: the URL and the QR's token, which it
// sends on every connect and reconnect. It never reads device_token.
type App struct {
	T testing.TB
	// Dialer stands for the platform's TLS stack: it must verify the
	// certificate against trusted roots, as dart:io does; the app pins
	// nothing.
	Dialer *websocket.Dialer
	URL    string
	Token  string
	// Header is sent with the WebSocket upgrade. The app sends none; a test
	// sets what a reverse proxy in front of the daemon adds.
	Header http.Header
}

// NewApp scans qr (ParseQR) and returns the app set up with it.
func NewApp(t testing.TB, dialer *websocket.Dialer, qr string) *App {
	t.Helper()
	u, tok, err := ParseQR(qr)
	if err != nil {
		t.Fatalf("scan %q: %v", qr, err)
	}
	return &App{T: t, Dialer: dialer, URL: u, Token: tok}
}

// Client is one of the app's connections.
type Client struct {
	T  testing.TB
	WS *websocket.Conn
	// Frames holds every frame received, in order, including dropped ones.
	Frames []Frame
	// Acked lists the notification ids acknowledged, in order: the app
	// acknowledges every notification the moment it arrives.
	Acked []string
}

// Connect dials and authenticates as WebSocketService._doConnect does, and
// returns the connection_ack or connection_error (matched by type).
func (a *App) Connect() (*Client, Frame) {
	a.T.Helper()
	c := a.dial()
	c.sendEnv(object{{"type", "auth"}, {"timestamp", DartISO(time.Now(), true)}, {"payload", object{
		{"token", a.Token}, {"client_version", ClientVersion}, {"platform", "flutter"}, {"purpose", "primary"},
	}}, {"id", "auth-" + uuid4()}})
	return c, c.WaitFor("", isAuthReply)
}

// Probe is the agent screen's "test connection" (AgentNotifier.testConnection):
// its own connection, an auth with purpose "probe", envelope keys in the
// order type, payload, timestamp, id and a local timestamp without a zone.
// It returns the answer and closes.
func (a *App) Probe() Frame {
	a.T.Helper()
	c := a.dial()
	defer c.WS.Close()
	c.sendEnv(object{{"type", "auth"}, {"payload", object{
		{"token", a.Token}, {"client_version", ClientVersion}, {"platform", "flutter"}, {"purpose", "probe"},
	}}, {"timestamp", DartISO(time.Now(), false)}, {"id", "test-" + uuid4()}})
	return c.WaitFor("", isAuthReply)
}

func isAuthReply(f Frame) bool { return f.Type == "connection_ack" || f.Type == "connection_error" }

func (a *App) dial() *Client {
	a.T.Helper()
	ws, resp, err := a.Dialer.Dial(a.URL, a.Header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		a.T.Fatalf("dial %s: %v (HTTP %d)", a.URL, err, status)
	}
	a.T.Cleanup(func() { ws.Close() })
	return &Client{T: a.T, WS: ws}
}

// uuid4 is a random RFC 4122 version 4 UUID, as package uuid's v4() makes.
func uuid4() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// NewUUID returns a fresh version 4 UUID, such as the app makes for a
// session's id.
func NewUUID() string { return uuid4() }

func (c *Client) sendEnv(env object) {
	c.T.Helper()
	b, err := json.Marshal(env)
	if err != nil {
		c.T.Fatal(err)
	}
	if err := c.WS.WriteMessage(websocket.TextMessage, b); err != nil {
		c.T.Fatalf("write: %v", err)
	}
}

// send writes a frame as BridgeMessage.toJson does: type, timestamp (UTC),
// payload, and id only when prefix is not empty. It returns the id.
func (c *Client) send(typ, prefix string, payload object) string {
	c.T.Helper()
	env := object{{"type", typ}, {"timestamp", DartISO(time.Now(), true)}, {"payload", payload}}
	id := ""
	if prefix != "" {
		id = prefix + uuid4()
		env = append(env, kv{"id", id})
	}
	c.sendEnv(env)
	return id
}

// HealthCheck sends WebSocketService.requestHealthCheck's frame.
func (c *Client) HealthCheck() string {
	return c.send("health_check", "health-", object{{"timestamp", DartISO(time.Now(), true)},
		{"client_nonce", uuid4()}, {"client_capabilities", []string{"health_v1", "acknowledgment_v1"}}})
}

// AcknowledgeWarning sends WebSocketService.acknowledgeWarning's frame.
func (c *Client) AcknowledgeWarning(code string) string {
	return c.send("acknowledge_warning", "ack-", object{{"warning_code", code}, {"acknowledged", true},
		{"acknowledged_at", DartISO(time.Now(), true)}})
}

// HeartbeatPing sends the app's ping: no id, an empty payload.
func (c *Client) HeartbeatPing() { c.send("heartbeat_ping", "", object{}) }

// SessionStart sends ChatNotifier.startSession's frame for a session id the
// app made itself; the app does not wait for session_ready.
func (c *Client) SessionStart(sessionID, workingDirectory string) string {
	return c.send("session_start", "req-", object{{"agent", Agent}, {"session_id", sessionID},
		{"working_directory", workingDirectory}, {"resume", false}})
}

// Message sends a chat message (content trimmed, as the app does).
func (c *Client) Message(sessionID, content string) string {
	return c.send("message", "msg-", object{{"session_id", sessionID}, {"content", strings.TrimSpace(content)}, {"role", "user"}})
}

// Decisions of approval_response.
const (
	Approved = "approved"
	Rejected = "rejected"
	Modified = "modified"
)

// ApprovalResponse answers an approval_required frame as
// PendingApprovalsNotifier does: a fresh id, session_id and tool_call_id
// from the request, modifications null, or {"instructions": text} for
// Modified. It sends nothing for a request whose source is "hooks", and
// returns "".
func (c *Client) ApprovalResponse(req Frame, decision, instructions string) string {
	if req.Payload["source"] == "hooks" {
		return ""
	}
	var mods any
	if decision == Modified {
		mods = object{{"instructions", instructions}}
	}
	sid, _ := req.Payload["session_id"].(string)
	tcid, _ := req.Payload["tool_call_id"].(string)
	return c.send("approval_response", "resp-", object{{"session_id", sid}, {"tool_call_id", tcid},
		{"decision", decision}, {"modifications", mods}})
}

// SessionEnd sends ChatNotifier.endSession's frame: no id.
func (c *Client) SessionEnd(sessionID string) {
	c.send("session_end", "", object{{"session_id", sessionID}, {"reason", "user_request"}})
}

// GitStatus sends GitNotifier.fetchStatus's frame.
func (c *Client) GitStatus(sessionID string) string {
	return c.send("git_status_request", "git-", object{{"session_id", sessionID}})
}

// GitCommit sends GitNotifier.commit's frame; nil files is sent as null.
func (c *Client) GitCommit(sessionID, message string, files []string) string {
	return c.send("git_commit", "git-", object{{"session_id", sessionID}, {"message", message}, {"files", files}})
}

// GitDiff sends GitNotifier.fetchDiff's frame (cached is always false).
func (c *Client) GitDiff(sessionID string, files []string) string {
	return c.send("git_diff", "git-", object{{"session_id", sessionID}, {"files", files}, {"cached", false}})
}

// FileList sends RepoNotifier._fetchDirectory's frame.
func (c *Client) FileList(sessionID, path string) string {
	return c.send("file_list", "file-", object{{"session_id", sessionID}, {"path", path}})
}

// FileRead sends RepoNotifier.readFile's frame: offset 0, no limit.
func (c *Client) FileRead(sessionID, path string) string {
	return c.send("file_read", "file-", object{{"session_id", sessionID}, {"path", path}, {"offset", 0}})
}

// ClaudeEvent sends one of the app's client-to-server claude_event frames
// (git_pull, git_push, terminal_*): no id, the fields given in order after
// "type".
func (c *Client) ClaudeEvent(eventType string, fields ...string) {
	p := object{{"type", eventType}}
	for i := 0; i+1 < len(fields); i += 2 {
		p = append(p, kv{fields[i], fields[i+1]})
	}
	c.send("claude_event", "", p)
}

// ParentPath is RepoNotifier.navigateUp's path: the parent of path with
// its leading "/" removed, "/" at the top.
func ParentPath(path string) string {
	i := strings.LastIndex(strings.TrimSuffix(path, "/"), "/")
	if i <= 0 {
		return "/"
	}
	return strings.TrimPrefix(path[:i], "/")
}

// Next reads one frame within wait. A frame the app would drop or misread
// is reported with T.Errorf, and kept in Frames. A notification is
// acknowledged at once, as notificationBootstrapProvider does.
func (c *Client) Next(wait time.Duration) (Frame, error) {
	c.T.Helper()
	c.WS.SetReadDeadline(time.Now().Add(wait))
	mt, data, err := c.WS.ReadMessage()
	if err != nil {
		return Frame{}, fmt.Errorf("read: %w", err)
	}
	if mt != websocket.TextMessage {
		c.T.Errorf("the app drops a binary frame: %q", data)
		return Frame{Raw: data}, nil
	}
	f, err := ParseFrame(data)
	c.Frames = append(c.Frames, f)
	if err != nil {
		c.T.Errorf("%v: %s", err, data)
		return f, nil
	}
	if err := Check(f); err != nil {
		c.T.Errorf("the app's parser: %v\nframe: %s", err, data)
	}
	if f.Type == "notification" {
		id, _ := f.Payload["notification_id"].(string)
		if id == "" {
			id = f.ID
		}
		if id != "" {
			c.send("notification_ack", "", object{{"notification_ids", []string{id}}})
			c.Acked = append(c.Acked, id)
		}
	}
	return f, nil
}

// WaitFor reads until a frame of type typ (any type when "") for which
// match (if not nil) holds, failing the test after Timeout.
func (c *Client) WaitFor(typ string, match func(Frame) bool) Frame {
	c.T.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		f, err := c.Next(time.Until(deadline))
		if err != nil {
			c.T.Fatalf("waiting for %s: %v", typ, err)
		}
		if (typ == "" || f.Type == typ) && (match == nil || match(f)) {
			return f
		}
	}
}

// Reply waits for the first frame carrying id, as RepoNotifier matches its
// pending file requests: whatever its type.
func (c *Client) Reply(id string) Frame {
	c.T.Helper()
	return c.WaitFor("", func(f Frame) bool { return f.ID == id })
}

// ForSession matches frames whose payload names session id.
func ForSession(id string) func(Frame) bool {
	return func(f Frame) bool { return f.Payload["session_id"] == id }
}

// Decode unmarshals the frame's payload into v.
func (f Frame) Decode(v any) error {
	b, err := json.Marshal(f.Payload)
	if err != nil {
		return fmt.Errorf("payload of %s: %w", f.Type, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("payload of %s: %w", f.Type, err)
	}
	return nil
}
