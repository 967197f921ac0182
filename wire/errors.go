package wire

import "fmt"

// TypeError is the type of "error", a failure after auth; the connection
// stays open.
const TypeError = "error"

// Error codes. The first group is the spec's; the second group is ours.
const (
	CodeAuthFailed          = "AUTH_FAILED"
	CodeInsecureTransport   = "INSECURE_TRANSPORT"
	CodeMisconfigured       = "MISCONFIGURED"
	CodeVersionIncompatible = "VERSION_INCOMPATIBLE"
	CodeRateLimited         = "RATE_LIMITED"
	CodeSessionNotFound     = "SESSION_NOT_FOUND"
	CodeAgentError          = "AGENT_ERROR"
	CodeToolError           = "TOOL_ERROR"
	CodeGitError            = "GIT_ERROR"
	CodeBridgeError         = "BRIDGE_ERROR"

	// CodeInvalidMessage: the frame is not a JSON object, lacks a string
	// type, or its payload does not have the shape its type requires.
	CodeInvalidMessage = "INVALID_MESSAGE"
	// CodeUnknownType: the type is not one this server handles.
	CodeUnknownType = "UNKNOWN_TYPE"
	// CodeAcknowledgmentRequired: a warning must be acknowledged first.
	CodeAcknowledgmentRequired = "ACKNOWLEDGMENT_REQUIRED"
	// CodePathOutsideRoot: a path leads outside what may be served (the
	// file operations' code, also for a session whose working directory is
	// outside the roots or around the data directory).
	CodePathOutsideRoot = "PATH_OUTSIDE_ROOT"
)

// Error is a protocol error: a code from the constants above and a message
// fit to show a user. It never carries internal error text.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf makes an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorPayload is the payload of "error", for failures after auth; the
// connection stays open.
type ErrorPayload struct {
	Code        string `json:"code"`
	Message     string `json:"message"`
	Recoverable bool   `json:"recoverable"`
	SessionID   string `json:"session_id,omitempty"`
}
