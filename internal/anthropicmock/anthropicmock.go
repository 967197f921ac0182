// Package anthropicmock is a small mock of the Anthropic Messages API for
// tests. It listens on loopback, answers POST /v1/messages with scripted
// replies, streamed as server-sent events exactly as the real API streams them
// (or as one JSON message when the request does not ask for a stream), and
// records every request it receives so that a test can assert what a client
// such as the Claude Code CLI sent. ClaudeBin and Server.ClaudeEnv find the
// real CLI that scripts/install-deps installs and point it at the mock.
package anthropicmock

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Server is a running mock. Build it with New; it closes itself when the
// test ends.
type Server struct {
	// URL is the base URL to use as ANTHROPIC_BASE_URL, e.g.
	// "http://127.0.0.1:34567".
	URL string

	tb  testing.TB
	srv *httptest.Server

	// respondMu serialises the calls of respond and numbers the replies.
	respondMu sync.Mutex
	respond   Responder
	replies   int

	mu       sync.Mutex
	requests []*Request
}

// Responder decides the reply to one Messages API request. It is called from
// the server's handler goroutines, one call at a time.
type Responder func(req *Request) Reply

// New starts a mock on loopback that answers with respond, and closes it when
// tb's test ends. Requests to paths the mock does not know are logged with
// tb.Logf and answered with a not_found_error.
func New(tb testing.TB, respond Responder) *Server {
	tb.Helper()
	s := &Server{tb: tb, respond: respond}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = s.srv.URL
	tb.Cleanup(s.srv.Close)
	return s
}

// Requests returns every request received so far, in arrival order,
// including those to paths other than /v1/messages.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// MessageRequests returns the POST /v1/messages requests received so far, in
// arrival order.
func (s *Server) MessageRequests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Request
	for _, r := range s.requests {
		if r.Method == http.MethodPost && r.Path == "/v1/messages" {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) serveHTTP(w http.ResponseWriter, hr *http.Request) {
	body, err := io.ReadAll(hr.Body)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	req := &Request{
		Method: hr.Method, Path: hr.URL.Path, RawQuery: hr.URL.RawQuery,
		Header: hr.Header.Clone(), Body: body, Received: time.Now(),
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()

	switch {
	case hr.URL.Path == "/" && (hr.Method == http.MethodHead || hr.Method == http.MethodGet):
		w.WriteHeader(http.StatusOK)
	case hr.URL.Path == "/v1/messages" && hr.Method == http.MethodPost:
		s.serveMessages(w, req)
	case hr.URL.Path == "/v1/messages/count_tokens" && hr.Method == http.MethodPost:
		s.serveCountTokens(w, req)
	default:
		s.tb.Logf("anthropicmock: unknown request %s %s", hr.Method, hr.URL.RequestURI())
		writeError(w, http.StatusNotFound, "not_found_error", "anthropicmock: no such endpoint")
	}
}

func (s *Server) serveCountTokens(w http.ResponseWriter, req *Request) {
	if err := req.parse(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"input_tokens":%d}`, req.inputTokens())
}

func (s *Server) serveMessages(w http.ResponseWriter, req *Request) {
	if err := req.parse(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	s.respondMu.Lock()
	reply := s.respond(req)
	s.replies++
	n := s.replies
	s.respondMu.Unlock()

	msg := reply.message(n, req)
	w.Header().Set("request-id", fmt.Sprintf("req_mock%06d", n))
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		b, err := marshal(msg)
		if err == nil {
			_, err = w.Write(b)
		}
		if err != nil {
			s.tb.Logf("anthropicmock: write reply: %v", err)
		}
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	if err := streamMessage(w, msg); err != nil {
		s.tb.Logf("anthropicmock: stream reply: %v", err)
	}
}

func writeError(w http.ResponseWriter, status int, kind, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": kind, "message": message},
	})
	_, _ = w.Write(b)
}
