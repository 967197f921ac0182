package hooks

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// chanBroker hands each question to the benchmark and waits for its
// answer, as a phone would give it.
type chanBroker struct {
	asked   chan struct{}
	answers chan Answer
}

func (c *chanBroker) Observe(context.Context, Event) error { return nil }

func (c *chanBroker) Ask(ctx context.Context, ev Event) (Answer, error) {
	c.asked <- struct{}{}
	select {
	case a := <-c.answers:
		return a, nil
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	}
}

// BenchmarkServerRoundTrip measures the endpoint's own share of a held
// question over a kept-alive loopback connection: the POST sent to the
// broker's Ask called ("ask"), and the broker's answer to the HTTP answer
// read ("answer").
func BenchmarkServerRoundTrip(b *testing.B) {
	cb := &chanBroker{asked: make(chan struct{}), answers: make(chan Answer)}
	ts := httptest.NewServer(&Server{Broker: cb, Token: testToken, Logger: slog.New(slog.DiscardHandler)})
	defer ts.Close()
	body := payloads[EventPreToolUse]
	ask := make([]time.Duration, 0, b.N)
	answer := make([]time.Duration, 0, b.N)
	type result struct {
		at  time.Time
		err error
	}
	b.ResetTimer()
	for range b.N {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+Path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		res := make(chan result, 1)
		start := time.Now()
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			res <- result{time.Now(), err}
		}()
		<-cb.asked
		ask = append(ask, time.Since(start))
		sent := time.Now()
		cb.answers <- Answer{Decision: DecisionAllow}
		r := <-res
		if r.err != nil {
			b.Fatal(r.err)
		}
		answer = append(answer, r.at.Sub(sent))
	}
	b.StopTimer()
	for name, d := range map[string][]time.Duration{"ask": ask, "answer": answer} {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds()), name+"-p50-µs")
		b.ReportMetric(float64(d[min(len(d)-1, len(d)*99/100)].Microseconds()), name+"-p99-µs")
	}
}
