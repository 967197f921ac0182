package terminal

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/tetherdev/tether/sandbox"
)

// shownConn is the bridge's connection, which also shows the terminal what
// the phone's turn does: the phone's prompts as the daemon sends them, the
// agent's text and tool calls as the bridge reports them. It reads the
// protocol's lines as they pass and changes nothing of them.
type shownConn struct {
	net.Conn
	show      func(string)
	mu        sync.Mutex
	in, out   []byte          // partial lines read and written
	shownText map[string]bool // the agent's blocks shown, by a hash
}

func newShownConn(c net.Conn, out io.Writer) *shownConn {
	return &shownConn{Conn: c, shownText: map[string]bool{}, show: func(s string) {
		// The terminal is raw: every line ends with a carriage return too.
		_, _ = io.WriteString(out, strings.ReplaceAll(s, "\n", "\r\n")+"\r\n") // see tell
	}}
}

func (c *shownConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.in = c.lines(append(c.in, p[:n]...), c.command)
	c.mu.Unlock()
	return n, err
}

func (c *shownConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out = c.lines(append(c.out, p...), c.event)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// lines hands each whole line of buf to f and returns what is left; a
// line longer than the protocol allows is dropped unseen.
func (c *shownConn) lines(buf []byte, f func([]byte)) []byte {
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			if len(buf) > sandbox.DefaultMaxLine {
				return nil
			}
			return buf
		}
		f(buf[:i])
		buf = buf[i+1:]
	}
}

// command shows a query's prompt.
func (c *shownConn) command(line []byte) {
	var cmd sandbox.BridgeCommand
	if json.Unmarshal(line, &cmd) == nil && cmd.Cmd == sandbox.CmdQuery {
		c.show("\x1b[1m› from the phone:\x1b[0m " + cmd.Prompt)
	}
}

// event shows the text and tool calls of the agent's complete messages.
func (c *shownConn) event(line []byte) {
	var ev sandbox.Event
	if json.Unmarshal(line, &ev) != nil || ev.Ev != sandbox.EvMessage {
		return
	}
	var m struct {
		Type    string `json:"type"`
		Message struct {
			ID      string `json:"id"`
			Content []struct {
				Type  string          `json:"type"`
				Text  string          `json:"text"`
				Name  string          `json:"name"`
				Input json.RawMessage `json:"input"`
			} `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(ev.Data, &m) != nil || m.Type != "assistant" {
		return
	}
	for _, b := range m.Message.Content {
		// Claude Code may repeat a message's blocks across its lines.
		h := sha256.Sum256([]byte(m.Message.ID + "\x00" + b.Type + "\x00" + b.Text + "\x00" + b.Name + "\x00" + string(b.Input)))
		key := string(h[:16])
		if c.shownText[key] {
			continue
		}
		c.shownText[key] = true
		switch b.Type {
		case "text":
			c.show("● " + b.Text)
		case "tool_use":
			c.show(fmt.Sprintf("● %s %s", b.Name, truncate(string(b.Input), 200)))
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
