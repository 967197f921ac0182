// Package sandbox spawns and supervises the sandboxed bridge processes that
// run coding agents, one per session, and implements the bridge itself.
//
// The daemon calls [Spawn], which re-executes the tether binary as
// "tether sandbox-bridge" inside bubblewrap (an allow-listed view of the
// file system, a seccomp filter, PID, IPC and UTS namespaces), a cgroup,
// rlimits and a per-agent environment allow-list ([AgentEnv]), and talks to
// it over a Unix socket with the NDJSON protocol below. [Command] runs one
// command in the same view (a session's git). docs/security/view.md says
// what a sandbox sees and may call. Inside the sandbox, "tether sandbox-bridge" calls
// [RunBridge], which runs one agent adapter (see package
// github.com/tetherdev/tether/sandbox/agent) and serves the daemon's commands.
//
// # Running it
//
// The daemon probes once at start (Probe, also for `tether doctor`), then
// spawns one sandbox a session:
//
//	sb, err := sandbox.Spawn(ctx, sandbox.Spec{ID: id, Agent: "demo",
//		WorkDir: dir, StateDir: state, Hide: []string{dataDir},
//		Limits: limits, Capabilities: &caps, Logger: log})
//	sb.Query(prompt, sessionID, true)
//	for ev := range sb.Events() { … } // message, permission_request, done, error …
//	<-sb.Done(); err = sb.Err()      // nil, or ErrCrashed / ErrOOM / ErrHung / ErrProtocol
//
// and ends it with Shutdown (then Done) or Close. cmd/tether wires the
// subcommand the sandbox re-executes:
//
//	case "sandbox-bridge":
//		cfg, err := sandbox.BridgeConfigFromEnv(os.Getenv)
//		cfg.Agents = sandbox.DefaultAgents() // demo, claude-code, codex
//		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
//		ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
//		return sandbox.RunBridge(ctx, cfg)
//
// # Bridge protocol
//
// One JSON object a line, terminated by "\n", in both directions, over the
// Unix socket <socket dir>/<sandbox id>/tether-<sandbox id>.sock. The daemon
// creates the listening socket (the seccomp filter forbids the sandbox to
// create Unix sockets) and the bridge inherits it ([EnvListenFD]); the
// bridge accepts one connection (the daemon's) and sends "ready" as the
// first line. Without [EnvOrphanTimeout] it then removes the socket file
// and ends when the daemon hangs up. With it (Spawn's default) it keeps the
// socket: when the daemon hangs up without "shutdown" the bridge goes on,
// holds its events and accepts the next daemon ([Adopt]), which must send
// "ack" first; it ends once no daemon has come for the timeout. Lines longer than the decoder's
// limit ([DefaultMaxLine], 2 MiB) are rejected with [ErrLineTooLong]; unknown
// fields are ignored; an unknown "cmd" or "ev" is an error.
//
// Commands (daemon → bridge), field "cmd":
//
//	query                {cmd, prompt, sessionId, includePartialMessages?}
//	    Run one agent turn with prompt. sessionId is the daemon's id for the
//	    session and comes back in "done". Only with includePartialMessages
//	    true are the agent's "stream_event" messages (token deltas) passed on.
//	resume               {cmd, sessionId}
//	    Replace the agent with one that resumes the agent conversation
//	    sessionId (an agent session id, as in "done".agentSessionId).
//	    Answered with "done".
//	interrupt            {cmd}
//	    Cancel the running turn; the agent ends it (Claude Code: a result with
//	    subtype "error_during_execution") and "done" follows within a second.
//	    Ignored when no turn runs.
//	shutdown             {cmd}
//	    Cancel any turn, close the agent and exit cleanly.
//	permission_response  {cmd, requestId, decision}            (tether addition)
//	    Answer the permission_request with the same requestId. decision is
//	    {behavior: "allow"|"deny", updatedInput?, message?}.
//	ping                 {cmd, id?}                             (tether addition)
//	    Liveness check; answered at once with "pong" carrying the same id.
//	ack                  {cmd, seq}                             (tether addition)
//	    The daemon has committed the events up to seq: the bridge forgets
//	    them. A daemon connecting after the first sends it before anything
//	    else, and the bridge then sends it the events it holds after seq.
//	configure            {cmd, id, settings}                    (tether addition)
//	    Make settings {model?, permissionMode?, maxThinkingTokens?} the
//	    agent's, whole (a missing field is the agent's default), for the
//	    running turn and the next. Answered with "configured" or an
//	    "error" of code "agent", either carrying the same id; served at any
//	    time, while a turn runs too.
//
// Events (bridge → daemon), field "ev". Every event but ready and pong
// carries "seq" (tether addition), numbered from 1 without a gap; the
// bridge holds each until it is acknowledged, up to [DefaultMaxHeld] bytes,
// past which the agent waits. The daemon passes on only events numbered
// one more than the last (after [Adopt], than the acknowledged seq; after
// lines it could not decode, up to one more for each): anything else, or a
// second ready, ends the bridge ([ExitProtocol]).
//
//	ready                {ev, seq?}
//	    Sent first on each connection; seq is the last number given.
//	message              {ev, data}
//	    One raw agent message (Claude Code stream-json: system, assistant,
//	    user, stream_event, result …), passed through untranslated.
//	error                {ev, error, code?}                     (code: tether addition)
//	    Something went wrong. code is one of "busy" (a query or resume arrived
//	    while a turn runs; the command was refused, nothing else happens),
//	    "bad_command" (a line that did not decode), "unknown_request" (a
//	    permission_response for no pending request), "agent" (the agent
//	    failed; "done" follows when a turn was running).
//	done                 {ev, sessionId, agentSessionId?}       (agentSessionId: tether addition)
//	    The turn started by query (or the resume) is over. sessionId echoes
//	    the command's; agentSessionId is the agent's own conversation id, the
//	    one to pass to resume later.
//	permission_request   {ev, request}                          (tether addition)
//	    The agent asks whether it may run a tool: request is
//	    {requestId, toolName, input, toolUseId?}. The agent waits for the
//	    matching permission_response.
//	permission_cancel    {ev, requestId}                        (tether addition)
//	    The agent withdrew the question (it was interrupted, or decided
//	    otherwise); a later answer for it is refused with "unknown_request".
//	pong                 {ev, id?}                              (tether addition)
//	    Answer to ping.
//	configured           {ev, id, settings}                     (tether addition)
//	    The agent now runs with settings (configure).
//
// Commands are served one at a time: a query or resume while a turn runs is
// refused with an "error" of code "busy", never queued or interleaved;
// interrupt, permission_response, ping, configure and shutdown are served
// at any time.
// Each accepted query ends with exactly one "done", preceded by an "error"
// when the agent failed.
package sandbox
