package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
)

// bridgeConn is the daemon's end of a bridge that RunBridge serves in this
// process.
type bridgeConn struct {
	t    *testing.T
	conn net.Conn
	enc  *sandbox.Encoder
	dec  *sandbox.Decoder
	errc chan error
}

// startBridge runs a bridge for the demo agent.
func startBridge(t *testing.T) *bridgeConn {
	t.Helper()
	return startBridgeWith(t, "demo")
}

// startBridgeWith runs a bridge for agentName: a built-in agent, or "wait",
// which asks for permission to use Bash and fails when denied.
func startBridgeWith(t *testing.T, agentName string) *bridgeConn {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "b.sock")
	notifyR, notifyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer notifyR.Close()
	agents := sandbox.DefaultAgents()
	agents["wait"] = func(sandbox.AgentOptions) (agent.Agent, error) {
		return funcAgent(func(ctx context.Context, prompt string, host agent.Host) error {
			d, err := host.RequestPermission(ctx, agent.PermissionRequest{RequestID: prompt, ToolName: "Bash"})
			if err != nil {
				return err
			}
			if d.Behavior != "allow" {
				return errors.New("denied: " + d.Message)
			}
			return nil
		}), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &bridgeConn{t: t, errc: make(chan error, 1)}
	go func() {
		b.errc <- sandbox.RunBridge(ctx, sandbox.BridgeConfig{
			SocketPath: sock, SandboxID: "b", Agent: agentName, WorkDir: dir, StateDir: dir,
			Agents: agents, Notify: notifyW,
		})
	}()
	var one [1]byte
	if _, err := notifyR.Read(one[:]); err != nil {
		t.Fatalf("notify: %v", err)
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		conn.Close()
		<-b.errc
	})
	b.conn, b.enc, b.dec = conn, sandbox.NewEncoder(conn), sandbox.NewDecoder(conn, 0)
	if ev := b.next(); ev.Ev != sandbox.EvReady {
		t.Fatalf("first event %+v, want ready", ev)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file still there after the connection: %v", err)
	}
	return b
}

func (b *bridgeConn) send(c sandbox.BridgeCommand) {
	b.t.Helper()
	if err := b.enc.Encode(c); err != nil {
		b.t.Fatal(err)
	}
}

func (b *bridgeConn) next() sandbox.Event {
	b.t.Helper()
	b.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	ev, err := b.dec.DecodeEvent()
	if err != nil {
		b.t.Fatalf("read event: %v", err)
	}
	return ev
}

// skipTo reads events until one named name and returns it.
func (b *bridgeConn) skipTo(name string) sandbox.Event {
	b.t.Helper()
	for {
		if ev := b.next(); ev.Ev == name {
			return ev
		}
	}
}

func TestBridgeProtocol(t *testing.T) {
	b := startBridge(t)

	b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdPing, ID: "p1"})
	if ev := b.next(); ev.Ev != sandbox.EvPong || ev.ID != "p1" {
		t.Errorf("ping answered %+v", ev)
	}

	if _, err := b.conn.Write([]byte("{\"cmd\":\"dance\"}\nnot json\n")); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if ev := b.next(); ev.Ev != sandbox.EvError || ev.Code != sandbox.CodeBadCommand {
			t.Errorf("bad line answered %+v, want error bad_command", ev)
		}
	}

	b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdPermissionResponse, RequestID: "nope", Decision: &agent.PermissionDecision{Behavior: "allow"}})
	if ev := b.next(); ev.Ev != sandbox.EvError || ev.Code != sandbox.CodeUnknownRequest || ev.RequestID != "nope" {
		t.Errorf("stray permission_response answered %+v", ev)
	}

	b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdQuery, Prompt: "hi", SessionID: "q1"})
	done := b.skipTo(sandbox.EvDone)
	if done.SessionID != "q1" || done.AgentSessionID == "" {
		t.Fatalf("done %+v", done)
	}

	b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdResume, SessionID: "no-such-session"})
	if ev := b.next(); ev.Ev != sandbox.EvError || ev.Code != sandbox.CodeAgent {
		t.Errorf("resume of an unknown session answered %+v, want error agent", ev)
	}
	b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdResume, SessionID: done.AgentSessionID})
	if ev := b.next(); ev.Ev != sandbox.EvDone || ev.AgentSessionID != done.AgentSessionID {
		t.Errorf("resume answered %+v", ev)
	}
	b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdQuery, Prompt: "again", SessionID: "q2"})
	var result string
	for ev := b.next(); ev.Ev != sandbox.EvDone; ev = b.next() {
		if ev.Ev == sandbox.EvMessage && strings.Contains(string(ev.Data), `"type":"result"`) {
			result = string(ev.Data)
		}
	}
	if !strings.Contains(result, "turn 2 of this conversation") {
		t.Errorf("result after resume: %s", result)
	}

	b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdShutdown})
	select {
	case err := <-b.errc:
		b.errc <- err
		if err != nil {
			t.Errorf("RunBridge after shutdown: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunBridge did not return after shutdown")
	}
}

func TestBridgePermissionRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		answer   *agent.PermissionDecision // nil: interrupt instead
		wantEvs  []string
		wantCode string
	}{
		{"allowed", &agent.PermissionDecision{Behavior: "allow"}, []string{sandbox.EvDone}, ""},
		{"denied", &agent.PermissionDecision{Behavior: "deny", Message: "no"}, []string{sandbox.EvError, sandbox.EvDone}, sandbox.CodeAgent},
		{"interrupted", nil, []string{sandbox.EvPermissionCancel, sandbox.EvDone}, ""},
	}
	b := startBridgeWith(t, "wait")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdQuery, Prompt: "req-" + tt.name, SessionID: tt.name})
			ev := b.next()
			if ev.Ev != sandbox.EvPermissionRequest || ev.Request.RequestID != "req-"+tt.name || ev.Request.ToolName != "Bash" {
				t.Fatalf("got %+v, want the permission request", ev)
			}
			b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdQuery, Prompt: "meanwhile", SessionID: "other"})
			if ev := b.next(); ev.Ev != sandbox.EvError || ev.Code != sandbox.CodeBusy {
				t.Errorf("query during a turn answered %+v, want busy", ev)
			}
			if tt.answer != nil {
				b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdPermissionResponse, RequestID: ev.Request.RequestID, Decision: tt.answer})
			} else {
				b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdInterrupt})
			}
			for _, want := range tt.wantEvs {
				got := b.next()
				if got.Ev != want {
					t.Fatalf("got %+v, want %s", got, want)
				}
				if got.Ev == sandbox.EvError && got.Code != tt.wantCode {
					t.Errorf("error %+v, want code %s", got, tt.wantCode)
				}
				if got.Ev == sandbox.EvPermissionCancel && got.RequestID != ev.Request.RequestID {
					t.Errorf("cancel %+v for the wrong request", got)
				}
			}
		})
	}
}

func TestBridgeAgentErrors(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	tests := []struct {
		agent string
		want  error
	}{
		{"nobody", sandbox.ErrUnknownAgent},
		{"claude-code", exec.ErrNotFound},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		err := sandbox.RunBridge(context.Background(), sandbox.BridgeConfig{
			SocketPath: filepath.Join(dir, "s.sock"), SandboxID: "e", Agent: tt.agent, WorkDir: dir,
		})
		if !errors.Is(err, tt.want) {
			t.Errorf("agent %s: RunBridge = %v, want %v", tt.agent, err, tt.want)
		}
	}
	if _, err := sandbox.BridgeConfigFromEnv(func(string) string { return "" }); !errors.Is(err, sandbox.ErrBridgeConfig) {
		t.Errorf("empty environment: %v, want ErrBridgeConfig", err)
	}
	env := map[string]string{sandbox.EnvSocket: "/s", sandbox.EnvSandboxID: "e", sandbox.EnvAgent: "demo", sandbox.EnvWorkDir: "/w",
		sandbox.EnvAgentSettings: `{"model":"sonnet","permissionMode":"plan","maxThinkingTokens":2048}`}
	cfg, err := sandbox.BridgeConfigFromEnv(func(k string) string { return env[k] })
	if want := (agent.Settings{Model: "sonnet", PermissionMode: "plan", MaxThinkingTokens: 2048}); err != nil || cfg.Settings != want {
		t.Errorf("settings from the environment: %+v, %v", cfg.Settings, err)
	}
	env[sandbox.EnvAgentSettings] = `{"model":`
	if _, err := sandbox.BridgeConfigFromEnv(func(k string) string { return env[k] }); !errors.Is(err, sandbox.ErrBridgeConfig) {
		t.Errorf("malformed settings: %v, want ErrBridgeConfig", err)
	}
}

func TestBridgeConfigure(t *testing.T) {
	t.Parallel()
	b := startBridge(t)
	want := agent.Settings{Model: "demo-large", PermissionMode: "plan"}
	b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdConfigure, ID: "c1", Settings: &want})
	if ev := b.next(); ev.Ev != sandbox.EvConfigured || ev.ID != "c1" || ev.Settings == nil || *ev.Settings != want {
		t.Fatalf("configure answered %+v", ev)
	}
	b.send(sandbox.BridgeCommand{Cmd: sandbox.CmdQuery, Prompt: "hi", SessionID: "s"})
	ev := b.skipTo(sandbox.EvMessage)
	var init struct{ Subtype, Model, PermissionMode string }
	json.Unmarshal(ev.Data, &init)
	if init.Subtype != "init" || init.Model != "demo-large" || init.PermissionMode != "plan" {
		t.Errorf("the demo's init after configure: %s", ev.Data)
	}
	b.skipTo(sandbox.EvDone)

	// An agent without settings says so, with the command's id.
	w := startBridgeWith(t, "wait")
	w.send(sandbox.BridgeCommand{Cmd: sandbox.CmdConfigure, ID: "c2", Settings: &want})
	if ev := w.next(); ev.Ev != sandbox.EvError || ev.ID != "c2" || ev.Code != sandbox.CodeAgent {
		t.Fatalf("configure of an agent without settings answered %+v", ev)
	}
}
