package terminal

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/wire"
)

func TestSessionArgs(t *testing.T) {
	t.Parallel()
	const id = "4fdb71fd-f25e-4219-89cd-d19c1f376003"
	for _, c := range []struct {
		args   []string
		id     string
		offers bool
	}{
		{[]string{"--resume", id}, id, true},
		{[]string{"-r", id, "--model", "opus"}, id, true},
		{[]string{"--resume=" + id}, id, true},
		{[]string{"--session-id", id}, id, true},
		{[]string{"--continue"}, "", false},
		{[]string{"-c"}, "", false},
		{[]string{"--resume"}, "", false},
		{[]string{"--resume", "--model"}, "", false},
		{[]string{"-p", "hello"}, "", false},
		{[]string{"--resume", "bad id!"}, "", false},
		{[]string{"doctor"}, "", false},
		{[]string{"mcp", "list"}, "", false},
	} {
		got, args, ok := sessionArgs(c.args)
		if ok != c.offers || got != c.id {
			t.Errorf("sessionArgs(%q) = %q, %v", c.args, got, ok)
		}
		if ok && !slices.Equal(args, c.args) {
			t.Errorf("sessionArgs(%q) changed the arguments: %q", c.args, args)
		}
	}
	got, args, ok := sessionArgs([]string{"--model", "opus"})
	if !ok || !idPattern.MatchString(got) || !slices.Equal(args, []string{"--model", "opus", "--session-id", got}) {
		t.Fatalf("a new session: %q %q %v", got, args, ok)
	}
	for _, c := range []struct{ in, want []string }{
		{[]string{"--model", "opus", "--session-id", got, "--resume=x", "-r", "y"}, []string{"--model", "opus"}},
		// The prompt given on the command line ran once: not again.
		{[]string{"fix the failing test", "--model", "opus"}, []string{"--model", "opus"}},
		{[]string{"--model", "opus", "fix it"}, []string{"--model", "opus"}},
		{[]string{"--add-dir", "a", "b", "--verbose", "fix it"}, []string{"--add-dir", "a", "b", "--verbose"}},
		{[]string{"--model=opus", "fix it", "--dangerously-skip-permissions"}, []string{"--model=opus", "--dangerously-skip-permissions"}},
	} {
		if r := resumeArgs(c.in, got); !slices.Equal(r, append(c.want, "--resume", got)) {
			t.Errorf("resumeArgs(%q) = %q", c.in, r)
		}
	}
}

// TestKeyPress: a key takes the session back; what the terminal answers
// to the stopped claude's queries does not.
func TestKeyPress(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"x": true, "\r": true, "\x03": true, "\x1b": true, "hello": true,
		"\x1b[?1;2c": false, "\x1b]11;rgb:0000/0000/0000\x07": false, "\x1b[12;1R": false, "\x1b[A": false, "": false,
	} {
		if got := keyPress([]byte(in)); got != want {
			t.Errorf("keyPress(%q) = %v", in, got)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"op":"hello","role":"control","session_id":"a-1","cwd":"/p"}`, `{"op":"release","nonce":"N"}`,
		`{"op":"hello","role":"x","session_id":"a"}`, `{"op":"nope"}`, `[]`, `{"op":"hello","role":"bridge","session_id":"../x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := decode(line)
		if err != nil {
			if !errors.Is(err, ErrBadMsg) {
				t.Fatalf("decode(%q): %v is not ErrBadMsg", line, err)
			}
			return
		}
		if m.Op == OpHello && !idPattern.MatchString(m.SessionID) {
			t.Fatalf("decode(%q) let a bad session id through: %+v", line, m)
		}
	})
}

// TestReaderBoundsALine: a line past maxLine is refused, not buffered.
func TestReaderBoundsALine(t *testing.T) {
	t.Parallel()
	r := newReader(strings.NewReader(`{"op":"takeback","message":"` + strings.Repeat("a", maxLine) + `"}` + "\n"))
	if _, err := r.next(); !errors.Is(err, ErrBadMsg) {
		t.Fatalf("an overlong line: %v", err)
	}
}

// fakeManager records what the server asks of the session manager.
type fakeManager struct {
	mu       sync.Mutex
	attached map[string]session.Terminal
	refuse   error
	back     chan string
	detached chan string
}

func (m *fakeManager) AttachTerminal(_ context.Context, id, _ string, t session.Terminal) error {
	if m.refuse != nil {
		return m.refuse
	}
	m.mu.Lock()
	m.attached[id] = t
	m.mu.Unlock()
	return nil
}

func (m *fakeManager) DetachTerminal(id string, _ session.Terminal) { m.detached <- id }

