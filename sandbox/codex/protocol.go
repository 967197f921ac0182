package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// errMalformed is a line of the app-server that is not one JSON-RPC
// message.
var errMalformed = errors.New("codex: malformed app-server message")

// message is one line of the app-server's JSON-RPC (without the "jsonrpc"
// field, which it omits): a response to one of the adapter's requests (ID
// and Result or Error), a request of the server (ID and Method) or a
// notification (Method only).
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("codex: app-server error %d: %s", e.Code, e.Message)
}

// isResponse tells whether m answers a request of the adapter.
func (m *message) isResponse() bool { return len(m.ID) > 0 && m.Method == "" }

// isRequest tells whether m is a request of the server, which waits for
// the adapter's answer.
func (m *message) isRequest() bool { return len(m.ID) > 0 && m.Method != "" }

// decodeMessage decodes one app-server line. A message must be a JSON
// object with a method or an id; an id must be a number or a string.
func decodeMessage(b []byte) (message, error) {
	var m message
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return message{}, fmt.Errorf("%w: not a JSON object", errMalformed)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return message{}, fmt.Errorf("%w: %w", errMalformed, err)
	}
	if string(m.ID) == "null" {
		m.ID = nil
	}
	if len(m.ID) > 0 && m.ID[0] != '"' && (m.ID[0] < '0' || m.ID[0] > '9') && m.ID[0] != '-' {
		return message{}, fmt.Errorf("%w: id %s is neither a number nor a string", errMalformed, m.ID)
	}
	if m.Method == "" && len(m.ID) == 0 {
		return message{}, fmt.Errorf("%w: neither method nor id", errMalformed)
	}
	return m, nil
}

// request is a JSON-RPC request or notification the adapter sends.
type request struct {
	ID     *uint64 `json:"id,omitempty"`
	Method string  `json:"method"`
	Params any     `json:"params,omitempty"`
}

// response answers a request of the server.
type response struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result"`
}

// item is the part of an app-server thread item the adapter reads.
type item struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// agentMessage
	Text string `json:"text"`
	// commandExecution
	Command          string  `json:"command"`
	Status           string  `json:"status"`
	AggregatedOutput *string `json:"aggregatedOutput"`
	ExitCode         *int    `json:"exitCode"`
	// fileChange
	Changes []fileChange `json:"changes"`
	// mcpToolCall
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    *mcpResult      `json:"result"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// mcpResult is an MCP tool call's result: its content blocks, of which the
// adapter reads the text.
type mcpResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

// fileChange is one file of a fileChange item.
type fileChange struct {
	Path string `json:"path"`
	Kind struct {
		Type string `json:"type"`
	} `json:"kind"`
	Diff string `json:"diff"`
}

// itemParams are the params of item/started and item/completed.
type itemParams struct {
	Item   item   `json:"item"`
	TurnID string `json:"turnId"`
}

// deltaParams are the params of item/agentMessage/delta and the other
// delta notifications.
type deltaParams struct {
	TurnID string `json:"turnId"`
	ItemID string `json:"itemId"`
	Delta  string `json:"delta"`
}

// turnParams are the params of turn/started and turn/completed.
type turnParams struct {
	Turn struct {
		ID         string `json:"id"`
		Status     string `json:"status"`
		DurationMS int64  `json:"durationMs"`
		Error      *struct {
			Message string `json:"message"`
		} `json:"error"`
	} `json:"turn"`
}

// tokenUsage is a thread/tokenUsage/updated's count.
type tokenUsage struct {
	InputTokens       int64 `json:"inputTokens"`
	CachedInputTokens int64 `json:"cachedInputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
}

// usageParams are the params of thread/tokenUsage/updated: Last is the
// latest model call's count (Total, the thread's since its start, counts
// the turns before a resume too).
type usageParams struct {
	TurnID     string `json:"turnId"`
	TokenUsage struct {
		Last tokenUsage `json:"last"`
	} `json:"tokenUsage"`
}

// approvalParams are the params of the approval requests
// (item/commandExecution/requestApproval, item/fileChange/requestApproval).
type approvalParams struct {
	ItemID  string `json:"itemId"`
	Command string `json:"command"`
}

// errorParams are the params of an "error" notification.
type errorParams struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"`
}

// innerCommand is the command a shell was asked to run: Codex reports its
// commands wrapped as `/bin/bash -lc '<cmd>'`, and tether's shell rules
// judge what runs inside. Anything else is returned whole.
func innerCommand(command string) string {
	words, ok := shellWords(command)
	if !ok || len(words) != 3 || (words[1] != "-lc" && words[1] != "-c") {
		return command
	}
	switch strings.TrimPrefix(strings.TrimPrefix(words[0], "/usr"), "/bin/") {
	case "bash", "sh", "zsh":
		return words[2]
	}
	return command
}

// shellWords splits s into words as a POSIX shell does for quoting alone:
// single quotes, double quotes (with \" \\ \$ \` escapes) and backslashes.
// It reports false for an unterminated quote or any character a shell
// would treat specially outside quotes, so that only a plain command line
// is split.
func shellWords(s string) ([]string, bool) {
	var (
		words []string
		cur   strings.Builder
		inW   bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inW {
				words = append(words, cur.String())
				cur.Reset()
				inW = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inW = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				} else if s[i] == '$' || s[i] == '`' {
					return nil, false
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, false
			}
			inW = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, false
			}
			i++
			cur.WriteByte(s[i])
			inW = true
		case strings.IndexByte("|&;<>()$`*?[#~{}\n", c) >= 0:
			return nil, false
		default:
			cur.WriteByte(c)
			inW = true
		}
	}
	if inW {
		words = append(words, cur.String())
	}
	return words, true
}

// errorResponse refuses a request of the server.
type errorResponse struct {
	ID    json.RawMessage `json:"id"`
	Error rpcError        `json:"error"`
}
