// Package wstest is a WebSocket client for tests that speak the phone
// protocol to a real daemon: it sends frames, reads them with deadlines and
// checks what arrives.
package wstest

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tetherdev/tether/wire"
)

// Timeout bounds every wait of a Client. It only ends a wait that should
// have succeeded, so it is generous: a turn of the real Claude Code CLI
// (spawned, resuming a session) took over 10 s on a loaded 2-core CI
// machine.
var Timeout = 30 * time.Second

// PinnedDialer trusts exactly the certificate whose SHA-256 fingerprint is
// fp ("sha256:HEX"), as a phone that scanned the pairing QR code does.
func PinnedDialer(fp string) *websocket.Dialer {
	return &websocket.Dialer{HandshakeTimeout: Timeout, TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // verified by the pin below
		VerifyConnection: func(cs tls.ConnectionState) error {
			sum := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if "sha256:"+hex.EncodeToString(sum[:]) != fp {
				return errors.New("certificate does not match the pinned fingerprint")
			}
			return nil
		},
	}}
}

// CADialer trusts cert as a root.
func CADialer(cert *x509.Certificate) *websocket.Dialer {
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &websocket.Dialer{HandshakeTimeout: Timeout, TLSClientConfig: &tls.Config{RootCAs: pool}}
}

// Client is one test connection, over a WebSocket (Dial) or the HTTPS
// fallback transport (DialSSE).
type Client struct {
	T   testing.TB
	WS  *websocket.Conn // nil over the fallback
	sse *sseLink
	// Seen holds every frame read, in order.
	Seen []wire.Envelope
}

// Dial connects, failing the test on error; the connection is closed when
// the test ends.
func Dial(t testing.TB, d *websocket.Dialer, url string, header http.Header) *Client {
	t.Helper()
	ws, resp, err := d.Dial(url, header)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (HTTP %d)", url, err, status)
	}
	t.Cleanup(func() { ws.Close() })
	return &Client{T: t, WS: ws}
}

// SendRaw writes one text frame.
func (c *Client) SendRaw(s string) {
	c.T.Helper()
	if c.sse != nil {
		if err := c.sse.send([]byte(s)); err != nil {
			c.T.Fatalf("send: %v", err)
		}
		return
	}
	if err := c.WS.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		c.T.Fatalf("write: %v", err)
	}
}

// Send writes an envelope; an empty id is left out, a nil payload too.
func (c *Client) Send(typ, id string, payload any) {
	c.T.Helper()
	env := map[string]any{"type": typ, "timestamp": wire.Timestamp(time.Now())}
	if id != "" {
		env["id"] = id
	}
	if payload != nil {
		env["payload"] = payload
	}
	b, err := json.Marshal(env)
	if err != nil {
		c.T.Fatal(err)
	}
	c.SendRaw(string(b))
}

// Read returns the next frame, failing the test after Timeout.
func (c *Client) Read() wire.Envelope {
	c.T.Helper()
	env, err := c.TryRead(Timeout)
	if err != nil {
		c.T.Fatalf("read: %v", err)
	}
	return env
}

// TryRead returns the next frame or the error that ended the wait.
func (c *Client) TryRead(wait time.Duration) (wire.Envelope, error) {
	data, err := c.readFrame(time.Now().Add(wait))
	if err != nil {
		return wire.Envelope{}, err
	}
	var env wire.Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		c.T.Fatalf("server sent invalid JSON %q: %v", data, err)
	}
	c.Seen = append(c.Seen, env)
	return env, nil
}

// Expect reads the next frame, checks its type and decodes its payload into
// v unless v is nil.
func (c *Client) Expect(typ string, v any) wire.Envelope {
	c.T.Helper()
	env := c.Read()
	if env.Type != typ {
		c.T.Fatalf("got %s %s, want %s", env.Type, env.Payload, typ)
	}
	Decode(c.T, env, v)
	return env
}

// WaitFor reads until a frame of type typ for which match (if not nil)
// holds, and decodes it into v. Frames before it stay in Seen.
func (c *Client) WaitFor(typ string, v any, match func(wire.Envelope) bool) wire.Envelope {
	c.T.Helper()
	deadline := time.Now().Add(Timeout)
	for time.Now().Before(deadline) {
		env, err := c.TryRead(time.Until(deadline))
		if err != nil {
			c.T.Fatalf("waiting for %s: %v", typ, err)
		}
		if env.Type == typ && (match == nil || match(env)) {
			Decode(c.T, env, v)
			return env
		}
	}
	c.T.Fatalf("no %s within %v", typ, Timeout)
	return wire.Envelope{}
}

// Decode unmarshals env's payload into v unless v is nil.
func Decode(t testing.TB, env wire.Envelope, v any) {
	t.Helper()
	if v == nil {
		return
	}
	if err := json.Unmarshal(env.Payload, v); err != nil {
		t.Fatalf("payload of %s: %v", env.Type, err)
	}
}

// ReadRaw returns the next frame's bytes, undecoded and not kept in Seen
// (for benchmarks).
func (c *Client) ReadRaw(wait time.Duration) ([]byte, error) {
	return c.readFrame(time.Now().Add(wait))
}

func (c *Client) readFrame(deadline time.Time) ([]byte, error) {
	if c.sse != nil {
		return c.sse.read(time.Until(deadline))
	}
	c.WS.SetReadDeadline(deadline)
	_, data, err := c.WS.ReadMessage()
	return data, err
}

// ExpectClose reads through any frames until the connection closes and
// returns the close code (1006 for a connection dropped without one).
func (c *Client) ExpectClose() int {
	c.T.Helper()
	deadline := time.Now().Add(Timeout)
	for {
		_, err := c.readFrame(deadline)
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.T.Fatalf("connection still open after %v", Timeout)
		}
		return websocket.CloseAbnormalClosure
	}
}

// Auth sends auth with token and extra payload fields, and returns the
// answer.
func (c *Client) Auth(token string, extra map[string]any) wire.Envelope {
	c.T.Helper()
	p := map[string]any{"token": token, "client_version": "1.0.0", "platform": "test"}
	for k, v := range extra {
		p[k] = v
	}
	c.Send(wire.TypeAuth, "auth-1", p)
	return c.Read()
}
