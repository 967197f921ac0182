package hooks

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// Error codes of the endpoint's JSON errors.
const (
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeTooLarge         = "body_too_large"
	CodeInvalidJSON      = "invalid_json"
	CodeMissingField     = "missing_field"
	CodeUnknownEvent     = "unknown_event"
)

// Errors of Decode, for the expected ways a body can be wrong.
var (
	ErrInvalidJSON  = errors.New("hooks: body is not a JSON object")
	ErrMissingField = errors.New("hooks: required field missing")
	ErrUnknownEvent = errors.New("hooks: unknown hook_event_name")
)

// Server is the hook endpoint, an http.Handler for POST /hooks/event. It
// checks the peer and the hook secret, decodes Claude Code's hook JSON,
// hands the event to Broker and answers with Claude Code's decision JSON.
// It never fails closed: whatever goes wrong after the request was
// accepted, Claude Code gets `{}` and decides as if there were no hook.
type Server struct {
	// Broker receives every event and answers tool questions. Required.
	Broker Broker
	// Token is the hook secret that requests carry as
	// `Authorization: Bearer <token>`. Every request is refused while it
	// is empty.
	Token string
	// AllowFrom lists the peer addresses the endpoint answers; loopback
	// only when empty. The peer is the socket's, never a header.
	AllowFrom []netip.Prefix
	// Wait is how long a question may be held for a phone before it is
	// answered "ask"; DefaultWait when zero. Keep it under the hook timeout
	// in Claude Code's settings.
	Wait time.Duration
	// Logger receives a line for every event the broker failed on;
	// slog.Default() when nil.
	Logger *slog.Logger
}

// empty is the answer that leaves everything to Claude Code.
var empty = []byte("{}\n")

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.peerAllowed(r.RemoteAddr) {
		writeError(w, http.StatusForbidden, CodeForbidden, "hooks are not accepted from this address")
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "use POST")
		return
	}
	if !s.authorized(r.Header.Get("Authorization")) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tether hooks"`)
		writeError(w, http.StatusUnauthorized, CodeUnauthorized, "missing or wrong hook token")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("the body is over %d bytes", MaxBody))
			return
		}
		writeError(w, http.StatusBadRequest, CodeInvalidJSON, "the body could not be read")
		return
	}
	ev, err := Decode(body)
	if err != nil {
		switch {
		case errors.Is(err, ErrMissingField):
			writeError(w, http.StatusBadRequest, CodeMissingField, strings.TrimPrefix(err.Error(), "hooks: "))
		case errors.Is(err, ErrUnknownEvent):
			writeError(w, http.StatusBadRequest, CodeUnknownEvent, "hook_event_name is not an event tether knows")
		default:
			writeError(w, http.StatusBadRequest, CodeInvalidJSON, "the body is not a JSON object of Claude Code's hook input")
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.handle(r.Context(), ev))
}

// handle gives ev to the broker and returns the body of the answer.
func (s *Server) handle(ctx context.Context, ev Event) []byte {
	log := s.logger().With("event", ev.Name, "claude_session", ev.SessionID)
	if err := s.Broker.Observe(ctx, ev); err != nil {
		log.Warn("hook event not recorded", "err", err)
		return empty
	}
	if ev.Name != EventPreToolUse && ev.Name != EventPermissionRequest {
		return empty
	}
	wait := s.Wait
	if wait <= 0 {
		wait = DefaultWait
	}
	askCtx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ans, err := s.Broker.Ask(askCtx, ev)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		// Claude Code gave up on the hook; nobody reads the answer.
		return empty
	case askCtx.Err() != nil:
		ans = Answer{Decision: DecisionAsk, Reason: "no answer from the phone"}
	default:
		log.Warn("hook question not answered", "tool", ev.ToolName, "err", err)
		return empty
	}
	b, err := encodeAnswer(ev.Name, ans)
	if err != nil {
		log.Warn("hook answer not sent", "tool", ev.ToolName, "err", err)
		return empty
	}
	return b
}

func (s *Server) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

func (s *Server) peerAllowed(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap()
	if len(s.AllowFrom) == 0 {
		return a.IsLoopback()
	}
	for _, p := range s.AllowFrom {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (s *Server) authorized(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || s.Token == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), []byte(s.Token)) == 1
}

