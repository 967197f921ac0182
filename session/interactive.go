package session

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/tetherdev/tether/wire"
)

// Claude Code's tools whose calls are addressed to the user rather than
// asking leave to act: a plan to approve (in plan mode) and questions to
// answer. No policy or remembered rule answers them.
const (
	toolExitPlanMode    = "ExitPlanMode"
	toolAskUserQuestion = "AskUserQuestion"
)

// Kinds of approval_required besides a tool call (wire.ApprovalRequired.Kind).
const (
	kindPlan     = "plan"
	kindQuestion = "question"
)

// maxAnswer bounds one answer to a question, in runes.
const maxAnswer = 4096

// approvalKind is the kind of question a call of tool is: a plan, a
// question, or "" for a tool call.
func approvalKind(tool string) string {
	switch tool {
	case toolExitPlanMode:
		return kindPlan
	case toolAskUserQuestion:
		return kindQuestion
	}
	return ""
}

// withAnswers checks a phone's answers to an AskUserQuestion call (one
// for each of its questions, by the question's text; several options of
// a multi-select question joined with ", ") and returns the tool's input
// with them, as Claude Code takes it back: {"questions": …, "answers":
// {QUESTION: ANSWER}}.
func withAnswers(params json.RawMessage, answers map[string]string) (json.RawMessage, error) {
	var in struct {
		Questions []struct {
			Question string `json:"question"`
		} `json:"questions"`
	}
	// Parameters without questions (the agent's, untrusted) ask nothing:
	// every answer is then refused below.
	_ = json.Unmarshal(params, &in)
	asked := map[string]bool{}
	for _, q := range in.Questions {
		asked[q.Question] = true
		if strings.TrimSpace(answers[q.Question]) == "" {
			return nil, wire.Errorf(wire.CodeInvalidMessage, "answers needs an answer to %q", q.Question)
		}
	}
	for q, a := range answers {
		if !asked[q] {
			return nil, wire.Errorf(wire.CodeInvalidMessage, "answers names %q, which was not asked", q)
		}
		if utf8.RuneCountInString(a) > maxAnswer {
			return nil, wire.Errorf(wire.CodeInvalidMessage, "an answer is longer than %d characters", maxAnswer)
		}
	}
	b, _ := json.Marshal(answers) // a map of strings: it encodes
	return mergeParams(params, map[string]json.RawMessage{"answers": b}), nil
}
