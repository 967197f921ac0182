package wire

// The HTTPS fallback transport (extension): the same protocol for clients
// that cannot open a WebSocket. Frames down are a Server-Sent Events
// stream, frames up are POSTs.
const (
	// EventsPath opens a connection: POST the auth frame, read the stream.
	EventsPath = "/events"
	// SendPath takes one client frame per POST.
	SendPath = "/send"
	// ConnectionHeader carries the connection's token, issued at auth in
	// the response of EventsPath; POSTs to SendPath present it as a bearer
	// token. It is never in a URL, so never in a log of URLs.
	ConnectionHeader = "Tether-Connection"
)

// StreamClose is the data of the fallback stream's close event, which ends
// the connection as a WebSocket's close frame does.
type StreamClose struct {
	Code   int    `json:"code"`
	Reason string `json:"reason"`
}
