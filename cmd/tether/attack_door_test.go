package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/tetherdev/tether/wire"
)

// TestSandboxCannotPairItself has a demo session's approved command try
// what a sandboxed agent would to become a phone: read the daemon's
// runtime record (it holds the pairing page's key), then ask the pairing
// page for a code over loopback. Neither works, and no device is added.
func TestSandboxCannotPairItself(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	c, _ := d.phone(nil)
	const id = "pair-myself"
	d.sandboxedSession(c, id, "ask")
	data := dataDirOf(d.env)
	_, port, _ := net.SplitHostPort(d.info.Listen)
	cmd := "cat " + data + "/daemon.json; " +
		"curl -sk --max-time 3 'https://localhost:" + port + "/pair?format=json'; " +
		"curl -sk --max-time 3 'https://127.0.0.1:" + port + "/pair?format=json&key='; echo attempted"
	c.Send(wire.TypeMessage, "m1", map[string]any{"session_id": id, "content": "run: " + cmd})
	var ar wire.ApprovalRequired
	c.WaitFor(wire.TypeApprovalRequired, &ar, nil)
	c.Send(wire.TypeApprovalResponse, "r1", map[string]any{"session_id": id, "tool_call_id": ar.ToolCallID, "decision": "approved"})
	var tr wire.ToolResult
	c.WaitFor(wire.TypeToolResult, &tr, nil)
	t.Logf("tool_result %+v", tr.Result)
	page := d.info.PairPage[strings.Index(d.info.PairPage, "key=")+len("key="):]
	if !strings.Contains(tr.Result.Content, "attempted") || strings.Contains(tr.Result.Content, "tpc_") || strings.Contains(tr.Result.Content, page) {
		t.Errorf("the sandbox got a pairing code or the page's key:\n%s", tr.Result.Content)
	}
	_, out, _ := runCmd(t, d.env, "devices", "list", "--json")
	var devices []struct{ ID string }
	if err := json.Unmarshal([]byte(out), &devices); err != nil || len(devices) != 1 {
		t.Errorf("devices after the attempt: %v %s", err, out)
	}
}

// TestDeviceNamesReachTheTerminalClean pairs a phone whose name, platform
// and version carry terminal escape sequences and a bidirectional
// override, renames another with the same: `tether devices list` prints
// none of them.
func TestDeviceNamesReachTheTerminalClean(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	const evil = "\x1b]0;owned\x07\x1b[2J\u202eevil\x9b31m"
	_, out, _ := runCmd(t, d.env, "pair", "--json")
	var p struct{ Token string }
	json.Unmarshal([]byte(out), &p)
	c := d.connect(p.Token, map[string]any{"device_name": "phone " + evil, "platform": "ios" + evil, "client_version": "1.0.0" + evil})
	var ack wire.ConnectionAck
	c.Expect(wire.TypeConnectionAck, &ack)
	phone, _ := d.phone(nil)
	if env := deviceReply(phone, "device_rename", map[string]any{"device_id": ack.DeviceID, "name": "renamed " + evil}); env.Type != "device_list_response" {
		t.Fatalf("rename: %s %s", env.Type, env.Payload)
	}
	_, out, _ = runCmd(t, d.env, "devices", "list")
	if strings.ContainsAny(out, "\x1b\x07\u202e\u009b") || !strings.Contains(out, "renamed ]0;owned[2Jevil31m") {
		t.Fatalf("devices list:\n%q", out)
	}
}
