package bridge

import (
	"testing"

	"github.com/tetherdev/tether/wire"
)

// TestRunRequestsMalformed sends each run request malformed: each gets
// INVALID_MESSAGE with its id, and the connection goes on.
func TestRunRequestsMalformed(t *testing.T) {
	t.Parallel()
	forTransports(t, func(t *testing.T, transport string) {
		h := newHarnessOver(t, transport, nil)
		_, c, _ := h.paired()
		dir := t.TempDir()
		tests := []struct{ name, frame string }{
			{"run_start payload not an object", `{"type":"run_start","id":"x","payload":"go"}`},
			{"run_start task a number", `{"type":"run_start","id":"x","payload":{"task":5}}`},
			{"run_start without task", `{"type":"run_start","id":"x","payload":{"working_directory":"` + dir + `"}}`},
			{"run_start unknown template", `{"type":"run_start","id":"x","payload":{"task":"t","template":"debate"}}`},
			{"run_start too many rounds", `{"type":"run_start","id":"x","payload":{"task":"t","max_rounds":99}}`},
			{"run_start negative rounds", `{"type":"run_start","id":"x","payload":{"task":"t","max_rounds":-1}}`},
			{"run_start one participant", `{"type":"run_start","id":"x","payload":{"task":"t","participants":[{"name":"a","role":"implementer"}]}}`},
			{"run_start a bad name", `{"type":"run_start","id":"x","payload":{"task":"t","participants":[{"name":"A B","role":"implementer"},{"name":"b","role":"reviewer"}]}}`},
			{"run_start named user", `{"type":"run_start","id":"x","payload":{"task":"t","participants":[{"name":"user","role":"implementer"},{"name":"b","role":"reviewer"}]}}`},
			{"run_start two of a name", `{"type":"run_start","id":"x","payload":{"task":"t","participants":[{"name":"a","role":"implementer"},{"name":"a","role":"reviewer"}]}}`},
			{"run_start no reviewer", `{"type":"run_start","id":"x","payload":{"task":"t","participants":[{"name":"a","role":"implementer"},{"name":"b","role":"implementer"}]}}`},
			{"run_start an unknown role", `{"type":"run_start","id":"x","payload":{"task":"t","participants":[{"name":"a","role":"implementer"},{"name":"b","role":"boss"}]}}`},
			{"run_start participants not a list", `{"type":"run_start","id":"x","payload":{"task":"t","participants":{}}}`},
			{"run_messages without run_id", `{"type":"run_messages","id":"x","payload":{}}`},
			{"run_messages run_id a string", `{"type":"run_messages","id":"x","payload":{"run_id":"1"}}`},
			{"run_messages unknown run", `{"type":"run_messages","id":"x","payload":{"run_id":42}}`},
			{"run_send without run_id", `{"type":"run_send","id":"x","payload":{"content":"hi"}}`},
			{"run_send unknown run", `{"type":"run_send","id":"x","payload":{"run_id":42,"content":"hi"}}`},
			{"run_send content a list", `{"type":"run_send","id":"x","payload":{"run_id":1,"content":[]}}`},
			{"run_stop without run_id", `{"type":"run_stop","id":"x","payload":{}}`},
			{"run_stop unknown run", `{"type":"run_stop","id":"x","payload":{"run_id":42}}`},
			{"run_status unknown run", `{"type":"run_status","id":"x","payload":{"run_id":42}}`},
			{"run_status payload a list", `{"type":"run_status","id":"x","payload":[1]}`},
		}
		for _, tt := range tests {
			c.SendRaw(tt.frame)
			var ep wire.ErrorPayload
			env := c.WaitFor(wire.TypeError, &ep, nil)
			if ep.Code != wire.CodeInvalidMessage || !ep.Recoverable || ep.Message == "" || env.ID != "x" {
				t.Errorf("%s: got id=%q %+v", tt.name, env.ID, ep)
			}
			c.Send(wire.TypeHeartbeatPing, "alive", nil)
			c.WaitFor(wire.TypeHeartbeatPong, nil, nil)
		}
		c.Send(wire.TypeRunList, "list", nil)
		var list struct {
			Runs []struct{} `json:"runs"`
		}
		c.WaitFor(wire.TypeRunListResponse, &list, nil)
		if list.Runs == nil || len(list.Runs) != 0 {
			t.Fatalf("after refused starts, run_list holds %+v", list.Runs)
		}
	})
}
