package session

import (
	"context"

	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// emitAgent appends an event translated from the agent. A turn's end is
// preceded by the session's idle status, so that whoever sees
// turn_complete finds the session idle, in the store and in the log.
func (s *sess) emitAgent(e Entry) {
	if e.Type == wire.TypeTurnComplete {
		s.mu.Lock()
		ending := s.ending
		if s.tr.agentSess != "" {
			s.rec.AgentSessionID = s.tr.agentSess
		}
		s.mu.Unlock()
		if !ending {
			s.setStatus(store.StatusIdle, "")
		}
		tc := e.Payload.(wire.TurnComplete)
		if total, err := s.m.cfg.Store.AddSessionUsage(context.Background(), s.rec.ID, turnUsage(tc)); err != nil {
			s.m.cfg.Logger.Error("recording a turn's usage", "session", s.rec.ID, "err", err)
		} else {
			tc.SessionUsage = usageTotals(total)
			e.Payload = tc
		}
	}
	s.m.append(e)
}

// append writes an event of sessionID to the log.
func (m *Manager) append(e Entry) {
	if m.addToBatch(e) {
		return // committed with the bridge event being handled
	}
	if _, err := m.cfg.Events.Append(e); err != nil {
		m.cfg.Logger.Error("appending an event", "session", e.SessionID, "type", e.Type, "err", err)
	}
}

// notify appends a notification event, pending per device until acked.
func (m *Manager) notify(sessionID, kind, title, body, priority string, data map[string]any) {
	m.notifyAs(newID("ntf_"), sessionID, kind, title, body, priority, data)
}

// notifyAs is notify with the notification's id chosen by the caller.
func (m *Manager) notifyAs(id, sessionID, kind, title, body, priority string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	m.append(Entry{SessionID: sessionID, Type: wire.TypeNotification, ID: id, NotificationID: id, Payload: wire.Notification{
		NotificationID: id, SessionID: sessionID, NotificationType: kind, Title: title, Body: body, Priority: priority, Data: data,
	}})
}
