package wire

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestGitStageFiles(t *testing.T) {
	t.Parallel()
	env := Envelope{Type: TypeGitDiscard, Payload: json.RawMessage(`{"session_id":"s","files":["a.txt",{"path":"b.txt","fingerprint":"f1"}]}`)}
	var p GitStage
	if err := DecodePayload(env, &p); err != nil {
		t.Fatal(err)
	}
	want := []GitFileRef{{Path: "a.txt"}, {Path: "b.txt", Fingerprint: "f1"}}
	if p.SessionID != "s" || len(p.Files) != 2 || p.Files[0] != want[0] || p.Files[1] != want[1] {
		t.Fatalf("decoded %+v", p)
	}
	for _, bad := range []string{`{"files":[1]}`, `{"files":[{"path":2}]}`, `{"files":"a"}`, `{"hunk":"1"}`} {
		err := DecodePayload(Envelope{Type: TypeGitStage, Payload: json.RawMessage(bad)}, &p)
		var we *Error
		if !errors.As(err, &we) || we.Code != CodeInvalidMessage {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// FuzzGitStage decodes arbitrary git_stage payloads, whose files are
// paths or objects (GitFileRef's own decoder): nothing panics, and an
// error is always INVALID_MESSAGE.
func FuzzGitStage(f *testing.F) {
	f.Add(`{"session_id":"s","files":["a",{"path":"b","fingerprint":"f"}]}`)
	f.Add(`{"session_id":"s","path":"a","fingerprint":"f","hunk":0}`)
	f.Add(`{"files":[null,"",{}]}`)
	f.Fuzz(func(t *testing.T, payload string) {
		env, err := Decode([]byte(`{"type":"git_stage","payload":` + payload + `}`))
		if err != nil {
			return
		}
		var p GitStage
		if err := DecodePayload(env, &p); err != nil {
			var we *Error
			if !errors.As(err, &we) || we.Code != CodeInvalidMessage {
				t.Fatalf("%s: %v", payload, err)
			}
		}
	})
}
