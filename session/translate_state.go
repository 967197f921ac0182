package session

import (
	"encoding/json"
	"time"

	"github.com/tetherdev/tether/wire"
)

// translatorState is what a translator carries from one agent message to
// the next, as a daemon that adopts the session's sandbox mid-turn needs it
// (stored with each sandbox mark): the message being streamed, the tools
// that run, the agent's conversation, its cost so far and what it said of
// itself. Without it an adopted turn would open its stream again and send
// text the phone has had.
type translatorState struct {
	MsgID        string               `json:"msg_id,omitempty"`
	Open         bool                 `json:"open,omitempty"`
	Streamed     bool                 `json:"streamed,omitempty"` // MsgID's text came as deltas
	Thought      bool                 `json:"thought,omitempty"`  // MsgID's thinking did
	Stop         string               `json:"stop,omitempty"`
	Tools        map[string]toolState `json:"tools,omitempty"`
	AgentSess    string               `json:"agent_session,omitempty"`
	CostBase     float64              `json:"cost_base,omitempty"`
	Info         *wire.AgentInfo      `json:"info,omitempty"`
	InfoSent     json.RawMessage      `json:"info_sent,omitempty"`
	RichCommands bool                 `json:"rich_commands,omitempty"`
}

type toolState struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	Kills uint64    `json:"kills,omitempty"`
}

// maxStateBytes bounds a snapshot: the agent picks the sizes in it (its
// conversation id, tool ids and names, tools it never answers), and a
// snapshot is stored with every event its bridge sends. A bigger state is
// not stored; a daemon that adopts the session then translates its turn
// afresh (the phone may see a stream opened again).
const maxStateBytes = 64 << 10

// maxStateTools bounds the tools a snapshot holds, checked before encoding.
const maxStateTools = 256

// snapshot encodes the translator's state, nil when it is over its bounds.
func (t *translator) snapshot() []byte {
	size := len(t.agentSess) + len(t.msgID) + len(t.stop) + len(t.infoSent)
	if len(t.tools) > maxStateTools {
		return nil
	}
	for id, ts := range t.tools {
		size += len(id) + len(ts.name)
	}
	if size > maxStateBytes {
		return nil
	}
	st := translatorState{MsgID: t.msgID, Open: t.open, Streamed: t.streamed[t.msgID], Thought: t.thought[t.msgID],
		Stop: t.stop, AgentSess: t.agentSess, CostBase: t.costBase, RichCommands: t.richCommands}
	if len(t.tools) > 0 {
		st.Tools = make(map[string]toolState, len(t.tools))
		for id, ts := range t.tools {
			st.Tools[id] = toolState{Name: ts.name, Start: ts.start, Kills: ts.kills}
		}
	}
	if len(t.infoSent) > 0 {
		info := t.info
		st.Info, st.InfoSent = &info, t.infoSent
	}
	b, err := json.Marshal(st)
	if err != nil || len(b) > maxStateBytes {
		return nil
	}
	return b
}

// restore takes the state snapshot encoded; an empty, unreadable or
// oversized one leaves the translator as new.
func (t *translator) restore(b []byte) {
	var st translatorState
	if len(b) == 0 || len(b) > maxStateBytes || json.Unmarshal(b, &st) != nil || len(st.Tools) > maxStateTools {
		return
	}
	t.msgID, t.open, t.stop = st.MsgID, st.Open, st.Stop
	if st.Streamed {
		t.streamed[st.MsgID] = true
	}
	if st.Thought {
		t.thought[st.MsgID] = true
	}
	for id, ts := range st.Tools {
		t.tools[id] = toolStart{name: ts.Name, start: ts.Start, kills: ts.Kills}
	}
	t.agentSess, t.costBase, t.richCommands = st.AgentSess, st.CostBase, st.RichCommands
	if st.Info != nil {
		t.info, t.infoSent = *st.Info, st.InfoSent
	}
}
