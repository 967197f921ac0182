package recursor

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseFrame(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, raw string
		ok        bool
	}{
		{"minimal", `{"type":"heartbeat_pong"}`, true},
		{"full", `{"type":"x","id":"a","timestamp":"2026-03-21T05:34:46.123Z","payload":{},"seq":3}`, true},
		{"null id, timestamp, payload", `{"type":"x","id":null,"timestamp":null,"payload":null}`, true},
		{"zoneless timestamp", `{"type":"x","timestamp":"2026-03-21T05:34:46.123456"}`, true},
		{"offset timestamp", `{"type":"x","timestamp":"2026-03-21T05:34:46+02:00"}`, true},
		{"not JSON", `{"type":`, false},
		{"array", `[{"type":"x"}]`, false},
		{"two objects", `{"type":"x"}{"type":"y"}`, false},
		{"no type", `{"id":"a"}`, false},
		{"number type", `{"type":7}`, false},
		{"number id", `{"type":"x","id":7}`, false},
		{"number timestamp", `{"type":"x","timestamp":1700000000}`, false},
		{"empty timestamp", `{"type":"x","timestamp":""}`, false},
		{"bad timestamp", `{"type":"x","timestamp":"Sun, 22 Nov 2026 06:00:00 GMT"}`, false},
		{"payload array", `{"type":"x","payload":[]}`, false},
		{"payload string", `{"type":"x","payload":"{}"}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseFrame([]byte(tt.raw))
			if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrDropped) {
				t.Fatalf("ParseFrame(%s) = %v, want ok %v", tt.raw, err, tt.ok)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		typ, payload string
		bad          []string // paths of the violations
	}{
		{"connection_ack", `{"connection_mode":"local_only","connection_mode_description":"d","bridge_url":"wss://h/ws","active_sessions":[{"session_id":"s","status":"idle"}]}`, nil},
		{"connection_ack", `{"connection_mode_description":"d","bridge_url":"wss://h/ws","active_sessions":[{"status":3}]}`,
			[]string{"payload.connection_mode", "payload.active_sessions[0].session_id", "payload.active_sessions[0].status"}},
		{"health_status", `{"ready":true,"checks":{"tls_valid":true},"warnings":[]}`, nil},
		{"health_status", `{"ready":"true","checks":[],"warnings":{}}`, []string{"payload.checks", "payload.warnings", "payload.ready"}},
		{"health_status", `{"ready":false,"requires_acknowledgment":true,"warnings":["DIRECT_PUBLIC_CONNECTION"]}`, nil},
		{"health_status", `{"ready":false,"requires_acknowledgment":false}`, []string{"payload.ready"}},
		{"stream_chunk", `{"session_id":"s","content":"hi"}`, nil},
		{"stream_chunk", `{"session_id":"","content":null}`, []string{"payload.session_id", "payload.content"}},
		{"approval_required", `{"session_id":"s","tool_call_id":"t","params":{},"risk_level":"high","source":"agent_sdk"}`, nil},
		{"approval_required", `{"session_id":"s","tool_call_id":1,"params":"x","risk_level":"extreme","tool":null}`,
			[]string{"payload.tool_call_id", "payload.params", "payload.risk_level"}},
		{"tool_result", `{"session_id":"s","result":{"success":true,"content":"ok","duration_ms":812}}`, nil},
		{"tool_result", `{"session_id":"s","result":{"success":"yes","output":"ok","duration_ms":812.0,"error":false}}`,
			[]string{"payload.result.content", "payload.result.success", "payload.result.error", "payload.result.duration_ms"}},
		{"tool_result", `{"session_id":"s","result":{"content":"ok","duration_ms":1e3}}`, []string{"payload.result.duration_ms"}},
		{"tool_result", `{"session_id":"s","result":"ok"}`, []string{"payload.result"}},
		{"git_status_response", `{"branch":"HEAD (detached at abc)","ahead":0,"behind":1.5,"changes":[{"path":"a","status":"renamed","additions":1}]}`, nil},
		{"git_status_response", `{"branch":null,"ahead":"1","changes":[{"path":"a","status":"conflicted"},{"status":"typechange"}]}`,
			[]string{"payload.branch", "payload.ahead", "payload.behind", "payload.changes[0].status", "payload.changes[1].path", "payload.changes[1].status"}},
		{"git_diff_response", `{"files":[{"path":"a","status":"modified","additions":0,"deletions":0,"old_mode":"100644","hunks":[{"header":"@@","lines":[{"type":"added","content":"x"}]}]}]}`, nil},
		{"git_diff_response", `{"files":[{"path":"a","status":"binary","additions":null,"deletions":0,"old_mode":100644,"hunks":[{"lines":[{"type":"+","content":"x"}]}]}]}`,
			[]string{"payload.files[0].status", "payload.files[0].additions", "payload.files[0].old_mode", "payload.files[0].hunks[0].header", "payload.files[0].hunks[0].lines[0].type"}},
		{"file_list_response", `{"path":".","entries":[{"name":"a","path":"a","type":"directory","size":0,"modified":"2026-11-22T06:10:00Z"}]}`, nil},
		{"file_list_response", `{"entries":[{"name":"a","path":"a","type":"symlink","modified":"yesterday","children":[{"name":"b"}]}]}`,
			[]string{"payload.entries[0].type", "payload.entries[0].modified", "payload.entries[0].children[0].path", "payload.entries[0].children[0].type"}},
		{"notification", `{"notification_id":"n","title":"t","data":{}}`, nil},
		{"notification", `{"title":7,"data":[]}`, []string{"payload.title", "payload.data", "payload.notification_id"}},
		{"claude_event", `{"event_type":"PostToolUse","session_id":"s","payload":{"result":{"success":true,"content":"x"}}}`, nil},
		{"claude_event", `{"event_type":"PostToolUse","payload":{"result":{"success":"true"}}}`, []string{"payload.session_id", "payload.payload.result.success"}},
		{"session_end", `{}`, []string{"payload.session_id"}},
		{"teleport", `{"anything":[1,2]}`, nil},
	} {
		t.Run(tt.typ, func(t *testing.T) {
			f, err := ParseFrame([]byte(`{"type":"` + tt.typ + `","payload":` + tt.payload + `}`))
			if err != nil {
				t.Fatal(err)
			}
			err = Check(f)
			var got []string
			var ce *CheckError
			if errors.As(err, &ce) {
				for _, v := range ce.Violations {
					got = append(got, v.Path)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(tt.bad, ",") {
				t.Fatalf("Check(%s) = %v, want violations at %v", tt.payload, err, tt.bad)
			}
		})
	}
}

func TestNotificationWithEnvelopeIDIsAckable(t *testing.T) {
	t.Parallel()
	f, _ := ParseFrame([]byte(`{"type":"notification","id":"n-1","payload":{}}`))
	if err := Check(f); err != nil {
		t.Fatal(err)
	}
}

func TestDartISO(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 21, 5, 34, 46, 123456000, time.UTC)
	for _, tt := range []struct {
		t    time.Time
		utc  bool
		want string
	}{
		{at, true, "2026-03-21T05:34:46.123456Z"},
		{at.Truncate(time.Millisecond), true, "2026-03-21T05:34:46.123Z"},
		{at.Truncate(time.Second), true, "2026-03-21T05:34:46.000Z"},
		{at.In(time.FixedZone("x", 3600)), false, "2026-03-21T06:34:46.123456"},
	} {
		if got := DartISO(tt.t, tt.utc); got != tt.want || !DateTimeParses(got) {
			t.Errorf("DartISO(%v, %v) = %q, want %q", tt.t, tt.utc, got, tt.want)
		}
	}
}

func TestDateTimeParses(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"2026-11-22T06:10:00Z": true, "2026-11-22T06:10:00.123+05:30": true, "2026-11-22 06:10": true,
		"20261122T061000Z": true, "2026-11-22": true, "+002026-11-22T06:10:00Z": true,
		"2026-11-22T06:10:00 UTC": false, "22/11/2026": false, "": false, "2026-11-22T6:10:00Z": false,
	} {
		if got := DateTimeParses(s); got != want {
			t.Errorf("DateTimeParses(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestIsDartInt(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"0": true, "-12": true, "812": true, "7.0": false, "1e3": false,
		"1E3": false, "99999999999999999999": false} {
		if got := isDartInt(json.Number(s)); got != want {
			t.Errorf("isDartInt(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestParseQR(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ raw, url, token string }{
		{`{"v":1,"url":"wss://127.0.0.1:7420/ws","token":" tpc_x \n","fp":"sha256:00","exp":"2026-11-22T06:00:00Z"}`, "wss://127.0.0.1:7420/ws", "tpc_x"},
		{`tether://pair?url=wss%3A%2F%2Fh%3A1%2Fws&token=tpc_y`, "wss://h:1/ws", "tpc_y"},
		{`{"url":"ws://127.0.0.1:7420/ws","token":"t"}`, "", ""},
		{`{"url":"wss://h/ws"}`, "", ""},
		{`{"url":"wss://h/ws","token":7}`, "", ""},
		{`{"url":"wss:///ws","token":"t"}`, "", ""},
		{`tether://pair#url=wss%3A%2F%2Fh%2Fws&token=t`, "", ""},
	} {
		u, tok, err := ParseQR(tt.raw)
		if u != tt.url || tok != tt.token || (err == nil) != (tt.url != "") {
			t.Errorf("ParseQR(%s) = %q, %q, %v", tt.raw, u, tok, err)
		}
	}
}

func TestParentPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"lib/models/user": "lib/models", "lib/models": "lib", "lib": "/",
		"/abs/dir": "abs", "lib/": "/"} {
		if got := ParentPath(in); got != want {
			t.Errorf("ParentPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEnvelopeKeyOrder(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(object{{"type", "auth"}, {"payload", object{{"token", "t"}, {"z", nil}}}, {"id", "test-1"}})
	if err != nil || string(b) != `{"type":"auth","payload":{"token":"t","z":null},"id":"test-1"}` {
		t.Fatalf("%s %v", b, err)
	}
}

func TestUUID4(t *testing.T) {
	t.Parallel()
	u := NewUUID()
	if len(u) != 36 || u[14] != '4' || !strings.ContainsRune("89ab", rune(u[19])) || u == NewUUID() {
		t.Fatalf("uuid4 %q", u)
	}
}

// FuzzParseFrame: the frame parser and the checkers never panic, and a frame
// ParseFrame accepts has a string type and a payload that re-encodes.
func FuzzParseFrame(f *testing.F) {
	for _, s := range []string{`{"type":"tool_result","payload":{"session_id":"s","result":{"content":"x","duration_ms":1}}}`,
		`{"type":"git_diff_response","payload":{"files":[{"hunks":[{"lines":[{}]}]}]}}`,
		`{"type":"file_list_response","payload":{"entries":[{"children":[{"children":[]}]}]}}`,
		`{"type":"claude_event","payload":{"event_type":"PreToolUse","payload":{"params":1}}}`,
		`{"type":"x","timestamp":"2026-01-01"}`, `[]`, `{"type":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := ParseFrame(data)
		if err != nil {
			if !errors.Is(err, ErrDropped) {
				t.Fatalf("error without ErrDropped: %v", err)
			}
			return
		}
		var ce *CheckError
		if err := Check(fr); err != nil && (!errors.As(err, &ce) || len(ce.Violations) == 0) {
			t.Fatalf("Check: %v", err)
		}
		if _, err := json.Marshal(fr.Payload); err != nil {
			t.Fatalf("payload does not re-encode: %v", err)
		}
	})
}
