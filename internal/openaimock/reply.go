package openaimock

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"
)

// Reply is the model output the mock streams for one request.
type Reply struct {
	// Items are the output items, made with Text, Command and Patch.
	Items []Item
	// Delay, when set, is waited before each text delta and each item after
	// the first: a slow stream, which a client can interrupt.
	Delay time.Duration
}

// Item is one output item of a reply.
type Item struct {
	kind  string // "message", "function_call", "custom_tool_call" or "tool_search_call"
	text  string // message text, or a custom tool's input
	name  string // the tool
	ns    string // a function call's namespace
	args  string // a function call's arguments, JSON
	chunk int    // runes per text delta
}

// Text is an assistant message, streamed in deltas of a few words.
func Text(s string) Item { return Item{kind: "message", text: s, chunk: 8} }

// Call is a call of the function tool name with args, encoded as JSON:
// one of the tools the request offered (Request.Tools), an MCP server's
// among them.
func Call(name string, args any) Item {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return Item{kind: "function_call", name: name, args: string(b)}
}

// NamespacedCall is Call of the tool name in the namespace ns, the shape
// a tool found by tool_search is called in.
func NamespacedCall(ns, name string, args any) Item {
	it := Call(name, args)
	it.ns = ns
	return it
}

// ToolSearch is a call of the client-executed tool_search tool with
// query: the model asking for tools that were not given to it upfront.
func ToolSearch(query string) Item {
	b, _ := json.Marshal(map[string]string{"query": query})
	return Item{kind: "tool_search_call", args: string(b)}
}

// Command is a call of Codex's exec_command tool running cmd.
func Command(cmd string) Item {
	b, _ := json.Marshal(map[string]string{"cmd": cmd})
	return Item{kind: "function_call", name: "exec_command", args: string(b)}
}

// Patch is a call of Codex's apply_patch tool with patch, in its
// "*** Begin Patch" format.
func Patch(patch string) Item {
	return Item{kind: "custom_tool_call", name: "apply_patch", text: patch}
}

// Queue returns a Responder that answers with replies in order, and once
// they are used up with a text saying so.
func Queue(replies ...Reply) Responder {
	var mu sync.Mutex
	return func(*Request) Reply {
		mu.Lock()
		defer mu.Unlock()
		if len(replies) == 0 {
			return Reply{Items: []Item{Text("openaimock: no scripted reply left")}}
		}
		r := replies[0]
		replies = replies[1:]
		return r
	}
}

// stream writes the reply as the Responses API's server-sent events:
// response.created, for each item output_item.added, its text deltas and
// output_item.done, then response.completed with usage: 10 tokens in, 4
// of them from the cache (OpenAI counts the cached part inside the
// input), 5 out. Reply n numbers the ids.
func (r Reply) stream(ctx context.Context, w http.ResponseWriter, n int) error {
	respID := fmt.Sprintf("resp_%d", n)
	ev := func(v map[string]any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b); err != nil {
			return err
		}
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		return nil
	}
	wait := func() error {
		if r.Delay <= 0 {
			return nil
		}
		t := time.NewTimer(r.Delay)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := ev(map[string]any{"type": "response.created", "response": map[string]any{"id": respID, "object": "response", "status": "in_progress"}}); err != nil {
		return err
	}
	for i, it := range r.Items {
		if i > 0 {
			if err := wait(); err != nil {
				return err
			}
		}
		id := fmt.Sprintf("%s_%d_%d", map[string]string{"message": "msg", "function_call": "fc", "custom_tool_call": "ctc", "tool_search_call": "tsc"}[it.kind], n, i)
		callID := fmt.Sprintf("call_%d_%d", n, i)
		var done map[string]any
		switch it.kind {
		case "message":
			if err := ev(map[string]any{"type": "response.output_item.added", "output_index": i, "item": map[string]any{
				"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []any{}}}); err != nil {
				return err
			}
			for j, d := range chunks(it.text, it.chunk) {
				if j > 0 {
					if err := wait(); err != nil {
						return err
					}
				}
				if err := ev(map[string]any{"type": "response.output_text.delta", "item_id": id, "output_index": i, "content_index": 0, "delta": d}); err != nil {
					return err
				}
			}
			done = map[string]any{"type": "message", "id": id, "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": it.text, "annotations": []any{}}}}
		case "function_call":
			done = map[string]any{"type": "function_call", "id": id, "status": "completed", "name": it.name, "call_id": callID, "arguments": it.args}
			if it.ns != "" {
				done["namespace"] = it.ns
			}
		case "tool_search_call":
			done = map[string]any{"type": "tool_search_call", "id": id, "status": "completed", "call_id": callID, "execution": "client", "arguments": json.RawMessage(it.args)}
		case "custom_tool_call":
			done = map[string]any{"type": "custom_tool_call", "id": id, "status": "completed", "name": it.name, "call_id": callID, "input": it.text}
		}
		if err := ev(map[string]any{"type": "response.output_item.done", "output_index": i, "item": done}); err != nil {
			return err
		}
	}
	return ev(map[string]any{"type": "response.completed", "response": map[string]any{"id": respID, "status": "completed",
		"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]int{"cached_tokens": 4},
			"output_tokens": 5, "output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": 15}}})
}

// chunks cuts s into pieces of n runes.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i, runes := 0, 0
		for i < len(s) && runes < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			runes++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}
