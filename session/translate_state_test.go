package session

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A daemon that adopts a sandbox mid-turn restores the translator's state
// stored with the mark: wherever the turn was cut (mid-stream, with a tool
// running), the phone gets what one translator would have sent, nothing
// again and nothing less.
func TestTranslatorStateCarriesAcrossAdoption(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC)
	now := func() time.Time { return start }
	encode := func(entries []Entry) []string {
		var out []string
		for _, e := range entries {
			b, err := json.Marshal(e.Payload)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e.Type+" "+string(b))
		}
		return out
	}
	var whole []Entry
	one := newTranslator("s1", func(e Entry) { whole = append(whole, e) }, now)
	for _, l := range observedTurn {
		one.handle(json.RawMessage(l))
	}
	want := encode(whole)
	for cut := range observedTurn {
		var got []Entry
		before := newTranslator("s1", func(e Entry) { got = append(got, e) }, now)
		for _, l := range observedTurn[:cut] {
			before.handle(json.RawMessage(l))
		}
		after := newTranslator("s1", func(e Entry) { got = append(got, e) }, now)
		after.restore(before.snapshot())
		for _, l := range observedTurn[cut:] {
			after.handle(json.RawMessage(l))
		}
		g := encode(got)
		if len(g) != len(want) {
			t.Fatalf("cut before line %d: %d events, want %d:\n%q\nwant\n%q", cut, len(g), len(want), g, want)
		}
		for i := range g {
			if g[i] != want[i] {
				t.Errorf("cut before line %d: event %d is %s, want %s", cut, i, g[i], want[i])
			}
		}
	}
}

// TestTranslatorStateIsBounded: the agent picks the sizes in the state (its
// conversation id, tools it never answers); past the bounds none is stored,
// and an oversized one is not restored.
func TestTranslatorStateIsBounded(t *testing.T) {
	t.Parallel()
	now := func() time.Time { return time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC) }
	tr := newTranslator("s1", func(Entry) {}, now)
	if tr.snapshot() == nil {
		t.Fatal("a new translator's state was not stored")
	}
	tr.agentSess = strings.Repeat("x", maxStateBytes)
	if b := tr.snapshot(); b != nil {
		t.Fatalf("a %d-byte conversation id was stored (%d bytes)", len(tr.agentSess), len(b))
	}
	tr = newTranslator("s1", func(Entry) {}, now)
	for i := range maxStateTools + 1 {
		tr.tools[fmt.Sprint("toolu_", i)] = toolStart{name: "Bash", start: now()}
	}
	if tr.snapshot() != nil {
		t.Fatalf("%d open tools were stored", len(tr.tools))
	}
	delete(tr.tools, "toolu_0")
	tr.tools["toolu_0"] = toolStart{name: strings.Repeat("n", maxStateBytes)}
	if tr.snapshot() != nil {
		t.Fatal("a tool with a huge name was stored")
	}
	fresh := newTranslator("s1", func(Entry) {}, now)
	fresh.restore(append([]byte(`{"agent_session":"`+strings.Repeat("y", maxStateBytes)), `"}`...))
	if fresh.agentSess != "" {
		t.Fatal("an oversized state was restored")
	}
}
