package anthropicmock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"
)

// Reply is the assistant message the mock answers a request with.
type Reply struct {
	// Blocks are the message's content blocks, made with Text and ToolUse.
	Blocks []Block
	// StopReason defaults to "tool_use" when a block is a tool_use and to
	// "end_turn" otherwise.
	StopReason string
	// EventDelay, when set, is slept before each streamed event after
	// message_start, to make a slow stream.
	EventDelay time.Duration
	// Usage, when set, is the message's usage; otherwise the mock counts
	// a token for every 4 bytes of the request and of the answer, and
	// no cache.
	Usage *Usage
}

// Usage is a message's token counts, as the API reports them: input
// tokens do not include the cache's.
type Usage struct {
	InputTokens              int
	OutputTokens             int
	CacheReadInputTokens     int
	CacheCreationInputTokens int
}

// Text returns a text block.
func Text(s string) Block {
	return Block{Type: "text", Text: s}
}

// Thinking returns a thinking block (extended thinking), with a signature
// the mock makes up.
func Thinking(s string) Block {
	return Block{Type: "thinking", Thinking: s}
}

// ToolUse returns a tool_use block calling tool name with input, which must
// marshal to a JSON object; it panics when input does not marshal. The mock
// gives the block an id when it has none.
func ToolUse(name string, input any) Block {
	b, err := marshal(input)
	if err != nil {
		panic(fmt.Sprintf("anthropicmock.ToolUse: input does not marshal: %v", err))
	}
	return Block{Type: "tool_use", Name: name, Input: b}
}

// Queue returns a Responder that answers with replies in order, and once
// they are used up with a text saying so.
func Queue(replies ...Reply) Responder {
	var mu sync.Mutex
	return func(*Request) Reply {
		mu.Lock()
		defer mu.Unlock()
		if len(replies) == 0 {
			return Reply{Blocks: []Block{Text("anthropicmock: no scripted reply left")}}
		}
		r := replies[0]
		replies = replies[1:]
		return r
	}
}

// message is the Messages API's response object.
type message struct {
	ID           string         `json:"id"`
	Type         string         `json:"type"`
	Role         string         `json:"role"`
	Model        string         `json:"model"`
	Content      []outBlock     `json:"content"`
	StopReason   *string        `json:"stop_reason"`
	StopSequence *string        `json:"stop_sequence"`
	Usage        map[string]int `json:"usage"`
	delay        time.Duration
}

// outBlock is a content block as the API returns it: a text block always
// carries its text, a tool_use block always its input, a thinking block
// always its thinking and signature.
type outBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

func (r Reply) message(n int, req *Request) message {
	stop := r.StopReason
	out := make([]outBlock, 0, len(r.Blocks))
	for i, b := range r.Blocks {
		switch b.Type {
		case "tool_use":
			if b.ID == "" {
				b.ID = fmt.Sprintf("toolu_mock%04d%02d", n, i)
			}
			if len(b.Input) == 0 {
				b.Input = json.RawMessage("{}")
			}
			if stop == "" {
				stop = "tool_use"
			}
			out = append(out, outBlock{Type: b.Type, ID: b.ID, Name: b.Name, Input: b.Input})
		case "thinking":
			thinking, sig := b.Thinking, fmt.Sprintf("mocksig%04d%02d", n, i)
			out = append(out, outBlock{Type: b.Type, Thinking: &thinking, Signature: &sig})
		default:
			text := b.Text
			out = append(out, outBlock{Type: b.Type, Text: &text})
		}
	}
	if stop == "" {
		stop = "end_turn"
	}
	model := req.Model
	if model == "" {
		model = "claude-mock"
	}
	u := Usage{InputTokens: req.inputTokens(), OutputTokens: outputTokens(out)}
	if r.Usage != nil {
		u = *r.Usage
	}
	return message{
		ID: fmt.Sprintf("msg_mock%06d", n), Type: "message", Role: "assistant", Model: model,
		Content: out, StopReason: &stop,
		Usage: map[string]int{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
			"cache_read_input_tokens": u.CacheReadInputTokens, "cache_creation_input_tokens": u.CacheCreationInputTokens},
		delay: r.EventDelay,
	}
}

func outputTokens(blocks []outBlock) int {
	n := 1
	for _, b := range blocks {
		if b.Text != nil {
			n += len(*b.Text) / 4
		}
		if b.Thinking != nil {
			n += len(*b.Thinking) / 4
		}
		n += len(b.Input) / 4
	}
	return n
}

