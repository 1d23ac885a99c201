package classify_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpguard/mcpguard/guard/audit"
	"github.com/mcpguard/mcpguard/guard/classify"
	"github.com/mcpguard/mcpguard/guard/classify/promptguard"
	"github.com/mcpguard/mcpguard/lab/llm/server"
)

// BenchmarkHook is the hook's cost on a benign tool result, through
// guard.Proxy with L2 in four sessions: the hook off ("off"); on with an
// in-process classifier that passes everything at once ("inproc": the
// hook's machinery alone, texts read and normalised, the slow path); on
// against the scripted classifier (lab/llmtest, which answers at once:
// the HTTP round trip and the client's JSON on top, "scripted"); and on
// against the embedded model server (lab/llm/server, the small
// encoder doing real transformer arithmetic on synthetic weights: a
// model's cost on top, "model"). Each round makes one call in each session,
// in turn, so that all four see the same load; the metrics are per-call
// medians and 95th percentiles, and the ratios and differences of the
// medians against the hook off. ns/op is a whole round.
func BenchmarkHook(b *testing.B) {
	for _, size := range []int{len(benign), 4 << 10} {
		b.Run(fmt.Sprintf("result=%dB", size), func(b *testing.B) {
			text := strings.Repeat(benign+" ", size/len(benign)+1)[:size]

			scripted, _ := classifier(b)
			ms, err := server.New(server.Config{Preload: true})
			if err != nil {
				b.Fatal(err)
			}
			hs := httptest.NewServer(ms.Handler())
			b.Cleanup(func() { hs.Close(); ms.Close() })
			// The synthetic weights' scores mean nothing: the threshold is
			// set above this text's score, so that it passes as a benign
			// text passes a real model.
			pgo := promptguard.Options{URL: hs.URL}

			o := classify.Options{Timeout: 30 * time.Second, Threshold: modelThreshold(b, hs.URL, text)}
			inproc := func(log *audit.Logger) *classify.Hook {
				h, err := classify.New(classify.Options{Audit: log, Scanner: allow{}})
				if err != nil {
					b.Fatal(err)
				}
				return h
			}
			sessions := []*session{
				start(b, "", o),
				startHook(b, inproc),
				start(b, scripted.URL, o),
				startPG(b, pgo, o),
			}
			names := []string{"off", "inproc", "scripted", "model"}
			for _, s := range sessions {
				s.ready()
			}
			times := make([][]time.Duration, len(sessions))
			id := 0
			for b.Loop() {
				id++
				line := call(id, "echo", text)
				want := serverLine(id, text)
				for i, s := range sessions {
					t0 := time.Now()
					s.send(line)
					got := s.next()
					times[i] = append(times[i], time.Since(t0))
					if got != want {
						b.Fatalf("%s: the benign result did not pass unchanged: %.200s", names[i], got)
					}
				}
			}
			med := make([]float64, len(sessions))
			for i, ts := range times {
				slices.Sort(ts)
				med[i] = float64(ts[len(ts)/2].Nanoseconds())
				b.ReportMetric(med[i], names[i]+"-median-ns")
				b.ReportMetric(float64(ts[len(ts)*95/100].Nanoseconds()), names[i]+"-p95-ns")
			}
			for i := 1; i < len(sessions); i++ {
				b.ReportMetric(med[i]/med[0], names[i]+"/off-x")
				b.ReportMetric(med[i]-med[0], names[i]+"-delta-ns")
			}
		})
	}
}

// allow is a classifier that passes everything at once, in process: with
// it the hook costs what it does without a classifier (the texts read and
// normalised, the slow path).
type allow struct{}

func (allow) Score(context.Context, string, float64) (float64, error) { return 0, nil }

// modelThreshold returns a threshold above the model server's score for
// text, as the hook sends it.
func modelThreshold(b *testing.B, url, text string) float64 {
	pg, err := promptguard.New(promptguard.Options{URL: url})
	if err != nil {
		b.Fatal(err)
	}
	score, err := pg.Score(context.Background(), text, 1)
	if err != nil {
		b.Fatal(err)
	}
	if score >= 0.9 {
		if score >= 0.999 {
			b.Fatalf("the synthetic model scores the benign text %.4f: no threshold lets it pass", score)
		}
		return (score + 1) / 2
	}
	return 0.9
}
