package wire

import "encoding/json"

// Approval message types: a question about a tool call, its answer, and
// the rules remembered from answers.
const (
	TypeApprovalRequired   = "approval_required"
	TypeApprovalResponse   = "approval_response"
	TypeApprovalCancelled  = "approval_cancelled"      // extension
	TypeApprovalResolved   = "approval_resolved"       // extension
	TypeApprovalRules      = "approval_rules"          // extension
	TypeApprovalRulesResp  = "approval_rules_response" // extension
	TypeApprovalRulesClear = "approval_rules_clear"    // extension
)

// ApprovalRequired is the payload of "approval_required".
type ApprovalRequired struct {
	SessionID   string          `json:"session_id"`
	ToolCallID  string          `json:"tool_call_id"`
	Tool        string          `json:"tool"`
	Params      json.RawMessage `json:"params"`
	Description string          `json:"description"`
	RiskLevel   string          `json:"risk_level"`
	Source      string          `json:"source"`
	RequestID   string          `json:"request_id,omitempty"`
	ExpiresAt   string          `json:"expires_at,omitempty"`
	// RememberScope says what approving with remember "session" would
	// approve from then on (extension).
	RememberScope string `json:"remember_scope,omitempty"`
	// Kind is "plan" (the agent proposes the plan in params.plan) or
	// "question" (it asks params.questions) for the calls addressed to
	// the user (extension); absent for a tool call.
	Kind string `json:"kind,omitempty"`
}

// ApprovalResponse is the payload of "approval_response".
type ApprovalResponse struct {
	SessionID     string          `json:"session_id"`
	ToolCallID    string          `json:"tool_call_id"`
	Decision      string          `json:"decision"`
	Modifications json.RawMessage `json:"modifications"`
	Reason        string          `json:"reason,omitempty"`
	// Remember "session" approves the same tool with the same shape of
	// input for the rest of the session (extension).
	Remember string `json:"remember,omitempty"`
	// Answers answer a "question" approval, approved: the answer to each
	// question by its text (extension).
	Answers map[string]string `json:"answers,omitempty"`
}

// ApprovalResolved tells phones a question was answered (extension), so
// that other phones dismiss it.
type ApprovalResolved struct {
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	Decision   string `json:"decision"`
}

// ApprovalRule is a remembered approval (extension).
type ApprovalRule struct {
	Tool   string   `json:"tool"`
	Prefix string   `json:"prefix,omitempty"`
	Path   string   `json:"path,omitempty"`
	Keys   []string `json:"keys,omitempty"`
	// MaxRisk is the highest risk level the rule approves: the level of
	// the call it was remembered from.
	MaxRisk string `json:"max_risk,omitempty"`
}

// ApprovalRules is the payload of approval_rules, approval_rules_clear and
// approval_rules_response (extension).
type ApprovalRules struct {
	SessionID string         `json:"session_id"`
	Rules     []ApprovalRule `json:"rules"`
}

// ApprovalCancelled tells phones a question went away (extension).
type ApprovalCancelled struct {
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	Reason     string `json:"reason"`
}