// wireEvent is the part of Claude Code's hook JSON the endpoint reads.
type wireEvent struct {
	SessionID      string          `json:"session_id"`
	HookEventName  string          `json:"hook_event_name"`
	Cwd            string          `json:"cwd"`
	TranscriptPath string          `json:"transcript_path"`
	PermissionMode string          `json:"permission_mode"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	ToolResponse   json.RawMessage `json:"tool_response"`
}

// Decode parses one hook body as Claude Code sends it. The errors wrap
// ErrInvalidJSON, ErrMissingField or ErrUnknownEvent.
func Decode(body []byte) (Event, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Event{}, ErrInvalidJSON
	}
	var w wireEvent
	if err := json.Unmarshal(trimmed, &w); err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	switch {
	case w.HookEventName == "":
		return Event{}, fmt.Errorf("%w: hook_event_name", ErrMissingField)
	case !known(w.HookEventName):
		return Event{}, fmt.Errorf("%w: %q", ErrUnknownEvent, w.HookEventName)
	case w.SessionID == "":
		return Event{}, fmt.Errorf("%w: session_id", ErrMissingField)
	case toolEvents[w.HookEventName] && w.ToolName == "":
		return Event{}, fmt.Errorf("%w: tool_name", ErrMissingField)
	}
	return Event{
		SessionID:      w.SessionID,
		Name:           w.HookEventName,
		Cwd:            w.Cwd,
		TranscriptPath: w.TranscriptPath,
		PermissionMode: w.PermissionMode,
		ToolName:       w.ToolName,
		ToolInput:      nullToNil(w.ToolInput),
		ToolUseID:      w.ToolUseID,
		ToolResponse:   nullToNil(w.ToolResponse),
		Raw:            json.RawMessage(bytes.Clone(trimmed)),
	}, nil
}

func known(name string) bool {
	for _, e := range Events {
		if e == name {
			return true
		}
	}
	return false
}

func nullToNil(m json.RawMessage) json.RawMessage {
	if string(m) == "null" {
		return nil
	}
	return m
}

// ErrBadAnswer is returned for an Answer that cannot be turned into
// Claude Code's decision JSON.
var ErrBadAnswer = errors.New("hooks: bad answer")

type preToolUseOutput struct {
	HookEventName            string          `json:"hookEventName"`
	PermissionDecision       Decision        `json:"permissionDecision"`
	PermissionDecisionReason string          `json:"permissionDecisionReason,omitempty"`
	UpdatedInput             json.RawMessage `json:"updatedInput,omitempty"`
}

type permissionRequestOutput struct {
	HookEventName string             `json:"hookEventName"`
	Decision      permissionDecision `json:"decision"`
}

type permissionDecision struct {
	Behavior     Decision        `json:"behavior"`
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

// encodeAnswer is Claude Code's decision JSON for ans to the question
// event.
func encodeAnswer(event string, ans Answer) ([]byte, error) {
	switch ans.Decision {
	case DecisionNone, DecisionAllow, DecisionDeny, DecisionAsk:
	default:
		return nil, fmt.Errorf("%w: decision %q", ErrBadAnswer, ans.Decision)
	}
	upd := ans.UpdatedInput
	if len(upd) > 0 {
		if ans.Decision != DecisionAllow || !isObject(upd) {
			return nil, fmt.Errorf("%w: updated input", ErrBadAnswer)
		}
	}
	var out any
	switch {
	case ans.Decision == DecisionNone:
		return empty, nil
	case event == EventPreToolUse:
		out = preToolUseOutput{HookEventName: event, PermissionDecision: ans.Decision, PermissionDecisionReason: ans.Reason, UpdatedInput: upd}
	case ans.Decision == DecisionAsk:
		// PermissionRequest has no "ask": no decision shows Claude Code's prompt.
		return empty, nil
	default:
		d := permissionDecision{Behavior: ans.Decision, UpdatedInput: upd}
		if ans.Decision == DecisionDeny {
			d.Message = ans.Reason
		}
		out = permissionRequestOutput{HookEventName: event, Decision: d}
	}
	return marshal(map[string]any{"hookSpecificOutput": out})
}

// marshal is json.Marshal without HTML escaping (commands hold < > &),
// with a final newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	return b.Bytes(), nil
}

func isObject(m json.RawMessage) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal(m, &v) == nil && v != nil
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(errorBody{Error: errorDetail{Code: code, Message: msg}}) // strings encode; a client gone has nobody to tell
}
