package claude

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tetherdev/tether/sandbox/agent"
)

// errNotJSON is returned by parseLine for an output line that is not a JSON
// object.
var errNotJSON = errors.New("claude: output line is not a JSON object")

// line is what the adapter reads from one line of the CLI's output; the rest
// of the line is passed on untouched.
type line struct {
	Type           string          `json:"type"`
	Subtype        string          `json:"subtype"`
	SessionID      string          `json:"session_id"`
	RequestID      string          `json:"request_id"`
	Request        json.RawMessage `json:"request"`
	Response       json.RawMessage `json:"response"`
	PermissionMode string          `json:"permissionMode"`
}

// parseLine decodes the fields of an output line that the adapter acts on.
func parseLine(b []byte) (line, error) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return line{}, fmt.Errorf("%w: %w", errNotJSON, err)
	}
	return l, nil
}

// controlRequest is the "request" of a control_request the CLI sends.
type controlRequest struct {
	Subtype   string          `json:"subtype"`
	ToolName  string          `json:"tool_name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
}

// parseControlRequest decodes the request of a control_request line.
func parseControlRequest(raw json.RawMessage) (controlRequest, error) {
	var r controlRequest
	if err := json.Unmarshal(raw, &r); err != nil {
		return controlRequest{}, fmt.Errorf("claude: control request: %w", err)
	}
	return r, nil
}

// userMessage is a stream-json input line carrying one user prompt.
type userMessage struct {
	Type            string      `json:"type"`
	Message         userContent `json:"message"`
	ParentToolUseID *string     `json:"parent_tool_use_id"`
	SessionID       string      `json:"session_id"`
}

type userContent struct {
	Role    string      `json:"role"`
	Content []userBlock `json:"content"`
}

// userBlock is a text block or an image block of a user message.
type userBlock struct {
	Type   string       `json:"type"`
	Text   string       `json:"text,omitempty"`
	Source *imageSource `json:"source,omitempty"`
}

type imageSource struct {
	Type      string `json:"type"` // "base64"
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// newUserMessage is a prompt with its images, the images first (as the
// Messages API advises), the text last unless empty.
func newUserMessage(prompt string, images []agent.Image) userMessage {
	blocks := make([]userBlock, 0, len(images)+1)
	for _, im := range images {
		blocks = append(blocks, userBlock{Type: "image", Source: &imageSource{Type: "base64", MediaType: im.MediaType, Data: im.Data}})
	}
	if prompt != "" || len(blocks) == 0 {
		blocks = append(blocks, userBlock{Type: "text", Text: prompt})
	}
	return userMessage{Type: "user", Message: userContent{Role: "user", Content: blocks}}
}

// controlResponse is the adapter's answer to a control_request of the CLI.
type controlResponse struct {
	Type     string          `json:"type"`
	Response responsePayload `json:"response"`
}

type responsePayload struct {
	Subtype   string `json:"subtype"`
	RequestID string `json:"request_id"`
	Response  any    `json:"response,omitempty"`
	Error     string `json:"error,omitempty"`
}

// permissionResult is the "response" of a can_use_tool answer.
type permissionResult struct {
	Behavior     string          `json:"behavior"`
	UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
	Message      string          `json:"message,omitempty"`
}

func successResponse(requestID string, response any) controlResponse {
	return controlResponse{Type: "control_response", Response: responsePayload{Subtype: "success", RequestID: requestID, Response: response}}
}

func errorResponse(requestID, msg string) controlResponse {
	return controlResponse{Type: "control_response", Response: responsePayload{Subtype: "error", RequestID: requestID, Error: msg}}
}

// The prefixes of the adapter's own control request ids: the response to
// an initialize is passed on to the host, the others are the adapter's.
const (
	initializePrefix = "tether_initialize_"
	controlPrefix    = "tether_control_"
)

// controlRequestLine is a control_request of the adapter's own.
type controlRequestLine struct {
	Type      string      `json:"type"`
	RequestID string      `json:"request_id"`
	Request   controlBody `json:"request"`
}

// controlBody is the request of a control_request the adapter sends:
// "interrupt", "initialize", "set_model", "set_permission_mode" or
// "set_max_thinking_tokens" (a nil budget, sent as null, is the model's
// default).
type controlBody struct {
	Subtype           string `json:"subtype"`
	Model             string `json:"model,omitempty"`
	Mode              string `json:"mode,omitempty"`
	MaxThinkingTokens *int   `json:"max_thinking_tokens,omitempty"`
	// nullTokens sends max_thinking_tokens as null.
	nullTokens bool
}

// MarshalJSON writes the body, with max_thinking_tokens null when asked.
func (c controlBody) MarshalJSON() ([]byte, error) {
	type plain controlBody
	b, err := json.Marshal(plain(c))
	if err != nil || !c.nullTokens {
		return b, err
	}
	return append(b[:len(b)-1], `,"max_thinking_tokens":null}`...), nil
}
