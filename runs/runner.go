package runs

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tetherdev/tether/session"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// TemplateReview is the one template: an implementer does the task and
// sends its result with DONE; a reviewer answers PASS or FAIL; on FAIL the
// implementer fixes and sends again, until PASS or the rounds run out.
const TemplateReview = "review"

// DefaultMaxRounds is how many FAIL reviews end a run that does not say
// otherwise.
const DefaultMaxRounds = 3

// MaxRounds caps a run's rounds.
const MaxRounds = 20

// DefaultMaxMessages is how many messages a run holds unless Config says
// otherwise: agents that talk on and on end their run there.
const DefaultMaxMessages = 10000

// Sessions is what the runs need of the session manager.
type Sessions interface {
	CheckWorkDir(dir string) (string, error)
	Start(ctx context.Context, r session.StartRequest) (string, error)
	Send(ctx context.Context, sessionID, messageID, content string, atts []wire.Attachment, from session.Sender) error
	Interrupt(sessionID string) error
	Release(sessionID string)
}

// Config configures a Runner.
type Config struct {
	Store  *store.Store
	Events *session.EventLog
	Logger *slog.Logger
	// MaxMessages is how many messages a run holds; past it the run ends
	// (exhausted) and takes no more. 0 is DefaultMaxMessages.
	MaxMessages int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Runner runs the agent-to-agent runs. Its methods are safe for concurrent
// use.
type Runner struct {
	cfg Config
	// boot makes the ids of this daemon's deliveries its own: a delivery a
	// previous daemon made whose turn did not end is made again.
	boot string

	mu       sync.Mutex
	sessions Sessions
	live     map[int64]*liveRun
	members  map[string]*member // by session id
	wg       sync.WaitGroup
}

// liveRun is a running run's state in memory; its loop alone delivers.
type liveRun struct {
	rec     store.Run
	members []*member
	status  Status
	kick    chan struct{}
	stop    context.CancelFunc
}

// member is a participant of a running run.
type member struct {
	run *liveRun
	p   store.RunParticipant
	// busy is the session's last status; inflight the last seq given to
	// it as a turn that has not ended (0 for none), and started that the
	// session was busy since.
	busy     bool
	inflight int64
	started  bool
	// failed says why the participant's session stopped ("" while it
	// runs): its run fails.
	failed string
}

// New returns a Runner; Attach gives it the sessions and Run starts it.
func New(cfg Config) *Runner {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxMessages <= 0 {
		cfg.MaxMessages = DefaultMaxMessages
	}
	return &Runner{cfg: cfg, boot: strings.ToLower(rand.Text()[:8]), live: map[int64]*liveRun{}, members: map[string]*member{}}
}

// Attach gives the runner the sessions its participants are (the session
// manager, which in turn asks the runner for its tools).
func (r *Runner) Attach(s Sessions) {
	r.mu.Lock()
	r.sessions = s
	r.mu.Unlock()
}

// Run takes up the runs a previous daemon left running and follows the
// participants' sessions until ctx ends.
func (r *Runner) Run(ctx context.Context) error {
	sub := r.cfg.Events.Subscribe(r.observe)
	defer sub.Close()
	if _, err := sub.Replay(ctx, r.cfg.Events.Flushed(), func(store.Event) bool { return false }, nil); err != nil {
		return err
	}
	running, err := r.cfg.Store.Runs(ctx, true, 1000)
	if err != nil {
		return err
	}
	for _, rec := range running {
		if err := r.take(ctx, rec); err != nil {
			return err
		}
		r.cfg.Logger.Info("run left running by a previous daemon goes on", "run", rec.ID)
	}
	<-ctx.Done()
	r.mu.Lock()
	for _, lr := range r.live {
		lr.stop()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// take starts the loop of a running run.
func (r *Runner) take(ctx context.Context, rec store.Run) error {
	_, ps, err := r.cfg.Store.Run(ctx, rec.ID)
	if err != nil {
		return err
	}
	st, err := StatusOf(ctx, r.cfg.Store, rec.ID)
	if err != nil {
		return err
	}
	lr := &liveRun{rec: rec, status: st, kick: make(chan struct{}, 1)}
	rctx, cancel := context.WithCancel(ctx)
	lr.stop = cancel
	r.mu.Lock()
	for _, p := range ps {
		m := &member{run: lr, p: p}
		if se, err := r.cfg.Store.Session(ctx, p.SessionID); err == nil {
			m.busy = se.Status == store.StatusBusy
		}
		lr.members = append(lr.members, m)
		r.members[p.SessionID] = m
	}
	r.live[rec.ID] = lr
	r.wg.Add(1)
	r.mu.Unlock()
	go r.loop(rctx, lr)
	lr.poke()
	return nil
}

func (lr *liveRun) poke() {
	select {
	case lr.kick <- struct{}{}:
	default:
	}
}

func (lr *liveRun) names() []string {
	var out []string
	for _, m := range lr.members {
		out = append(out, m.p.Name)
	}
	return out
}

// observe follows the participants' sessions in the log: a turn given
// ends when its session, busy since, is idle again; a session that fails
// or ends fails its run. It runs on the log's writer and must not block.
func (r *Runner) observe(e store.Event) bool {
	if e.Type != wire.TypeSessionStatus && e.Type != wire.TypeSessionEnd {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.members[e.SessionID]
	if m == nil {
		return true
	}
	var env struct {
		Payload wire.SessionStatus `json:"payload"`
	}
	if err := json.Unmarshal(e.Frame, &env); err != nil {
		return true
	}
	status := store.SessionStatus(env.Payload.Status)
	switch {
	case e.Type == wire.TypeSessionEnd:
		m.failed = "its session ended"
	case status == store.StatusBusy:
		m.busy = true
		if m.inflight > 0 {
			m.started = true
		}
	case status == store.StatusIdle:
		m.busy = false
	case status == store.StatusError:
		m.failed = "its session failed: " + env.Payload.Error
	case status == store.StatusClosed:
		m.failed = "its session ended"
	}
	m.run.poke()
	return true
}

// loop is a running run's: on each kick it ends the run when it should,
// records the turns that ended, and gives idle participants what came for
// them.
func (r *Runner) loop(ctx context.Context, lr *liveRun) {
	defer r.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lr.kick:
		}
		if ended := r.step(ctx, lr); ended {
			return
		}
	}
}

// step is one pass of the loop; it reports whether the run ended.
func (r *Runner) step(ctx context.Context, lr *liveRun) bool {
	r.mu.Lock()
	st := lr.status
	var failed *member
	var why string // failed's reason, read under the lock observe writes it under
	type due struct {
		m        *member
		commit   int64
		deliver  bool
		sessions Sessions
	}
	var work []due
	for _, m := range lr.members {
		if m.failed != "" && failed == nil {
			failed, why = m, m.failed
		}
		d := due{m: m, sessions: r.sessions}
		if m.inflight > 0 && m.started && !m.busy {
			d.commit, m.inflight, m.started = m.inflight, 0, false
		}
		d.deliver = m.inflight == 0 && !m.busy
		work = append(work, d)
	}
	r.mu.Unlock()
	switch {
	case failed != nil:
		return r.end(ctx, lr, store.RunFailed, fmt.Sprintf("participant %q stopped: %s", failed.p.Name, why))
	case st.HasDoneSignal && st.PassCount > 0:
		return r.end(ctx, lr, store.RunPassed, "the work is done and the review passed")
	case st.FailCount >= lr.rec.MaxRounds:
		return r.end(ctx, lr, store.RunExhausted, fmt.Sprintf("%d reviews failed, the most this run allows", st.FailCount))
	case st.TotalMessages >= r.cfg.MaxMessages:
		return r.end(ctx, lr, store.RunExhausted, fmt.Sprintf("%d messages, the most a run holds", st.TotalMessages))
	}
	for _, d := range work {
		if d.commit > 0 {
			if err := r.cfg.Store.SetRunDelivered(ctx, lr.rec.ID, d.m.p.Name, d.commit); err != nil {
				r.cfg.Logger.Error("recording a run's delivery", "run", lr.rec.ID, "err", err)
				continue
			}
		}
		if d.deliver && d.sessions != nil {
			r.deliver(ctx, lr, d.m, d.sessions, st)
		}
	}
	return false
}

// deliver gives an idle participant the messages for it that it has not
// seen, as one turn.
func (r *Runner) deliver(ctx context.Context, lr *liveRun, m *member, sessions Sessions, st Status) {
	p, err := r.cfg.Store.RunParticipantBySession(ctx, m.p.SessionID)
	if err != nil {
		r.cfg.Logger.Error("reading a run participant", "run", lr.rec.ID, "err", err)
		return
	}
	msgs, err := r.cfg.Store.RunMessages(ctx, lr.rec.ID, p.Delivered, 200)
	if err != nil || len(msgs) == 0 {
		return
	}
	var mine []Message
	for _, sm := range msgs {
		if msg := fromStore(sm); msg.ForAgent(p.Name) {
			mine = append(mine, msg)
		}
	}
	last := msgs[len(msgs)-1].Seq
	if len(mine) == 0 {
		if err := r.cfg.Store.SetRunDelivered(ctx, lr.rec.ID, p.Name, last); err != nil {
			r.cfg.Logger.Error("recording a run's delivery", "run", lr.rec.ID, "err", err)
		}
		return
	}
	prompt := turnPrompt(lr.rec, lr.names(), p, mine, st, p.Delivered == 0)
	id := fmt.Sprintf("run%d-%s-%d-%s", lr.rec.ID, p.Name, last, r.boot)
	r.mu.Lock()
	m.inflight, m.started = last, m.busy
	r.mu.Unlock()
	if err := sessions.Send(ctx, p.SessionID, id, prompt, nil, session.Sender{DeviceName: "tether run"}); err != nil {
		r.cfg.Logger.Warn("giving a run participant its messages", "run", lr.rec.ID, "participant", p.Name, "err", err)
		r.mu.Lock()
		m.inflight, m.started = 0, false
		if m.failed == "" {
			m.failed = err.Error()
		}
		r.mu.Unlock()
		lr.poke()
	}
}

// end ends a run and says so; it reports true.
func (r *Runner) end(ctx context.Context, lr *liveRun, status, reason string) bool {
	if _, err := r.cfg.Store.EndRun(ctx, lr.rec.ID, status, reason, r.cfg.Now()); err != nil {
		r.cfg.Logger.Error("ending a run", "run", lr.rec.ID, "err", err)
	}
	r.mu.Lock()
	delete(r.live, lr.rec.ID)
	for _, m := range lr.members {
		delete(r.members, m.p.SessionID)
	}
	sessions := r.sessions
	r.mu.Unlock()
	lr.stop()
	// The participants' sandboxes go once their turns end; the sessions
	// stay, to read and to chat with.
	if sessions != nil {
		for _, m := range lr.members {
			sessions.Release(m.p.SessionID)
		}
	}
	r.cfg.Logger.Info("run ended", "run", lr.rec.ID, "status", status, "reason", reason)
	r.update(context.WithoutCancel(ctx), lr.rec.ID)
	return true
}

// update logs a run's state for the phones.
func (r *Runner) update(ctx context.Context, id int64) {
	info, err := r.Info(ctx, id)
	if err != nil {
		r.cfg.Logger.Error("reading a run", "run", id, "err", err)
		return
	}
	if _, err := r.cfg.Events.Append(session.Entry{Type: wire.TypeRunUpdate, Payload: RunUpdate{Run: info}}); err != nil {
		r.cfg.Logger.Error("logging a run's state", "run", id, "err", err)
	}
}

// turnPrompt is the turn that gives a participant its messages: the run's
// rules the first time, then each message with who sent it.
func turnPrompt(run store.Run, names []string, p store.RunParticipant, msgs []Message, st Status, first bool) string {
	var b strings.Builder
	if first {
		b.WriteString(briefing(run, names, p))
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "[tether run %d, round %d] ", run.ID, st.FailCount+1)
	if len(msgs) == 1 {
		b.WriteString("A message for you")
	} else {
		fmt.Fprintf(&b, "%d messages for you", len(msgs))
	}
	fmt.Fprintf(&b, " (%s):\n", p.Name)
	for _, m := range msgs {
		to := ""
		if m.To == "" {
			to = ", to everyone"
		}
		sig := ""
		if m.Signal != "" {
			sig = ", " + m.Signal
		}
		fmt.Fprintf(&b, "\nFrom %s (%s%s%s):\n%s\n", m.From, m.Type, sig, to, m.Content)
	}
	return b.String()
}

// briefing tells a participant what the run is and how to take part.
func briefing(run store.Run, names []string, p store.RunParticipant) string {
	others := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == p.Name })
	var b strings.Builder
	fmt.Fprintf(&b, "You are %q in tether run %d, with %s. You talk to them only with the send_to_agent tool; "+
		"their messages come to you as your next turn (receive_messages shows any that arrived meanwhile, bridge_status the run's counts). "+
		"Begin each message you send with its round (\"Round 2: …\"): the same message sent twice is stored once.\n",
		p.Name, run.ID, strings.Join(quoted(others), " and "))
	switch p.Role {
	case "implementer":
		fmt.Fprintf(&b, "Your role: implementer. Do the task in the working directory. When it is done, send your result with "+
			"send_to_agent(to=%q, type=\"result\", content=<what you did>, signal=\"DONE\"). When a review says FAIL, fix what it asks and send a new result the same way.",
			reviewerOf(names, p.Name))
	case "reviewer":
		fmt.Fprintf(&b, "Your role: reviewer. When a result arrives, review the work in the working directory. Answer with "+
			"send_to_agent(to=<its sender>, type=\"review\", content=<your review>, signal=\"PASS\" or \"FAIL\"). The run ends on PASS, or after %d FAIL reviews.",
			run.MaxRounds)
	}
	return b.String()
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

func reviewerOf(names []string, self string) string {
	for _, n := range names {
		if n != self {
			return n
		}
	}
	return ""
}

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
