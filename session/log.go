// Package session runs agent sessions: their lifecycle in sandboxes, the
// translation of agent messages into phone events, permission questions
// and their answers, notifications, and the durable event log every
// session event passes through before any phone sees it.
package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// EventLog is the durable event log. Append assigns each event the next global
// seq, and a single writer commits pending events to the store in batches
// (group commit); only after its batch is committed is an event handed to
// the subscribers, so a phone never sees an event the log could lose.
type EventLog struct {
	store  *store.Store
	logger *slog.Logger
	now    func() time.Time

	mu       sync.Mutex
	cond     *sync.Cond // signalled when the pending batch shrinks
	seq      int64      // last seq assigned
	pending  []store.Event
	notes    []store.Notification
	marks    []pendingMark
	kick     chan struct{}
	subs     map[*Sub]struct{}
	flushed  int64 // last seq committed and published
	flushErr error
	// fullUntil: the disk was full at the last write; Append refuses new
	// events until then, and the first event after it tries again.
	fullUntil time.Time
	// holds counts the Holds not yet released; released is signalled when
	// the count falls to zero.
	holds    int
	released chan struct{}
}

// ErrLogFull is Append's answer while the disk holding the data directory
// is full. It wraps store.ErrFull.
var ErrLogFull = fmt.Errorf("session: event log: %w: new events are refused until space is freed (nothing logged before is lost)", store.ErrFull)

// fullRefusal is how long Append refuses new events after the disk was
// found full, before one batch tries again.
const fullRefusal = 10 * time.Second

// maxPending bounds the events waiting for the writer; Append blocks past it.
const maxPending = 65536

// NewEventLog opens the log on st, continuing after the last logged seq.
func NewEventLog(ctx context.Context, st *store.Store, logger *slog.Logger) (*EventLog, error) {
	last, err := st.LastSeq(ctx)
	if err != nil {
		return nil, err
	}
	l := &EventLog{store: st, logger: logger, now: time.Now, seq: last, flushed: last,
		kick: make(chan struct{}, 1), released: make(chan struct{}, 1), subs: map[*Sub]struct{}{}}
	l.cond = sync.NewCond(&l.mu)
	return l, nil
}

// Entry is an event to append.
type Entry struct {
	SessionID string
	Type      string
	// ID is the envelope id (a request's id for replies).
	ID      string
	Payload any
	// NotificationID makes the event a notification, pending per device
	// until acknowledged.
	NotificationID string
	// Approval, on approval_required, is the question stored as pending
	// in the event's own commit.
	Approval *store.Approval
}

// pendingMark is a session's latest sandbox mark waiting for its commit,
// with whom to tell: the callers of AppendMarked since the last commit.
type pendingMark struct {
	mark      store.SandboxMark
	committed []func()
}

// Append encodes e with the next seq and queues it for the writer. It returns
// the seq at once; the event reaches subscribers after it is committed.
func (l *EventLog) Append(e Entry) (int64, error) {
	p, err := json.Marshal(e.Payload)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.pending) >= maxPending && l.flushErr == nil {
		l.cond.Wait()
	}
	return l.appendLocked(e, p)
}

// AppendMarked queues entries and the sandbox mark they complete together:
// the writer commits them in one transaction, then calls committed (which
// must not block). Nothing else comes between them, so a restart finds
// either all of them or none.
func (l *EventLog) AppendMarked(entries []Entry, mark store.SandboxMark, committed func()) error {
	payloads := make([][]byte, len(entries))
	for i, e := range entries {
		p, err := json.Marshal(e.Payload)
		if err != nil {
			return err
		}
		payloads[i] = p
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.pending) >= maxPending && l.flushErr == nil {
		l.cond.Wait()
	}
	if l.now().Before(l.fullUntil) {
		return ErrLogFull
	}
	for i, e := range entries {
		if _, err := l.appendLocked(e, payloads[i]); err != nil {
			return err
		}
	}
	// A session's later mark covers its earlier one, so one mark (and its
	// state, whose size the agent influences) waits per session, not one
	// per event its bridge sends; each caller is still told.
	i := slices.IndexFunc(l.marks, func(pm pendingMark) bool { return pm.mark.SessionID == mark.SessionID })
	if i < 0 {
		l.marks = append(l.marks, pendingMark{})
		i = len(l.marks) - 1
	}
	l.marks[i].mark = mark
	l.marks[i].committed = append(l.marks[i].committed, committed)
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return nil
}