// The streamed events, as structs so that "type" comes first as in the
// real API.
type (
	startEvent struct {
		Type    string  `json:"type"`
		Message message `json:"message"`
	}
	blockStartEvent struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	toolStart struct {
		Type  string   `json:"type"`
		ID    string   `json:"id"`
		Name  string   `json:"name"`
		Input struct{} `json:"input"`
	}
	textStart struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	thinkingStart struct {
		Type      string `json:"type"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	blockDeltaEvent struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta delta  `json:"delta"`
	}
	delta struct {
		Type        string  `json:"type"`
		Text        *string `json:"text,omitempty"`
		Thinking    *string `json:"thinking,omitempty"`
		Signature   *string `json:"signature,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
	}
	indexEvent struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	messageDeltaEvent struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	typeEvent struct {
		Type string `json:"type"`
	}
)

// streamMessage writes msg as the API's server-sent events: message_start,
// ping, then per block content_block_start, deltas and content_block_stop,
// then message_delta and message_stop.
func streamMessage(w http.ResponseWriter, msg message) error {
	flusher, _ := w.(http.Flusher)
	first := true
	send := func(event string, data any) error {
		if !first && msg.delay > 0 {
			time.Sleep(msg.delay)
		}
		first = false
		b, err := marshal(data)
		if err != nil {
			return fmt.Errorf("marshal %s: %w", event, err)
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return fmt.Errorf("write %s: %w", event, err)
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	}

	start := msg
	start.Content = []outBlock{}
	start.StopReason = nil
	// message_start counts the input and the cache, and one output token;
	// message_delta the output.
	start.Usage = map[string]int{
		"input_tokens": msg.Usage["input_tokens"], "output_tokens": 1,
		"cache_creation_input_tokens": msg.Usage["cache_creation_input_tokens"], "cache_read_input_tokens": msg.Usage["cache_read_input_tokens"],
	}
	if err := send("message_start", startEvent{Type: "message_start", Message: start}); err != nil {
		return err
	}
	if err := send("ping", typeEvent{Type: "ping"}); err != nil {
		return err
	}
	for i, b := range msg.Content {
		if err := streamBlock(send, i, b); err != nil {
			return err
		}
	}
	md := messageDeltaEvent{Type: "message_delta"}
	md.Delta.StopReason = *msg.StopReason
	md.Usage.OutputTokens = msg.Usage["output_tokens"]
	if err := send("message_delta", md); err != nil {
		return err
	}
	return send("message_stop", typeEvent{Type: "message_stop"})
}

func streamBlock(send func(string, any) error, i int, b outBlock) error {
	var (
		startBlock any
		body       string
		kind       string
	)
	switch b.Type {
	case "tool_use":
		startBlock = toolStart{Type: "tool_use", ID: b.ID, Name: b.Name}
		body, kind = string(b.Input), "input_json_delta"
	case "thinking":
		startBlock = thinkingStart{Type: "thinking"}
		body, kind = *b.Thinking, "thinking_delta"
	default:
		startBlock = textStart{Type: b.Type}
		body, kind = *b.Text, "text_delta"
	}
	if err := send("content_block_start", blockStartEvent{Type: "content_block_start", Index: i, ContentBlock: startBlock}); err != nil {
		return err
	}
	for _, chunk := range chunks(body, 12) {
		d := delta{Type: kind}
		switch kind {
		case "text_delta":
			d.Text = &chunk
		case "thinking_delta":
			d.Thinking = &chunk
		default:
			d.PartialJSON = &chunk
		}
		if err := send("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: i, Delta: d}); err != nil {
			return err
		}
	}
	if b.Signature != nil {
		d := delta{Type: "signature_delta", Signature: b.Signature}
		if err := send("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: i, Delta: d}); err != nil {
			return err
		}
	}
	return send("content_block_stop", indexEvent{Type: "content_block_stop", Index: i})
}

// marshal encodes v as JSON without HTML escaping, as the API does.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// chunks splits s into pieces of about size bytes, never inside a UTF-8
// sequence, the way the API splits a block into several deltas.
func chunks(s string, size int) []string {
	var out []string
	for len(s) > size {
		cut := size
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			_, cut = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" || len(out) == 0 {
		out = append(out, s)
	}
	return out
}
