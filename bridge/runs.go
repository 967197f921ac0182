package bridge

import (
	"github.com/tetherdev/tether/runs"
	"github.com/tetherdev/tether/wire"
)

// runPageMax is the most messages a run_messages answer holds.
const runPageMax = 500

func (c *conn) runs() (*runs.Runner, error) {
	if c.s.Runs == nil {
		return nil, wire.Errorf(wire.CodeBridgeError, "this daemon runs no agent-to-agent runs")
	}
	return c.s.Runs, nil
}

func (c *conn) runRequest(env wire.Envelope) (*runs.Runner, wire.RunRequest, error) {
	var p wire.RunRequest
	r, err := c.runs()
	if err != nil {
		return nil, p, err
	}
	if err := wire.DecodePayload(env, &p); err != nil {
		return nil, p, err
	}
	if p.RunID <= 0 {
		return nil, p, wire.Errorf(wire.CodeInvalidMessage, "run_id is required")
	}
	return r, p, nil
}

func (c *conn) runStart(env wire.Envelope) error {
	r, err := c.runs()
	if err != nil {
		return err
	}
	var p runs.StartRequest
	if err := wire.DecodePayload(env, &p); err != nil {
		return err
	}
	info, err := r.Start(c.ctx, p)
	if err != nil {
		return err
	}
	c.send(wire.TypeRunStartResponse, env.ID, runs.RunUpdate{Run: info})
	return nil
}

func (c *conn) runList(env wire.Envelope) error {
	r, err := c.runs()
	if err != nil {
		return err
	}
	list, err := r.List(c.ctx, 50)
	if err != nil {
		return err
	}
	c.send(wire.TypeRunListResponse, env.ID, struct {
		Runs []runs.Info `json:"runs"`
	}{list})
	return nil
}

func (c *conn) runMessages(env wire.Envelope) error {
	r, p, err := c.runRequest(env)
	if err != nil {
		return err
	}
	if p.Limit <= 0 || p.Limit > runPageMax {
		p.Limit = runPageMax
	}
	if _, err := r.Info(c.ctx, p.RunID); err != nil {
		return err
	}
	msgs, err := r.Messages(c.ctx, p.RunID, p.AfterSeq, p.Limit+1)
	if err != nil {
		return err
	}
	more := len(msgs) > p.Limit
	if more {
		msgs = msgs[:p.Limit]
	}
	c.send(wire.TypeRunMessagesResponse, env.ID, struct {
		RunID    int64             `json:"run_id"`
		Messages []runs.RunMessage `json:"messages"`
		HasMore  bool              `json:"has_more"`
	}{p.RunID, msgs, more})
	return nil
}

func (c *conn) runSend(env wire.Envelope) error {
	r, p, err := c.runRequest(env)
	if err != nil {
		return err
	}
	if p.Type == "" {
		p.Type = runs.TypeChat
	}
	res, err := r.Send(c.ctx, p.RunID, p.To, p.Type, p.Content, p.Signal)
	if err != nil {
		return err
	}
	c.send(wire.TypeRunSendResponse, env.ID, res)
	return nil
}

func (c *conn) runStop(env wire.Envelope) error {
	r, p, err := c.runRequest(env)
	if err != nil {
		return err
	}
	info, err := r.Stop(c.ctx, p.RunID)
	if err != nil {
		return err
	}
	c.send(wire.TypeRunStopResponse, env.ID, runs.RunUpdate{Run: info})
	return nil
}

func (c *conn) runStatus(env wire.Envelope) error {
	r, p, err := c.runRequest(env)
	if err != nil {
		return err
	}
	info, err := r.Info(c.ctx, p.RunID)
	if err != nil {
		return err
	}
	c.send(wire.TypeRunStatusResponse, env.ID, struct {
		runs.Status
		Text string `json:"text"`
	}{info.Counts, info.Counts.Text()})
	return nil
}