func (l *EventLog) appendLocked(e Entry, p []byte) (int64, error) {
	now := l.now()
	if now.Before(l.fullUntil) {
		return 0, ErrLogFull
	}
	l.seq++
	frame, err := wire.Encode(wire.Envelope{Type: e.Type, ID: e.ID, Timestamp: wire.Timestamp(now), Seq: l.seq, Payload: p})
	if err != nil {
		l.seq--
		return 0, err
	}
	l.pending = append(l.pending, store.Event{Seq: l.seq, SessionID: e.SessionID, Type: e.Type, Frame: frame, CreatedAt: now, Approval: e.Approval})
	if e.NotificationID != "" {
		l.notes = append(l.notes, store.Notification{ID: e.NotificationID, Seq: l.seq, SessionID: e.SessionID})
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return l.seq, nil
}

// Run is the writer: it commits pending events in batches and publishes
// them, until ctx ends, then commits what is left.
func (l *EventLog) Run(ctx context.Context) {
	for {
		select {
		case <-l.kick:
			l.flush()
		case <-ctx.Done():
			l.flush()
			return
		}
	}
}

// maxHold bounds a Hold: a holder that never releases delays the log's
// next commit by this much, no more.
const maxHold = 2 * time.Millisecond

// Hold keeps the writer from starting a commit until release is called
// (once counts; more calls do nothing) or maxHold has passed, so that the
// events appended meanwhile share one commit: one fsync before a phone sees
// them rather than one after the other. A hook's tool question holds the
// log from its claude_event to its approval_required.
func (l *EventLog) Hold() (release func()) {
	l.mu.Lock()
	l.holds++
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.holds--
			free := l.holds == 0
			l.mu.Unlock()
			if free {
				select {
				case l.released <- struct{}{}:
				default:
				}
			}
		})
	}
}

// awaitRelease returns once nothing holds the log, or maxHold after it was
// called.
func (l *EventLog) awaitRelease() {
	var expired <-chan time.Time
	for {
		l.mu.Lock()
		held := l.holds > 0
		l.mu.Unlock()
		if !held {
			return
		}
		if expired == nil {
			t := time.NewTimer(maxHold)
			defer t.Stop()
			expired = t.C
		}
		select {
		case <-l.released:
		case <-expired:
			return
		}
	}
}

func (l *EventLog) flush() {
	for {
		l.awaitRelease()
		l.mu.Lock()
		batch, notes, pm := l.pending, l.notes, l.marks
		l.pending, l.notes, l.marks = nil, nil, nil
		l.mu.Unlock()
		if len(batch) == 0 && len(pm) == 0 {
			return
		}
		marks := make([]store.SandboxMark, len(pm)) // one per session (AppendMarked)
		for i, m := range pm {
			marks[i] = m.mark
		}
		err := l.store.AppendEvents(context.Background(), batch, notes, marks...)
		for attempt := 1; err != nil && !errors.Is(err, store.ErrFull) && attempt < 5; attempt++ {
			l.logger.Error("writing the event log; retrying", "err", err, "events", len(batch))
			time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
			err = l.store.AppendEvents(context.Background(), batch, notes, marks...)
		}
		if err == nil {
			for _, m := range pm {
				for _, tell := range m.committed {
					tell()
				}
			}
		}
		if len(batch) == 0 {
			if err != nil {
				l.logger.Error("writing sandbox marks failed", "err", err, "marks", len(marks))
			}
			continue
		}
		full := errors.Is(err, store.ErrFull)
		switch {
		case full:
			l.logger.Error("the disk holding the data directory is full: events dropped, new events refused until space is freed; what was logged before is intact",
				"err", err, "first_seq", batch[0].Seq, "events", len(batch), "retry_in", fullRefusal)
		case err != nil:
			// Events that cannot be made durable are not sent: a phone
			// must never see what a restart would not replay.
			l.logger.Error("event log write failed; events dropped", "err", err, "first_seq", batch[0].Seq, "events", len(batch))
		}
		l.mu.Lock()
		if full {
			l.fullUntil = l.now().Add(fullRefusal)
		} else if err == nil {
			l.fullUntil = time.Time{}
		}
		subs := make([]*Sub, 0, len(l.subs))
		for s := range l.subs {
			subs = append(subs, s)
		}
		if err == nil {
			l.flushed = batch[len(batch)-1].Seq
		}
		l.cond.Broadcast()
		l.mu.Unlock()
		if err != nil {
			continue
		}
		for _, s := range subs {
			s.deliver(batch)
		}
	}
}

