// Package terminal is `tether claude`: the user's own claude in their
// terminal, a session the phone can take over and hand back.
//
// The wrapper (Run) starts claude in a pseudo-terminal and registers with
// the daemon over a Unix socket in the daemon's data directory (Server),
// whose 0700 mode is the authentication: only the user reaches it, and no
// sandbox sees the data directory. The registration is a control
// connection of JSON lines; while it lasts the session is the terminal's
// ("local", observed through Claude Code's hooks). The phone's first message
// makes the daemon send "release": the wrapper stops its claude, prints
// that the phone has it (and then the phone's turns as they pass: show.go),
// and opens a second connection over which it runs
// the claude-code bridge (sandbox.RunBridge, the adapter tether's sessions
// use: `claude -p --resume <id>` in stream-json) as the user, in the
// terminal's directory and environment; the daemon serves that bridge as
// any session's (sandbox.Attach). A key press in the terminal ("takeback")
// or the phone's hand-back ends the bridge after its turn; the daemon says
// "reclaim" and the wrapper resumes its interactive claude with --resume of
// the same session. If the daemon goes away, the wrapper takes the session
// back by itself.
package terminal

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// Ops of the control connection.
const (
	// Wrapper to daemon.
	OpHello    = "hello"    // the first line of every connection
	OpTakeback = "takeback" // a key was pressed while the phone drives
	// Daemon to wrapper.
	OpAttached = "attached" // the registration is accepted
	OpError    = "error"    // the registration is refused: Message says why
	OpRelease  = "release"  // stop claude and connect the bridge (Nonce)
	OpReclaim  = "reclaim"  // the phone is done: resume claude
)

// Roles of a connection, in its hello.
const (
	RoleControl = "control"
	RoleBridge  = "bridge"
)

// Msg is one line of the protocol.
type Msg struct {
	Op string `json:"op"`
	// Hello: the connection's role, the Claude Code session id, the
	// terminal's working directory (control) or the release's nonce
	// (bridge).
	Role      string `json:"role,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	Nonce     string `json:"nonce,omitempty"`
	// Message is an error's text.
	Message string `json:"message,omitempty"`
	// Interrupt, on a takeback, cuts the phone's turn short.
	Interrupt bool `json:"interrupt,omitempty"`
}

// maxLine bounds a protocol line.
const maxLine = 16 << 10

// ErrBadMsg is a line that is not a message of this protocol.
var ErrBadMsg = errors.New("terminal: bad message")

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// reader reads protocol lines, bounded.
type reader struct{ r *bufio.Reader }

func newReader(r io.Reader) *reader { return &reader{bufio.NewReaderSize(r, 4096)} }

// next reads one message; io.EOF at the connection's end.
func (r *reader) next() (Msg, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.r.ReadLine()
		if err != nil {
			return Msg{}, err
		}
		if len(line)+len(chunk) > maxLine {
			return Msg{}, fmt.Errorf("%w: line over %d bytes", ErrBadMsg, maxLine)
		}
		line = append(line, chunk...)
		if !isPrefix {
			break
		}
	}
	return decode(line)
}

// decode checks one line.
func decode(line []byte) (Msg, error) {
	var m Msg
	if err := json.Unmarshal(line, &m); err != nil {
		return Msg{}, fmt.Errorf("%w: %v", ErrBadMsg, err)
	}
	switch m.Op {
	case OpHello:
		if (m.Role != RoleControl && m.Role != RoleBridge) || !idPattern.MatchString(m.SessionID) {
			return Msg{}, fmt.Errorf("%w: hello needs a role and a session id", ErrBadMsg)
		}
	case OpTakeback, OpAttached, OpError, OpRelease, OpReclaim:
	default:
		return Msg{}, fmt.Errorf("%w: op %q", ErrBadMsg, m.Op)
	}
	return m, nil
}

// write sends one message.
func write(w io.Writer, m Msg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
