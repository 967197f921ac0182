package main

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

// minimalCommand is the first argument that runs the minimal server
// instead of measuring.
const minimalCommand = "minimal-server"

// runMinimal serves the least a server of the protocol's connection level
// does: TLS, the WebSocket upgrade, auth against one fixed token,
// connection_ack, heartbeat_pong. Nothing is stored or looked up, so its
// rates are the ceiling of a Go server on the same libraries: the
// reference tether's connection paths are measured against.
func runMinimal(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet(minimalCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:18444", "address to listen on")
	certFile := fs.String("cert", "", "certificate (PEM); without it plain ws")
	keyFile := fs.String("key", "", "private key (PEM)")
	tokenField := fs.String("token", "env:MINIMAL_TOKEN", "the one token accepted, or env:VAR")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	token, err := resolveToken(*tokenField, getenv)
	if err != nil {
		fmt.Fprintln(stderr, "minimal-server: -token:", err)
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "minimal-server:", err)
		return 1
	}
	if *certFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			fmt.Fprintln(stderr, "minimal-server:", err)
			return 1
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	}
	srv := &http.Server{Handler: minimalHandler(token), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close() // Serve then returns ErrServerClosed
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "minimal-server:", err)
		return 1
	}
	return 0
}

// minimalFrame is what the minimal server reads of a client's frame.
type minimalFrame struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Payload struct {
		Token string `json:"token"`
	} `json:"payload"`
}

func minimalHandler(token string) http.Handler {
	up := websocket.Upgrader{ReadBufferSize: 512, WriteBufferSize: 1024}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		var f minimalFrame
		if _, data, err := ws.ReadMessage(); err != nil || json.Unmarshal(data, &f) != nil || f.Type != "auth" {
			return
		}
		if subtle.ConstantTimeCompare([]byte(f.Payload.Token), []byte(token)) != 1 {
			_ = ws.WriteJSON(map[string]any{"type": "connection_error", "id": f.ID, "payload": map[string]string{"code": "AUTH_FAILED", "message": "Invalid token"}}) // a client that is gone reads neither this nor the close
			ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "AUTH_FAILED"), time.Now().Add(time.Second))
			return
		}
		ack := map[string]any{"type": "connection_ack", "id": f.ID, "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "payload": map[string]any{
			"server_version": "minimal", "supported_agents": []string{}, "active_sessions": []any{}, "pending_approvals": []any{},
		}}
		if err := ws.WriteJSON(ack); err != nil {
			return
		}
		for {
			ws.SetReadDeadline(time.Now().Add(60 * time.Second))
			_, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if json.Unmarshal(data, &f) != nil || f.Type != "heartbeat_ping" {
				continue
			}
			pong := map[string]any{"type": "heartbeat_pong", "id": f.ID, "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "payload": map[string]any{}}
			if err := ws.WriteJSON(pong); err != nil {
				return
			}
		}
	})
	return mux
}