// Full returns ErrLogFull while Append refuses events for a full disk,
// else nil.
func (l *EventLog) Full() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.now().Before(l.fullUntil) {
		return ErrLogFull
	}
	return nil
}

// Flushed is the last seq that has been committed and published.
func (l *EventLog) Flushed() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushed
}

// Sub is one subscriber, usually a phone connection.
type Sub struct {
	log *EventLog
	fn  func(store.Event) bool

	mu        sync.Mutex
	buffering bool
	buf       []store.Event
	last      int64
	dead      bool
}

// maxBuffered bounds the live events a subscriber holds while it replays.
const maxBuffered = 100_000

// ErrSubscriberBehind is returned by Replay when so many live events
// arrived during the replay that the subscriber could not hold them.
var ErrSubscriberBehind = errors.New("session: subscriber fell behind during replay")

// Subscribe registers fn for committed events. fn is called in seq order
// from the writer and must not block; returning false unsubscribes. The
// subscriber starts by buffering live events; call Replay (or Live) to
// start delivery.
func (l *EventLog) Subscribe(fn func(store.Event) bool) *Sub {
	s := &Sub{log: l, fn: fn, buffering: true}
	l.mu.Lock()
	l.subs[s] = struct{}{}
	l.mu.Unlock()
	return s
}

// Close unsubscribes.
func (s *Sub) Close() {
	s.log.mu.Lock()
	delete(s.log.subs, s)
	s.log.mu.Unlock()
	s.mu.Lock()
	s.dead, s.buf = true, nil
	s.mu.Unlock()
}

func (s *Sub) deliver(batch []store.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return
	}
	if s.buffering {
		if len(s.buf)+len(batch) > maxBuffered {
			s.dead, s.buf = true, nil
			return
		}
		s.buf = append(s.buf, batch...)
		return
	}
	for _, e := range batch {
		if e.Seq <= s.last {
			continue
		}
		s.last = e.Seq
		if !s.fn(e) {
			s.dead = true
			return
		}
	}
}

// replayPage is how many events Replay reads at a time.
const replayPage = 512

// Replay sends, through send (which may block for flow control), every
// logged event after seq `after` that filter accepts, then the live events
// buffered meanwhile, and switches the subscriber to live delivery: no gap
// and no duplicate. It returns the last seq sent.
func (s *Sub) Replay(ctx context.Context, after int64, filter func(store.Event) bool, send func(store.Event) error) (int64, error) {
	for {
		events, err := s.log.store.EventsAfter(ctx, after, replayPage)
		if err != nil {
			return after, err
		}
		for _, e := range events {
			if filter == nil || filter(e) {
				if err := send(e); err != nil {
					return after, err
				}
			}
			after = e.Seq
		}
		if len(events) < replayPage {
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return after, ErrSubscriberBehind
	}
	s.last = after
	for _, e := range s.buf {
		if e.Seq <= s.last {
			continue
		}
		s.last = e.Seq
		if !s.fn(e) {
			s.dead = true
			break
		}
	}
	s.buf, s.buffering = nil, false
	return s.last, nil
}
