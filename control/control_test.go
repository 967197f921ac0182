package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// serve runs a Server on a fresh control socket in a temporary directory
// and returns the directory and the requests it handled.
func serve(t *testing.T, handle func(Request) error) (dir string, got func() []Request) {
	t.Helper()
	dir = t.TempDir()
	ln, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reqs []Request
	s := &Server{Handle: func(_ context.Context, r Request) error {
		mu.Lock()
		reqs = append(reqs, r)
		mu.Unlock()
		return handle(r)
	}}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return dir, func() []Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]Request(nil), reqs...)
	}
}

func TestSendReachesTheDaemon(t *testing.T) {
	t.Parallel()
	dir, got := serve(t, func(r Request) error {
		if r.Device == "dev_unknown" {
			return errors.New("no such device")
		}
		return nil
	})
	fi, err := os.Stat(filepath.Join(dir, SocketName))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket: %v %v", fi.Mode(), err)
	}
	ctx := context.Background()
	if err := Send(ctx, dir, Request{Op: OpDeviceChanged, Device: "dev_1"}); err != nil {
		t.Fatal(err)
	}
	if err := Send(ctx, dir, Request{Op: OpDeviceChanged, Device: "dev_unknown"}); err == nil || !strings.Contains(err.Error(), "no such device") {
		t.Fatalf("the daemon's error: %v", err)
	}
	// Send checks a request before it goes out.
	if err := Send(ctx, dir, Request{Op: "shutdown", Device: "dev_1"}); err == nil {
		t.Fatal("an unknown op was sent")
	}
	want := []Request{{OpDeviceChanged, "dev_1"}, {OpDeviceChanged, "dev_unknown"}}
	if g := got(); len(g) != 2 || g[0] != want[0] || g[1] != want[1] {
		t.Fatalf("handled %+v", g)
	}
}

func TestNoDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	req := Request{Op: OpDeviceChanged, Device: "dev_1"}
	if err := Send(context.Background(), dir, req); !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("no socket: %v", err)
	}
	// A socket left behind by a daemon that died: nothing listens.
	ln, err := net.Listen("unix", filepath.Join(dir, SocketName))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if err := Send(context.Background(), dir, req); !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("stale socket: %v", err)
	}
	// The next daemon replaces it.
	ln, err = Listen(dir)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	defer ln.Close()
	// But not a live one.
	if _, err := Listen(dir); err == nil || !strings.Contains(err.Error(), "another daemon") {
		t.Fatalf("over a live socket: %v", err)
	}
}

// TestMalformedRequests: whatever arrives on the socket is answered with
// an error, nothing is handled, and the server goes on serving.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	dir, got := serve(t, func(Request) error { return nil })
	for _, raw := range []string{
		"",
		"not json",
		`{"op":"device_changed"}`,
		`{"op":"device_changed","device":"dev_1","extra":1}`,
		`{"op":"device_changed","device":"../../etc"}`,
		`{"op":"device_changed","device":"dev_1"} {"op":"device_changed","device":"dev_2"}`,
		`{"op":"revoke_all","device":"dev_1"}`,
		`{"op":"device_changed","device":"` + strings.Repeat("a", 65) + `"}`,
		strings.Repeat("x", 2*maxRequest),
		`{"op":"device_changed","device":"dev_1"}`, // no newline: the peer closes its side
	} {
		c, err := net.Dial("unix", filepath.Join(dir, SocketName))
		if err != nil {
			t.Fatal(err)
		}
		line := raw + "\n"
		if raw == `{"op":"device_changed","device":"dev_1"}` {
			line = raw
		}
		c.Write([]byte(line))
		c.(*net.UnixConn).CloseWrite()
		answer, err := bufio.NewReader(c).ReadBytes('\n')
		c.Close()
		var r reply
		if err != nil || json.Unmarshal(answer, &r) != nil || r.OK || r.Error == "" {
			t.Errorf("%.40q: answer %q %v", raw, answer, err)
		}
	}
	if g := got(); len(g) != 0 {
		t.Fatalf("handled %+v", g)
	}
	if err := Send(context.Background(), dir, Request{Op: OpDeviceChanged, Device: "dev_1"}); err != nil {
		t.Fatalf("after malformed requests: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"op":"device_changed","device":"dev_01HZX"}`,
		`{"op":"device_changed","device":""}`,
		`{"op":"x"}`,
		`{}`,
		`[]`,
		`{"op":"device_changed","device":"dev_1"}garbage`,
		`{"op":"device_changed","device":"dev\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := Decode(line)
		if err != nil {
			return
		}
		if r.Op != OpDeviceChanged || !validDeviceID(r.Device) {
			t.Fatalf("accepted %+v from %q", r, line)
		}
		again, err := Decode(mustJSON(r))
		if err != nil || again != r {
			t.Fatalf("round trip of %+v: %+v %v", r, again, err)
		}
	})
}
