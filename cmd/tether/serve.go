package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tetherdev/tether/bridge"
	"github.com/tetherdev/tether/certs"
	"github.com/tetherdev/tether/history"
	"github.com/tetherdev/tether/hooks"
	"github.com/tetherdev/tether/notify"
	"github.com/tetherdev/tether/pairing"
	"github.com/tetherdev/tether/runs"
	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/web"
	"github.com/tetherdev/tether/wire"
	"golang.org/x/sync/errgroup"
)

// shutdownGrace is how long connections get to close on shutdown.
const shutdownGrace = 5 * time.Second

// addDaemonFlags adds the flags of the running daemon beyond where and how
// it listens: browsers, hooks, sessions, sandboxes and the event log.
// `tether doctor` takes them too, so that it accepts serve's command line.
func addDaemonFlags(fs *flag.FlagSet, cfg *config) {
	fs.Var((*stringList)(&cfg.Origins), "allow-origin", "extra browser origin allowed to connect (repeatable), e.g. https://tether.example")
	fs.Var((*stringList)(&cfg.HooksFrom), "hooks-from", "address or CIDR, besides loopback, from which Claude Code hooks are accepted (repeatable or comma list)")
	fs.Var((*stringList)(&cfg.Roots), "root", "directory sessions may work in, with everything below it (repeatable; default your home directory)")
	fs.Int64Var(&cfg.MemoryMB, "sandbox-memory-mb", 2048, "memory limit of each session's sandbox, MiB")
	fs.Int64Var(&cfg.Pids, "sandbox-pids", 512, "process limit of each session's sandbox")
	fs.Float64Var(&cfg.CPUs, "sandbox-cpus", 1, "CPU limit of each session's sandbox, in cores")
	fs.DurationVar(&cfg.ApprovalTimeout, "approval-timeout", session.DefaultApprovalTTL, "how long a sandboxed agent's permission question waits for a phone before it is denied")
	fs.IntVar(&cfg.MaxSessions, "max-sessions", 8, "the most sessions whose sandboxes run at once (each holds up to --sandbox-memory-mb); 0 for no cap")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 30*time.Minute, "stop a session's sandbox after this long without a turn or a pending question; its next message starts it again (0: never)")
	fs.Var((*stringList)(&cfg.AllowHosts), "sandbox-allow-host", "a host:port the claude-code and codex agents' sandboxes may reach besides their API (repeatable or comma list); nothing else is reachable from a sandbox")
	fs.BoolVar(&cfg.AllowBypassPermissions, "allow-bypass-permissions", false, "let phones run a session's agent in the bypassPermissions mode, where it runs every tool without asking")
	fs.StringVar(&cfg.ClaudeBin, "claude-bin", "", "the claude CLI for the claude-code agent (default: claude on PATH)")
	fs.StringVar(&cfg.CodexBin, "codex-bin", "", "the codex CLI for the codex agent (default: codex on PATH)")
	fs.Int64Var(&cfg.LogMaxEvents, "log-max-events", 1_000_000, "event log retention: the newest events kept")
	fs.Var((*stringList)(&cfg.Notify), "notify", "ntfy topic URL to publish notifications to, e.g. https://ntfy.sh/TOPIC or a self-hosted server's (repeatable)")
	fs.StringVar(&cfg.NotifyTokenFile, "notify-token-file", "", "file holding the ntfy access token, sent as a bearer token")
	fs.BoolVar(&cfg.WebPush, "web-push", true, "send notifications to the browsers that asked for them (the web client's Notify me), through their vendors' push services")
	fs.StringVar(&cfg.PushContact, "push-contact", notify.DefaultContact, "where the browser vendors' push services can reach you about this daemon's Web Push (the VAPID subject): a mailto: address or an https URL at a public name")
	fs.StringVar(&cfg.PushDetail, "push-detail", string(notify.DetailSummary), "what notifications sent off the machine say: summary (the tool's name, no command, path or content) or full")
	fs.Int64Var(&cfg.LogMaxBytes, "log-max-bytes", 1<<30, "event log retention: the newest events whose frames total at most this many bytes are kept")
	fs.DurationVar(&cfg.LogMaxAge, "log-max-age", 30*24*time.Hour, "event log retention: the oldest event kept; ended sessions, answered approvals and message ids older go too")
	fs.BoolVar(&cfg.KeepRunningTurns, "keep-running-turns", false, "on a stop, leave the sandboxes of running turns (and of questions waiting for a phone) running for the next daemon on this data directory, which adopts them: a restart or an upgrade does not interrupt them (the service sets it); they end themselves after 10 minutes without a daemon")
	fs.BoolVar(&cfg.PrintPairing, "print-pairing", true, "print a first pairing code and the pairing page's key on start (the service turns this off: they would stay in its log, where tether pair is not needed to read them)")
}

