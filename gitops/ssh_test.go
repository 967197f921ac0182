package gitops

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// sshGitServer serves git over SSH on loopback to the one client key
// authorized: an SSH server of the test's own (golang.org/x/crypto/ssh)
// that runs git's real receive-pack and upload-pack for the command the
// client asks for, as a forge's would. It returns the server's host key
// line for known_hosts and its port.
func sshGitServer(t *testing.T, authorized ssh.PublicKey) (hostKey string, port int) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		if string(key.Marshal()) != string(authorized.Marshal()) {
			return nil, errors.New("unknown key")
		}
		return nil, nil
	}}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveSSH(c, cfg)
		}
	}()
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))), ln.Addr().(*net.TCPAddr).Port
}

func serveSSH(c net.Conn, cfg *ssh.ServerConfig) {
	conn, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		c.Close()
		return
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "sessions only")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		go serveGitSession(ch, chReqs)
	}
}

// serveGitSession runs the one git command a session asks for:
// "git-receive-pack '/path'" or "git-upload-pack '/path'".
func serveGitSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var env []string
	for req := range reqs {
		switch req.Type {
		case "env":
			var kv struct{ Name, Value string }
			if ssh.Unmarshal(req.Payload, &kv) == nil && kv.Name == "GIT_PROTOCOL" {
				env = append(env, kv.Name+"="+kv.Value)
			}
			req.Reply(true, nil)
		case "exec":
			var cmdline struct{ Command string }
			ssh.Unmarshal(req.Payload, &cmdline)
			verb, path, _ := strings.Cut(cmdline.Command, " ")
			if verb != "git-receive-pack" && verb != "git-upload-pack" {
				req.Reply(false, nil)
				return
			}
			req.Reply(true, nil)
			cmd := exec.Command("git", strings.TrimPrefix(verb, "git-"), strings.Trim(path, "'"))
			cmd.Env = append(os.Environ(), env...)
			cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
			code := 0
			if err := cmd.Run(); err != nil {
				code = 1
			}
			status := make([]byte, 4)
			binary.BigEndian.PutUint32(status, uint32(code))
			ch.SendRequest("exit-status", false, status)
			return
		default:
			req.Reply(false, nil)
		}
	}
}

// TestPushAndPullOverSSHWithTheUsersAgent: OpenSSH's own client, with the
// key only in the user's ssh-agent and the user's GIT_SSH_COMMAND naming
// their ssh configuration, pushes and pulls; without the key in the agent
// it is ErrAuthFailed. The repository's core.sshCommand never runs.
func TestPushAndPullOverSSHWithTheUsersAgent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	pub, _ := os.ReadFile(key + ".pub")
	authorized, _, _, _, err := ssh.ParseAuthorizedKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, port := sshGitServer(t, authorized)
	sock := filepath.Join(dir, "agent.sock")
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	stdout, _ := agent.StdoutPipe()
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	// ssh-agent prints its environment once its socket listens.
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatalf("ssh-agent: %v", err)
	}
	addKey := func(args ...string) {
		t.Helper()
		cmd := exec.Command("ssh-add", args...)
		cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ssh-add %v: %v %s", args, err, out)
		}
	}
	addKey(key)
	known := filepath.Join(dir, "known_hosts")
	os.WriteFile(known, []byte(fmt.Sprintf("[127.0.0.1]:%d %s\n", port, hostKey)), 0o600)
	config := filepath.Join(dir, "ssh_config")
	os.WriteFile(config, []byte(fmt.Sprintf("Host forge\n\tHostName 127.0.0.1\n\tPort %d\n\tUser git\n\tUserKnownHostsFile %s\n\tStrictHostKeyChecking yes\n\tIdentityFile none\n\tBatchMode yes\n", port, known)), 0o600)
	user := Git{Net: func(ctx context.Context, c Call) (*exec.Cmd, error) {
		c.Env = append(c.Env, "SSH_AUTH_SOCK="+sock, "GIT_SSH_COMMAND=ssh -F "+config, "GIT_CONFIG_GLOBAL=/dev/null")
		return DirectNetExec(ctx, c)
	}}

	bare, r := remotePair(t)
	r.git("remote", "set-url", "origin", "ssh://forge"+bare)
	marker := filepath.Join(t.TempDir(), "ran")
	r.git("config", "core.sshCommand", "touch "+marker+"; ssh")
	r.write("b.txt", "b\n")
	r.commitAll("second")
	ctx := context.Background()
	if _, err := user.Push(ctx, r.dir, RemoteOptions{}); err != nil {
		t.Fatal(err)
	}
	if revParse(t, bare, "main") != revParse(t, r.dir, "HEAD") {
		t.Fatal("the push did not reach the remote")
	}
	pushFromElsewhere(t, bare, "c.txt", "c\n")
	if res, err := user.Pull(ctx, r.dir, RemoteOptions{}); err != nil || res.After != revParse(t, bare, "main") {
		t.Fatalf("pull over ssh: %+v %v", res, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the repository's core.sshCommand ran")
	}
	addKey("-D")
	r.write("d.txt", "d\n")
	r.commitAll("third")
	if _, err := user.Push(ctx, r.dir, RemoteOptions{}); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("push with an empty agent: %v", err)
	}
}
