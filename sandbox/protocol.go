package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tetherdev/tether/sandbox/agent"
)

// Command names, the "cmd" field of a [BridgeCommand].
const (
	CmdQuery              = "query"
	CmdResume             = "resume"
	CmdInterrupt          = "interrupt"
	CmdShutdown           = "shutdown"
	CmdPermissionResponse = "permission_response"
	CmdPing               = "ping"
	CmdConfigure          = "configure"
	CmdRunReply           = "run_reply"
	CmdAck                = "ack"
)

// Event names, the "ev" field of an [Event].
const (
	EvReady             = "ready"
	EvMessage           = "message"
	EvError             = "error"
	EvDone              = "done"
	EvPermissionRequest = "permission_request"
	EvPermissionCancel  = "permission_cancel"
	EvPong              = "pong"
	EvConfigured        = "configured"
	EvRunCall           = "run_call"
)

// Error codes, the "code" field of an error [Event].
const (
	CodeBusy           = "busy"
	CodeBadCommand     = "bad_command"
	CodeUnknownRequest = "unknown_request"
	CodeAgent          = "agent"
)

// DefaultMaxLine is the longest line, newline included, that a [Decoder]
// accepts unless told otherwise: twice [MaxMessage], which the bridge cuts
// agent messages to, for the JSON escaping around them.
const DefaultMaxLine = 2 << 20

// Errors a [Decoder] returns. Each is wrapped with detail; test with
// errors.Is. After any of them the decoder can go on with the next line.
var (
	// ErrLineTooLong is a line longer than the decoder's limit; the line is
	// skipped.
	ErrLineTooLong = errors.New("sandbox protocol: line too long")
	// ErrMalformed is a line that is not one JSON object.
	ErrMalformed = errors.New("sandbox protocol: malformed line")
	// ErrUnknownCommand is a command whose "cmd" is not one of the Cmd names.
	ErrUnknownCommand = errors.New("sandbox protocol: unknown command")
	// ErrUnknownEvent is an event whose "ev" is not one of the Ev names.
	ErrUnknownEvent = errors.New("sandbox protocol: unknown event")
	// ErrInvalid is a known command or event that lacks a field it needs.
	ErrInvalid = errors.New("sandbox protocol: invalid message")
)

// BridgeCommand is one line from the daemon to the bridge. Which fields are set
// depends on Cmd; see the package documentation.
type BridgeCommand struct {
	// Cmd is the command's name, one of the Cmd constants.
	Cmd string `json:"cmd"`
	// Prompt is the user's message (query).
	Prompt string `json:"prompt,omitempty"`
	// Images are sent with the prompt (query; for an agent.ImageAgent).
	Images []agent.Image `json:"images,omitempty"`
	// SessionID is the daemon's session id (query) or the agent session
	// to resume (resume).
	SessionID string `json:"sessionId,omitempty"`
	// IncludePartialMessages passes stream_event messages on (query).
	IncludePartialMessages bool `json:"includePartialMessages,omitempty"`
	// RequestID names the permission request answered
	// (permission_response).
	RequestID string `json:"requestId,omitempty"`
	// Decision is the answer (permission_response).
	Decision *agent.PermissionDecision `json:"decision,omitempty"`
	// ID is echoed in the pong (ping), or in the configured event or the
	// error that answers (configure).
	ID string `json:"id,omitempty"`
	// Settings are the agent's new settings, whole (configure).
	Settings *agent.Settings `json:"settings,omitempty"`
	// Result answers the run_call of the same ID, unless Error says why
	// it failed (run_reply).
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Seq is the last event the daemon has committed (ack): the bridge
	// forgets the events up to it, and a daemon that has just connected
	// is sent those after it.
	Seq int64 `json:"seq,omitempty"`
}

// Validate reports whether c is a known command with the fields it needs.
func (c *BridgeCommand) Validate() error {
	switch c.Cmd {
	case CmdQuery:
		if c.Prompt == "" && len(c.Images) == 0 {
			return fmt.Errorf("%w: query without prompt", ErrInvalid)
		}
	case CmdResume:
		if c.SessionID == "" {
			return fmt.Errorf("%w: resume without sessionId", ErrInvalid)
		}
	case CmdPermissionResponse:
		if c.RequestID == "" {
			return fmt.Errorf("%w: permission_response without requestId", ErrInvalid)
		}
		if c.Decision == nil {
			return fmt.Errorf("%w: permission_response without decision", ErrInvalid)
		}
		if b := c.Decision.Behavior; b != "allow" && b != "deny" {
			return fmt.Errorf("%w: permission_response behavior %q", ErrInvalid, b)
		}
	case CmdConfigure:
		if c.ID == "" || c.Settings == nil {
			return fmt.Errorf("%w: configure without id or settings", ErrInvalid)
		}
	case CmdRunReply:
		if c.ID == "" || (c.Error == "" && !json.Valid(c.Result)) {
			return fmt.Errorf("%w: run_reply without id, or without result or error", ErrInvalid)
		}
	case CmdAck:
		if c.Seq < 0 {
			return fmt.Errorf("%w: ack of a negative seq", ErrInvalid)
		}
	case CmdInterrupt, CmdShutdown, CmdPing:
	default:
		return fmt.Errorf("%w: %q", ErrUnknownCommand, c.Cmd)
	}
	return nil
}

