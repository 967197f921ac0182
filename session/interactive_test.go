package session

import (
	"encoding/json"
	"testing"
)

func TestWithAnswers(t *testing.T) {
	t.Parallel()
	params := json.RawMessage(`{"questions":[{"question":"Which color?","options":[{"label":"Red"},{"label":"Blue"}]},{"question":"Which sizes?","multiSelect":true,"options":[{"label":"S"},{"label":"M"}]}]}`)
	in, err := withAnswers(params, map[string]string{"Which color?": "Blue", "Which sizes?": "S, M"})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Questions []json.RawMessage `json:"questions"`
		Answers   map[string]string `json:"answers"`
	}
	if json.Unmarshal(in, &got) != nil || len(got.Questions) != 2 || got.Answers["Which sizes?"] != "S, M" || got.Answers["Which color?"] != "Blue" {
		t.Fatalf("input with answers = %s", in)
	}
	for name, answers := range map[string]map[string]string{
		"one missing": {"Which color?": "Blue"},
		"blank":       {"Which color?": "Blue", "Which sizes?": "\t"},
		"not asked":   {"Which color?": "Blue", "Which sizes?": "S", "Why?": "x"},
		"none":        nil,
	} {
		if _, err := withAnswers(params, answers); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A call without questions takes no answers.
	if _, err := withAnswers(json.RawMessage(`{"questions":"not a list"}`), map[string]string{"q": "a"}); err == nil {
		t.Error("answers to a malformed call accepted")
	}
}
