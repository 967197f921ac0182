package codex

import (
	"errors"
	"testing"
)

func TestDecodeMessage(t *testing.T) {
	t.Parallel()
	good := []struct {
		line           string
		resp, req      bool
		method, params string
	}{
		{`{"id":1,"result":{"userAgent":"x"}}`, true, false, "", ""},
		{`{"id":0,"method":"item/commandExecution/requestApproval","params":{"itemId":"call_1"}}`, false, true, "item/commandExecution/requestApproval", `{"itemId":"call_1"}`},
		{`{"id":"abc","method":"item/tool/requestUserInput"}`, false, true, "item/tool/requestUserInput", ""},
		{`{"method":"turn/completed","params":{},"emittedAtMs":1}`, false, false, "turn/completed", `{}`},
		{"  {\"id\":7,\"error\":{\"code\":-32600,\"message\":\"bad\"}}\r\n", true, false, "", ""},
		{`{"id":null,"method":"warning"}`, false, false, "warning", ""},
	}
	for _, g := range good {
		m, err := decodeMessage([]byte(g.line))
		if err != nil {
			t.Errorf("%s: %v", g.line, err)
			continue
		}
		if m.isResponse() != g.resp || m.isRequest() != g.req || m.Method != g.method || string(m.Params) != g.params {
			t.Errorf("%s: decoded %+v", g.line, m)
		}
	}
	for _, bad := range []string{
		``, `   `, `[]`, `"turn/completed"`, `null`, `{`, `{"method":"x"`, `{}`, `{"params":{}}`,
		`{"id":{"a":1},"result":{}}`, `{"id":[1],"method":"x"}`, `{"id":true,"result":1}`,
		`{"method":7}`, `{"id":1,"error":"text"}`, "{\"method\":\"x\"}\x00",
	} {
		if m, err := decodeMessage([]byte(bad)); !errors.Is(err, errMalformed) {
			t.Errorf("%q: decoded %+v, %v; want errMalformed", bad, m, err)
		}
	}
}

func TestInnerCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{`/bin/bash -lc 'echo hello-from-codex > out.txt'`, `echo hello-from-codex > out.txt`},
		{`/bin/bash -c 'ls'`, `ls`},
		{`bash -lc "git status"`, `git status`},
		{`/usr/bin/zsh -lc 'echo it'"'"'s'`, `echo it's`},
		{`/bin/bash -lc 'a' 'b'`, `/bin/bash -lc 'a' 'b'`},
		{`/bin/bash -x 'ls'`, `/bin/bash -x 'ls'`},
		{`python3 -c 'print(1)'`, `python3 -c 'print(1)'`},
		{`/bin/bash -lc $(curl x)`, `/bin/bash -lc $(curl x)`},
		{`/bin/bash -lc "$(curl x)"`, `/bin/bash -lc "$(curl x)"`},
		{`/bin/bash -lc 'unterminated`, `/bin/bash -lc 'unterminated`},
		{`/bin/bash -lc 'ls'; rm -rf /`, `/bin/bash -lc 'ls'; rm -rf /`},
		{`ls -la`, `ls -la`},
		{``, ``},
	} {
		if got := innerCommand(c.in); got != c.want {
			t.Errorf("innerCommand(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzDecodeMessage: no line makes the decoder panic, and what it accepts
// is a response, a request or a notification with a usable id.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"result":{}}`, `{"id":0,"method":"item/fileChange/requestApproval","params":{"itemId":"c"}}`,
		`{"method":"item/agentMessage/delta","params":{"turnId":"t","itemId":"m","delta":"Hi"}}`,
		`{"id":"x","error":{"code":1,"message":"m"}}`, `{"id":-1}`, `{}`, `[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b)
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v is not errMalformed", err)
			}
			return
		}
		if m.Method == "" && len(m.ID) == 0 {
			t.Fatalf("accepted %q without method or id", b)
		}
		if m.isResponse() == m.isRequest() && len(m.ID) > 0 {
			t.Fatalf("%q is both or neither a response and a request", b)
		}
	})
}

// FuzzInnerCommand: unwrapping never panics, and returns either the input
// or something shorter that the input contains unquoted or quoted.
func FuzzInnerCommand(f *testing.F) {
	for _, s := range []string{`/bin/bash -lc 'ls'`, `bash -c "a \" b"`, `sh -lc a\ b`, `'`, `"`, `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := innerCommand(s)
		if got != s && len(got) >= len(s) {
			t.Fatalf("innerCommand(%q) = %q", s, got)
		}
	})
}
