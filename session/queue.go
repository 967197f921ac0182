package session

import (
	"context"
	"strings"

	"github.com/tetherdev/tether/sandbox"
	"github.com/tetherdev/tether/sandbox/agent"
	"github.com/tetherdev/tether/store"
	"github.com/tetherdev/tether/wire"
)

// next starts the next queued prompt when the agent is free.
func (s *sess) next() {
	s.mu.Lock()
	if !s.ready || s.running || s.ending || s.stopping || s.handingBack || len(s.queue) == 0 {
		s.mu.Unlock()
		return
	}
	p := s.queue[0]
	s.queue = s.queue[1:]
	s.running = true
	sb := s.sb
	s.mu.Unlock()
	// Busy is recorded before the agent starts: recorded after, it could
	// land after the turn's idle.
	s.setStatus(store.StatusBusy, "")
	q := sandbox.BridgeCommand{Cmd: sandbox.CmdQuery, Prompt: p.text, Images: p.images, SessionID: s.rec.ID, IncludePartialMessages: true}
	if err := sb.Send(q); err != nil {
		s.m.cfg.Logger.Warn("sending a query", "session", s.rec.ID, "err", err)
	}
}

// prompt is a user message waiting for the agent.
type prompt struct {
	text   string
	images []agent.Image
}

// Sender is the device a user message came from.
type Sender struct {
	DeviceID, DeviceName string
}

// Send queues a chat message (its text and images, validated) for a
// session and runs it when the agent is free, after logging it as a
// user_message event, so that every device sees it. A messageID seen
// before for this session is not run (nor logged) again. A session left
// idle by a restart is resumed first.
func (m *Manager) Send(ctx context.Context, sessionID, messageID, content string, atts []wire.Attachment, from Sender) error {
	if strings.TrimSpace(content) == "" && len(atts) == 0 {
		return wire.Errorf(wire.CodeInvalidMessage, "message content is empty")
	}
	if err := wire.ValidateAttachments(atts); err != nil {
		return err
	}
	s, err := m.liveSession(ctx, sessionID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	back := s.handingBack
	s.mu.Unlock()
	if back {
		return wire.Errorf(wire.CodeInvalidMessage, "session %q is going back to its terminal; send it again once it is there", sessionID)
	}
	if messageID != "" {
		fresh, err := m.cfg.Store.RememberMessage(ctx, sessionID, messageID, m.cfg.Now())
		if err != nil {
			return err
		}
		if !fresh {
			m.cfg.Logger.Info("message already taken; not run again", "session", sessionID, "message", messageID)
			return nil
		}
	}
	s.m.append(Entry{SessionID: sessionID, Type: wire.TypeUserMessage, Payload: wire.UserMessage{
		SessionID: sessionID, MessageID: messageID, Content: content,
		DeviceID: from.DeviceID, DeviceName: from.DeviceName, SentAt: wire.Timestamp(m.cfg.Now()),
		Attachments: atts,
	}})
	p := prompt{text: content}
	for _, a := range atts {
		p.images = append(p.images, agent.Image{MediaType: a.MediaType, Data: a.Data})
	}
	s.mu.Lock()
	s.queue = append(s.queue, p)
	s.mu.Unlock()
	s.next()
	return nil
}
