package wire

// Agent-to-agent run message types (extension): phones start a run, read
// its messages, send into it and stop it; run_message and run_update
// events follow each run live.
const (
	TypeRunStart            = "run_start"
	TypeRunStartResponse    = "run_start_response"
	TypeRunList             = "run_list"
	TypeRunListResponse     = "run_list_response"
	TypeRunMessages         = "run_messages"
	TypeRunMessagesResponse = "run_messages_response"
	TypeRunSend             = "run_send"
	TypeRunSendResponse     = "run_send_response"
	TypeRunStop             = "run_stop"
	TypeRunStopResponse     = "run_stop_response"
	TypeRunStatus           = "run_status"
	TypeRunStatusResponse   = "run_status_response"

	// The events the runs log: every message of a run as it is taken, and
	// a run's state when it starts, changes round or ends.
	TypeRunMessage = "run_message"
	TypeRunUpdate  = "run_update"
)

// The payloads of run_start, run_start_response, run_list_response,
// run_messages_response, run_send_response, run_status_response,
// run_message and run_update are the runs package's types (runs.StartRequest,
// runs.Info, runs.RunMessage, runs.SendResult, runs.Status): they are the
// agent-to-agent spec's own forms, which the run's agents get through their
// tools as well (docs/ARCHITECTURE.md, "Agent-to-agent runs").

// RunRequest is the payload of run_messages, run_send, run_stop and
// run_status.
type RunRequest struct {
	RunID    int64  `json:"run_id"`
	AfterSeq int64  `json:"after_seq"`
	Limit    int    `json:"limit"`
	To       string `json:"to"`
	Type     string `json:"type"`
	Content  string `json:"content"`
	Signal   string `json:"signal"`
}