func (m *fakeManager) HandBack(id string, _ bool) error {
	m.back <- id
	return nil
}

func (m *fakeManager) terminal(id string) session.Terminal {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.attached[id]
}

// TestServerHandsOverABridgeConnection: a control connection registers;
// Release sends its nonce and returns the bridge connection that names it
// with the bytes that followed the hello; a takeback reaches HandBack; a
// refusal and a bad first line close the connection; Close ends the
// control connections.
func TestServerHandsOverABridgeConnection(t *testing.T) {
	t.Parallel()
	m := &fakeManager{attached: map[string]session.Terminal{}, back: make(chan string, 1), detached: make(chan string, 1)}
	s := &Server{Manager: m}
	ln, err := net.Listen("unix", t.TempDir()+"/t.sock")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	ctl, err := dialControl(ln.Addr().String(), "s-1", "/p")
	if err != nil {
		t.Fatal(err)
	}
	term := m.terminal("s-1")
	released := make(chan net.Conn, 1)
	go func() {
		c, err := term.Release(context.Background())
		if err != nil {
			t.Error(err)
		}
		released <- c
	}()
	msg := <-ctl.msgs
	if msg.Op != OpRelease || msg.Nonce == "" {
		t.Fatalf("release = %+v", msg)
	}
	bridge, err := net.Dial("unix", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var hello bytes.Buffer
	write(&hello, Msg{Op: OpHello, Role: RoleBridge, SessionID: "s-1", Nonce: msg.Nonce})
	bridge.Write(append(hello.Bytes(), "ready\n"...)) // one write: the server reads both at once
	c := <-released
	buf := make([]byte, 6)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "ready\n" {
		t.Fatalf("the bridge's first bytes: %q %v", buf[:n], err)
	}
	write(ctl.conn, Msg{Op: OpTakeback})
	if id := <-m.back; id != "s-1" {
		t.Fatalf("HandBack(%q)", id)
	}
	term.Reclaim()
	if msg := <-ctl.msgs; msg.Op != OpReclaim {
		t.Fatalf("reclaim = %+v", msg)
	}
	s.Close()
	if _, ok := <-ctl.msgs; ok {
		t.Fatal("the control connection outlived Close")
	}
	if id := <-m.detached; id != "s-1" {
		t.Fatalf("DetachTerminal(%q)", id)
	}

	m2 := &fakeManager{refuse: wire.Errorf(wire.CodePathOutsideRoot, "outside the roots"), detached: make(chan string, 1)}
	s2 := &Server{Manager: m2}
	ln2, _ := net.Listen("unix", t.TempDir()+"/t.sock")
	go s2.Serve(ln2)
	defer s2.Close()
	if _, err := dialControl(ln2.Addr().String(), "s-2", "/p"); err == nil || !strings.Contains(err.Error(), "outside the roots") {
		t.Fatalf("a refused registration: %v", err)
	}
	raw, _ := net.Dial("unix", ln2.Addr().String())
	raw.Write([]byte("not json\n"))
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := raw.Read(buf); err == nil {
		t.Fatalf("a bad first line got %q", buf[:n])
	}
}

// TestShownConnShowsThePhonesTurn: what passes is passed unchanged; the
// prompt and the agent's text and tool calls (each once) reach the
// terminal, lines ending in CR LF for its raw mode.
func TestShownConnShowsThePhonesTurn(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	var shown bytes.Buffer
	c := newShownConn(a, &shown)
	query := `{"cmd":"query","prompt":"fix the tests","sessionId":"s"}` + "\n"
	go b.Write([]byte(query[:10]))
	buf := make([]byte, 1024)
	n, _ := c.Read(buf)
	go b.Write([]byte(query[10:]))
	m, _ := c.Read(buf[n:])
	if string(buf[:n+m]) != query {
		t.Fatalf("read %q", buf[:n+m])
	}
	text := `{"ev":"message","data":{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"On it.\nTwo lines."}]}}}` + "\n"
	tool := `{"ev":"message","data":{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","name":"Bash","input":{"command":"go test"}}]}}}` + "\n"
	other := `{"ev":"message","data":{"type":"user","message":{"content":[{"type":"tool_result"}]}}}` + "\n"
	go io.Copy(io.Discard, b)
	for _, line := range []string{text, text, tool, other} {
		if _, err := c.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	want := "\x1b[1m› from the phone:\x1b[0m fix the tests\r\n● On it.\r\nTwo lines.\r\n● Bash {\"command\":\"go test\"}\r\n"
	if shown.String() != want {
		t.Fatalf("shown\n%q\nwant\n%q", shown.String(), want)
	}
}