// Event is one line from the bridge to the daemon. Which fields are set
// depends on Ev; see the package documentation.
type Event struct {
	// Ev is the event's name, one of the Ev constants.
	Ev string `json:"ev"`
	// Data is the raw agent message (message).
	Data json.RawMessage `json:"data,omitempty"`
	// Error describes what went wrong (error).
	Error string `json:"error,omitempty"`
	// Code classifies the error, one of the Code constants (error).
	Code string `json:"code,omitempty"`
	// SessionID echoes the command's sessionId (done, error).
	SessionID string `json:"sessionId,omitempty"`
	// AgentSessionID is the agent's own conversation id (done).
	AgentSessionID string `json:"agentSessionId,omitempty"`
	// Request is the agent's question (permission_request).
	Request *agent.PermissionRequest `json:"request,omitempty"`
	// RequestID names the withdrawn request (permission_cancel) or the
	// unknown one answered (error unknown_request).
	RequestID string `json:"requestId,omitempty"`
	// ID echoes the ping's id (pong) or the configure command's
	// (configured, error).
	ID string `json:"id,omitempty"`
	// Settings are the agent's settings after a configure (configured).
	Settings *agent.Settings `json:"settings,omitempty"`
	// Call is the agent's use of a run tool, answered by the run_reply of
	// the same ID (run_call).
	Call *agent.RunCall `json:"call,omitempty"`
	// Seq numbers the bridge's events from 1, all but ready and pong; on
	// ready it is the last number given so far (0 for a new bridge).
	Seq int64 `json:"seq,omitempty"`
}

// Validate reports whether e is a known event with the fields it needs.
func (e *Event) Validate() error {
	switch e.Ev {
	case EvMessage:
		if len(e.Data) == 0 || e.Data[0] != '{' {
			return fmt.Errorf("%w: message without an object in data", ErrInvalid)
		}
	case EvError:
		if e.Error == "" {
			return fmt.Errorf("%w: error without text", ErrInvalid)
		}
	case EvPermissionRequest:
		if e.Request == nil || e.Request.RequestID == "" {
			return fmt.Errorf("%w: permission_request without requestId", ErrInvalid)
		}
	case EvPermissionCancel:
		if e.RequestID == "" {
			return fmt.Errorf("%w: permission_cancel without requestId", ErrInvalid)
		}
	case EvConfigured:
		if e.ID == "" || e.Settings == nil {
			return fmt.Errorf("%w: configured without id or settings", ErrInvalid)
		}
	case EvRunCall:
		if e.ID == "" || e.Call == nil {
			return fmt.Errorf("%w: run_call without id or call", ErrInvalid)
		}
	case EvReady, EvDone, EvPong:
	default:
		return fmt.Errorf("%w: %q", ErrUnknownEvent, e.Ev)
	}
	return nil
}

// Encoder writes commands or events as lines. It is not safe for concurrent
// use; callers serialise writes.
type Encoder struct {
	w   io.Writer
	buf []byte
}

// NewEncoder returns an Encoder writing to w, one Write call a line.
func NewEncoder(w io.Writer) *Encoder {
	return &Encoder{w: w}
}

// Encode writes v (a Command or an Event) as one line.
func (e *Encoder) Encode(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("sandbox protocol: encode: %w", err)
	}
	e.buf = append(append(e.buf[:0], b...), '\n')
	if _, err := e.w.Write(e.buf); err != nil {
		return fmt.Errorf("sandbox protocol: write: %w", err)
	}
	return nil
}

// Decoder reads lines of commands or events with a line-length limit.
type Decoder struct {
	r   *bufio.Reader
	max int
}

// NewDecoder returns a Decoder reading from r that accepts lines up to max
// bytes (newline included); max <= 0 means [DefaultMaxLine].
func NewDecoder(r io.Reader, max int) *Decoder {
	if max <= 0 {
		max = DefaultMaxLine
	}
	return &Decoder{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// line returns the next non-empty line without its newline. The slice is
// valid until the next call.
func (d *Decoder) line() ([]byte, error) {
	for {
		var acc []byte
		tooLong := false
		for {
			chunk, err := d.r.ReadSlice('\n')
			if !tooLong {
				if len(acc)+len(chunk) > d.max {
					tooLong = true
					acc = nil
				} else if err == nil && acc == nil {
					acc = chunk
				} else {
					acc = append(acc, chunk...)
				}
			}
			if err == nil {
				break
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) && len(acc) > 0 && !tooLong {
				return nil, fmt.Errorf("%w: last line lacks its newline", io.ErrUnexpectedEOF)
			}
			return nil, err
		}
		if tooLong {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, d.max)
		}
		acc = bytes.TrimSpace(acc)
		if len(acc) > 0 {
			return acc, nil
		}
	}
}

// DecodeCommand reads the next command. At the end of the stream it returns
// io.EOF.
func (d *Decoder) DecodeCommand() (BridgeCommand, error) {
	var c BridgeCommand
	b, err := d.line()
	if err != nil {
		return c, err
	}
	if err := unmarshalObject(b, &c); err != nil {
		return BridgeCommand{}, err
	}
	if err := c.Validate(); err != nil {
		return BridgeCommand{}, err
	}
	return c, nil
}

// DecodeEvent reads the next event. At the end of the stream it returns
// io.EOF.
func (d *Decoder) DecodeEvent() (Event, error) {
	var e Event
	b, err := d.line()
	if err != nil {
		return e, err
	}
	if err := unmarshalObject(b, &e); err != nil {
		return Event{}, err
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

func unmarshalObject(b []byte, v any) error {
	if b[0] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}
