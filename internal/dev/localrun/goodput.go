package localrun

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// warmup runs o.Warmup orders (the burst's mix) on their own and returns
// the rate at which they settled: the healthy rate a burst's goodput is
// measured against, on the same machine in the same run.
func warmup(ctx context.Context, sys *System, o DemoOptions, rng *rand.Rand, out io.Writer) (float64, error) {
	ids := make([]string, o.Warmup)
	var msgs []sas.OutboundMessage
	for i := range ids {
		wf := "payment"
		if rng.Float64() < o.MultiStep {
			wf = "order"
		}
		ids[i] = fmt.Sprintf("%s-w%05d", sys.Opts.Name, i)
		in := sas.Intake{OrderID: ids[i], Workflow: wf, Payload: []byte(fmt.Sprintf(`{"amount":%d,"currency":"EUR"}`, 5+rng.IntN(500)))}
		msgs = append(msgs, sas.OutboundMessage{ID: fmt.Sprintf("w%d", i), Body: sas.Encode(in)})
	}
	start := time.Now()
	for i := 0; i < len(msgs); i += 10 {
		if err := sys.SendRaw(ctx, sys.Config.IntakeQueueURL, msgs[i:min(i+10, len(msgs))]...); err != nil {
			return 0, fmt.Errorf("submitting the warm-up: %w", err)
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if _, err := sys.WaitSettled(waitCtx, ids, time.Second, func(int) {}); err != nil {
		return 0, fmt.Errorf("the warm-up did not settle: %w", err)
	}
	rate := float64(len(ids)) / time.Since(start).Seconds()
	fmt.Fprintf(out, "warm-up: %d orders settled in %.1fs: the healthy rate is %.1f orders/s\n\n", len(ids), time.Since(start).Seconds(), rate)
	return rate, nil
}

// goodputWindow reports the rate at which orders reached a final state
// over the last goodputSpan, against the healthy rate: goodput over time.
type goodputWindow struct {
	healthy float64
	marks   []goodputMark
}

type goodputMark struct {
	at    time.Time
	final int
}

const goodputSpan = 30 * time.Second

// tick notes final orders at now and returns the progress line's goodput
// part ("" until a span has passed).
func (g *goodputWindow) tick(now time.Time, final int) string {
	g.marks = append(g.marks, goodputMark{now, final})
	for len(g.marks) > 1 && now.Sub(g.marks[1].at) >= goodputSpan {
		g.marks = g.marks[1:]
	}
	first := g.marks[0]
	span := now.Sub(first.at)
	if span < goodputSpan {
		return ""
	}
	rate := float64(final-first.final) / span.Seconds()
	if g.healthy <= 0 {
		return fmt.Sprintf(" | goodput %.1f/s", rate)
	}
	return fmt.Sprintf(" | goodput %.1f/s (%.0f%% of healthy)", rate, 100*rate/g.healthy)
}
