package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// Sentinel errors for the expected ways a connection fails.
var (
	// errRefused: the server answered auth with connection_error.
	errRefused = errors.New("server refused auth")
	// errFingerprint: the certificate does not match the pinned one.
	errFingerprint = errors.New("certificate fingerprint mismatch")
	// errNoCertCheck: a wss target has neither a fingerprint nor insecure.
	errNoCertCheck = errors.New("wss needs a certificate check: give sha256:HEX (-fp) or insecure (-insecure)")
	// errBadPong: the answer to heartbeat_ping carried another id.
	errBadPong = errors.New("heartbeat_pong with the wrong id")
)

// clientVersion is what the load tool reports as its client_version.
const clientVersion = "0.1.0"

// A client connects to one target.
type client struct {
	target  target
	dialer  *websocket.Dialer
	timeout time.Duration
}

// newClient prepares connections to t; every read, write and dial step
// gives up after timeout.
func newClient(t target, timeout time.Duration) (*client, error) {
	d := &websocket.Dialer{HandshakeTimeout: timeout}
	if strings.HasPrefix(t.URL, "wss:") {
		cfg, err := tlsConfig(t)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", t.Name, err)
		}
		d.TLSClientConfig = cfg
	}
	return &client{target: t, dialer: d, timeout: timeout}, nil
}

// tlsConfig checks the server's certificate by its pinned fingerprint, or
// not at all when the target is insecure. It never resumes sessions, so
// each connection does a full TLS handshake.
func tlsConfig(t target) (*tls.Config, error) {
	switch {
	case t.Insecure:
		// The operator asked for no check with -insecure.
		return &tls.Config{InsecureSkipVerify: true}, nil
	case t.Fingerprint != nil:
		want := t.Fingerprint
		return &tls.Config{
			// The chain is not verified: VerifyConnection pins the leaf.
			InsecureSkipVerify: true,
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errFingerprint
				}
				got := sha256.Sum256(cs.PeerCertificates[0].Raw)
				if subtle.ConstantTimeCompare(got[:], want) != 1 {
					return fmt.Errorf("%w: server's is sha256:%x", errFingerprint, got)
				}
				return nil
			},
		}, nil
	default:
		return nil, errNoCertCheck
	}
}

// envelope is the protocol's frame.
type envelope struct {
	Type      string `json:"type"`
	ID        string `json:"id,omitempty"`
	Timestamp string `json:"timestamp,omitempty"`
	Payload   any    `json:"payload"`
}

// authPayload is the payload of auth.
type authPayload struct {
	Token           string `json:"token"`
	ClientVersion   string `json:"client_version"`
	Platform        string `json:"platform"`
	ProtocolVersion string `json:"protocol_version"`
}

// reply is the part of a server frame the load tool looks at.
type reply struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Payload struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"payload"`
}

// connect opens an authenticated connection: TCP, TLS, WebSocket upgrade,
// auth, and the server's connection_ack.
func (c *client) connect(ctx context.Context) (*websocket.Conn, error) {
	conn, _, err := c.connectTimed(ctx)
	return conn, err
}

// connectTimed is connect, also returning how long the server took from
// the auth frame sent to its connection_ack read.
func (c *client) connectTimed(ctx context.Context) (*websocket.Conn, time.Duration, error) {
	conn, resp, err := c.dialer.DialContext(ctx, c.target.URL, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, 0, fmt.Errorf("dial %s: %w", c.target.URL, err)
	}
	t0 := time.Now()
	if err := c.authenticate(conn); err != nil {
		conn.Close()
		return nil, 0, err
	}
	return conn, time.Since(t0), nil
}

// authenticate sends auth and waits for connection_ack, skipping frames of
// other types that a server may send first.
func (c *client) authenticate(conn *websocket.Conn) error {
	now := time.Now()
	auth, err := json.Marshal(envelope{
		Type:      "auth",
		ID:        "a1",
		Timestamp: now.UTC().Format(time.RFC3339Nano),
		Payload: authPayload{
			Token:           c.target.Token,
			ClientVersion:   clientVersion,
			Platform:        "load",
			ProtocolVersion: "1.0",
		},
	})
	if err != nil {
		return fmt.Errorf("auth frame: %w", err)
	}
	deadline := now.Add(c.timeout)
	conn.SetWriteDeadline(deadline)
	if err := conn.WriteMessage(websocket.TextMessage, auth); err != nil {
		return fmt.Errorf("send auth: %w", err)
	}
	conn.SetReadDeadline(deadline)
	for {
		r, err := readReply(conn)
		if err != nil {
			return fmt.Errorf("wait for connection_ack: %w", err)
		}
		switch r.Type {
		case "connection_ack":
			conn.SetReadDeadline(time.Time{})
			return nil
		case "connection_error":
			return fmt.Errorf("%w: %s: %s", errRefused, r.Payload.Code, r.Payload.Message)
		}
	}
}

// readReply reads one frame and decodes the fields the tool needs.
func readReply(conn *websocket.Conn) (reply, error) {
	_, data, err := conn.ReadMessage()
	if err != nil {
		return reply{}, fmt.Errorf("read: %w", err)
	}
	var r reply
	if err := json.Unmarshal(data, &r); err != nil {
		return reply{}, fmt.Errorf("decode frame: %w", err)
	}
	return r, nil
}

// pingFrame builds a heartbeat_ping with the given id without reflection,
// to keep the load tool's own CPU use low. id must need no JSON escaping.
func pingFrame(buf []byte, id string, now time.Time) []byte {
	buf = append(buf[:0], `{"type":"heartbeat_ping","id":"`...)
	buf = append(buf, id...)
	buf = append(buf, `","timestamp":"`...)
	buf = now.UTC().AppendFormat(buf, time.RFC3339Nano)
	return append(buf, `","payload":{}}`...)
}

// ping sends a heartbeat_ping with the given id on conn and waits for its
// heartbeat_pong, skipping frames of other types. buf is scratch space and
// is returned for reuse.
func (c *client) ping(conn *websocket.Conn, id string, buf []byte) ([]byte, error) {
	now := time.Now()
	buf = pingFrame(buf, id, now)
	conn.SetWriteDeadline(now.Add(c.timeout))
	if err := conn.WriteMessage(websocket.TextMessage, buf); err != nil {
		return buf, fmt.Errorf("send heartbeat_ping: %w", err)
	}
	conn.SetReadDeadline(now.Add(c.timeout))
	for {
		r, err := readReply(conn)
		if err != nil {
			return buf, fmt.Errorf("wait for heartbeat_pong: %w", err)
		}
		if r.Type != "heartbeat_pong" {
			continue
		}
		if r.ID != "" && r.ID != id {
			return buf, fmt.Errorf("%w: sent %s, got %s", errBadPong, id, r.ID)
		}
		return buf, nil
	}
}

// close ends conn the way a well-behaved client does: a close frame, then
// waiting for the server's close frame (or the end of the stream), then
// closing the socket.
func (c *client) close(conn *websocket.Conn) error {
	defer conn.Close()
	deadline := time.Now().Add(c.timeout)
	msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
	if err := conn.WriteControl(websocket.CloseMessage, msg, deadline); err != nil {
		return fmt.Errorf("send close: %w", err)
	}
	conn.SetReadDeadline(deadline)
	for {
		if _, _, err := conn.NextReader(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return nil
			}
			return fmt.Errorf("wait for close: %w", err)
		}
	}
}