func serveCmd(ctx context.Context, args, envList []string, stdout, stderr io.Writer) int {
	env := envMap(envList)
	var cfg config
	fs := newFlagSet("serve", stderr, &cfg, env)
	addServerFlags(fs, &cfg)
	addDaemonFlags(fs, &cfg)
	if err := parseFlags(fs, args, env); err != nil {
		return 2
	}
	if len(cfg.Roots) == 0 {
		cfg.Roots = []string{homeDir(env)}
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(stderr, "tether serve:", err)
		return 2
	}
	if cfg.PushDetail != string(notify.DetailSummary) && cfg.PushDetail != string(notify.DetailFull) {
		fmt.Fprintf(stderr, "tether serve: --push-detail must be summary or full, not %q\n", cfg.PushDetail)
		return 2
	}
	contact, err := notify.ParseContact(cfg.PushContact)
	if err != nil {
		fmt.Fprintln(stderr, "tether serve: --push-contact:", err)
		return 2
	}
	cfg.PushContact = contact
	if cfg.LogMaxEvents <= 0 || cfg.LogMaxBytes <= 0 || cfg.LogMaxAge <= 0 {
		fmt.Fprintln(stderr, "tether serve: --log-max-events, --log-max-bytes and --log-max-age must be positive")
		return 2
	}
	if err := serve(ctx, &cfg, envList, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "tether serve:", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg *config, env []string, stdout, stderr io.Writer) error {
	logger := cfg.logger(stderr)
	// The lock first: a second daemon is refused before it touches the
	// database (its migrations, its stale sessions).
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	// The check comes before the migrations, which write.
	st, err := openDataDir(ctx, cfg.DataDir, store.OpenChecked)
	if err != nil {
		return damagedDatabase(err, cfg.DataDir)
	}
	defer func() {
		if err := st.Close(); err != nil {
			logger.Error("closing the database", "err", err)
		}
	}()
	tlsSrv, err := serverTLS(ctx, cfg, logger, time.Now())
	if err != nil {
		return err
	}
	ln, err := listenAll(cfg.net.binds)
	if err != nil {
		return err
	}
	bridgeURL := advertisedURL(cfg, ln.Addr().String())
	pairKey := rand.Text()
	pairPage := pairPageURL(cfg, ln.Addr().String(), pairKey)
	others := otherURLs(cfg, ln.Addr().String(), bridgeURL)
	pairer := &pairing.Pairer{Store: st, TTL: cfg.TTL}

	evlog, err := session.NewEventLog(ctx, st, logger)
	if err != nil {
		return err
	}
	logCtx, stopLog := context.WithCancel(context.Background())
	logDone := make(chan struct{})
	go func() { evlog.Run(logCtx); close(logDone) }()
	defer func() { stopLog(); <-logDone }()
	// The bridge is built after the sessions it serves; phones are counted
	// through it once it exists.
	var b *bridge.Server
	caps := sandbox.Probe()
	git := sessionGit(cfg, &caps, homeDir(envMap(env)))
	runner := runs.New(runs.Config{Store: st, Events: evlog, Logger: logger})
	sessions, err := newSessions(ctx, cfg, env, st, evlog, runner, func() int { return b.HookAnswerers() }, caps, logger)
	if err != nil {
		return err
	}
	runner.Attach(sessions)
	defer serveTerminals(cfg.DataDir, sessions, logger)()
	notifier, vapidPublic, err := newNotifier(cfg, st, evlog, webOrigin(bridgeURL), logger)
	if err != nil {
		return err
	}
	hookToken, err := hooks.LoadOrCreateToken(cfg.DataDir)
	if err != nil {
		return err
	}
	hooksSrv := &hooks.Server{Broker: sessions, Token: hookToken, Logger: logger}
	if len(cfg.net.hooksFrom) > 0 {
		// Loopback stays allowed next to what the user added.
		hooksSrv.AllowFrom = append([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, cfg.net.hooksFrom...)
	}

	hist := history.New(history.Config{ClaudeDirs: claudeDirs(envMap(env)), CodexDirs: codexHomes(envMap(env)), Store: st, Logger: logger})
	b = &bridge.Server{
		Logger:          logger,
		Store:           st,
		Sessions:        sessions,
		History:         hist,
		Runs:            runner,
		Events:          evlog,
		SupportedAgents: sessions.Agents(),
		Pairer:          pairer,
		Git:             git,
		PairKey:         pairKey,
		Version:         version,
		BridgeURL:       bridgeURL,
		Fingerprint:     tlsSrv.fp,
		Origins:         ownOrigins(cfg, bridgeURL, ln.Addr().String()),
		Classifier:      cfg.classifier(),
		VAPIDPublicKey:  vapidPublic,
	}
	b.Classifier.Logger = logger
	srv := &http.Server{
		Handler:           routes(b, hooksSrv, tlsSrv.ca),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(slogWriter{logger}, "", 0),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	ln = bridge.Listener(ln)
	if tlsSrv.config != nil {
		b.CurrentCertificate = tlsSrv.leaf
		srv.TLSConfig = tlsSrv.config
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	if err := writeRuntimeInfo(cfg.DataDir, runtimeInfo{
		URL: bridgeURL, Fingerprint: b.Fingerprint, Listen: ln.Addr().String(), PairPage: pairPage,
		OtherURLs: others,
		PID:       os.Getpid(), Version: version, StartedAt: time.Now().UTC(),
	}); err != nil {
		return fmt.Errorf("recording runtime info: %w", err)
	}

	serveCtl, stopControl, err := serveControl(cfg.DataDir, b, logger)
	if err != nil {
		return err
	}
	defer stopControl()
	// The daemon's goroutines: the first to fail stops the others and the
	// daemon, cleanly; a signal (ctx) stops them all. The event log's
	// writer is not among them: it outlives them (above) to commit what
	// the sessions write while they stop.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving: %w", err)
		}
		return nil
	})
	g.Go(func() error { indexHistory(gctx, hist, logger); return nil })
	g.Go(func() error { return serveCtl(gctx) })
	// The runs stop before the sessions do: a participant shut down with
	// the daemon has not failed its run.
	runsCtx, stopRuns := context.WithCancel(gctx)
	defer stopRuns()
	runsDone := make(chan struct{})
	g.Go(func() error {
		defer close(runsDone)
		if err := runner.Run(runsCtx); err != nil {
			return fmt.Errorf("agent-to-agent runs: %w", err)
		}
		return nil
	})
	g.Go(func() error { pruneLog(gctx, st, cfg, logger); return nil })
	g.Go(func() error {
		if err := notifier.Run(gctx); err != nil {
			return fmt.Errorf("notifications: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		stopRuns()
		<-runsDone
		return shutdown(b, sessions, srv, logger)
	})
	logger.Info("tether serving", "version", version, "url", bridgeURL, "listen", cfg.net.binds, "addr", ln.Addr().String(), "tls", cfg.TLS, "tls_why", cfg.net.tlsWhy, "data", cfg.DataDir)

	if tlsSrv.ca != nil {
		b.CAGuide = webOrigin(bridgeURL) + "ca"
		fmt.Fprintf(stdout, "Local certificate authority (--tls local-ca): on each phone, open %sca once and install it (fingerprint %s).\n",
			webOrigin(bridgeURL), certs.Fingerprint(tlsSrv.ca))
	}
	shownPage := pairPage
	if !cfg.PrintPairing {
		shownPage = ""
	}
	if err := banner(ctx, stdout, st, pairer, bridgeURL, b.Fingerprint, shownPage, others); err != nil {
		logger.Error("showing pairing code", "err", err)
	}

	return g.Wait()
}

// shutdown closes the phones' connections, stops the sessions and then the
// HTTP server, within shutdownGrace.
func shutdown(b *bridge.Server, sessions *session.Manager, srv *http.Server, logger *slog.Logger) error {
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := b.Shutdown(sctx); err != nil {
		logger.Warn("closing connections", "err", err)
	}
	sessions.Shutdown(sctx)
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// routes serves the phone protocol's routes, the web client, the Claude
// Code hook endpoint and, with a local CA, its certificate on one listener.
func routes(b *bridge.Server, h *hooks.Server, ca *x509.Certificate) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(hooks.Path, h)
	if ca != nil {
		caPages(mux, ca)
	}
	// The web client at "/", the bridge's own routes next to it.
	mux.Handle("/", web.Handler())
	for _, route := range []string{"/ws", wire.EventsPath, wire.SendPath, "/healthz", "/pair"} {
		mux.Handle(route, b.Handler())
	}
	return mux
}

// banner tells the user where the daemon is, and shows a pairing QR code
// while no device is paired. With pairPage empty it shows neither a code
// nor the page's key, and names `tether pair`.
func banner(ctx context.Context, w io.Writer, st *store.Store, p *pairing.Pairer, url, fp, pairPage string, others []string) error {
	n, err := st.CountActiveDevices(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "tether %s is serving %s\n", version, url)
	if fp != "" {
		fmt.Fprintf(w, "certificate fingerprint %s\n", fp)
	}
	printReach(w, url, others)
	if pairPage == "" {
		fmt.Fprintf(w, "%d device(s) paired. Run `tether pair` to pair one, `tether devices list` to see them.\n", n)
		return nil
	}
	if n > 0 {
		fmt.Fprintf(w, "%d device(s) paired. Run `tether pair` or open %s on this machine to pair another, `tether devices list` to see them.\n", n, pairPage)
		return nil
	}
	code, err := p.NewCode(ctx, store.CodeOnce)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "No device is paired yet.")
	if err := printWebPairing(w, pairing.NewPayload(url, code, fp)); err != nil {
		return err
	}
	fmt.Fprintf(w, "Run `tether pair` for a new code at any time (also to pair more devices), or open %s on this machine.\n", pairPage)
	return nil
}

// pairPageURL is the address of the pairing page on this machine, with
// the key that only this terminal (and the data directory) learns.
func pairPageURL(cfg *config, listenAddr, key string) string {
	scheme := "https"
	if cfg.TLS == tlsOff {
		scheme = "http"
	}
	_, port, _ := net.SplitHostPort(listenAddr)
	return (&url.URL{Scheme: scheme, Host: net.JoinHostPort("localhost", port), Path: "/pair", RawQuery: url.Values{"key": {key}}.Encode()}).String()
}

// ownOrigins are the browser origins of the daemon itself: its URL's host
// and this machine's loopback names, at its port, plus any the user added.
func ownOrigins(cfg *config, bridgeURL, listenAddr string) []string {
	scheme := "https"
	if cfg.TLS == tlsOff {
		scheme = "http"
	}
	_, port, _ := net.SplitHostPort(listenAddr)
	hosts := []string{"localhost", "127.0.0.1", "[::1]"}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	out := []string{}
	if u, err := url.Parse(bridgeURL); err == nil {
		out = append(out, scheme+"://"+u.Host)
	}
	for _, h := range hosts {
		out = append(out, scheme+"://"+h+":"+port)
	}
	return append(out, cfg.Origins...)
}

// slogWriter routes the HTTP server's own log lines (TLS handshake errors
// from scanners and the like) to the structured log at debug level.
type slogWriter struct{ l *slog.Logger }

func (s slogWriter) Write(p []byte) (int, error) {
	s.l.Debug("http", "msg", string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	for len(p) > 0 && (p[len(p)-1] == '\n' || p[len(p)-1] == '\r') {
		p = p[:len(p)-1]
	}
	return p
}

// newNotifier builds the push channels: Web Push (unless --web-push=false)
// and the ntfy topics of --notify. It returns the VAPID public key the
// web client subscribes with, empty without Web Push.
func newNotifier(cfg *config, st *store.Store, evlog *session.EventLog, webURL string, logger *slog.Logger) (*notify.Dispatcher, string, error) {
	var token string
	if cfg.NotifyTokenFile != "" {
		b, err := os.ReadFile(cfg.NotifyTokenFile)
		if err != nil {
			return nil, "", fmt.Errorf("--notify-token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	d := &notify.Dispatcher{Events: evlog, Detail: notify.Detail(cfg.PushDetail), WebURL: webURL, Logger: logger}
	var public string
	if cfg.WebPush {
		keys, err := notify.LoadVAPIDKeys(filepath.Join(cfg.DataDir, "vapid.json"))
		if err != nil {
			return nil, "", fmt.Errorf("web push: %w", err)
		}
		public = keys.Public
		d.Channels = append(d.Channels, &notify.WebPush{Subscriptions: st, Keys: keys, Subscriber: cfg.PushContact, Client: notify.NewPushClient()})
	}
	for _, raw := range cfg.Notify {
		n, err := notify.ParseNtfy(raw)
		if err != nil {
			return nil, "", fmt.Errorf("--notify: %w", err)
		}
		n.Token = token
		d.Channels = append(d.Channels, n)
	}
	return d, public, nil
}
