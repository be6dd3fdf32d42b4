package localrun

import (
	"cmp"
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
		wf := o.workflow(rng)
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
	ours := map[string]bool{}
	for _, id := range ids {
		ours[id] = true
	}
	final := map[string]bool{}
	var window goodputWindow
	best := 0.0
	if _, err := sys.WaitSettled(waitCtx, ids, time.Second, func(int) {
		sts, _ := sys.Statuses(waitCtx)
		for _, st := range sts {
			switch st.Status {
			case sas.StatusProcessed, sas.StatusFailed, sas.StatusCompensated, sas.StatusRejected:
				if ours[st.OrderID] {
					final[st.OrderID] = true
				}
			}
		}
		if r, ok := window.rate(time.Now(), len(final)); ok {
			best = max(best, r)
		}
	}); err != nil {
		return 0, fmt.Errorf("the warm-up did not settle: %w", err)
	}
	took := time.Since(start).Seconds()
	whole := float64(len(ids)) / took
	// The warm-up's best 30 s, not its whole: a few hundred orders end
	// with a tail (a hung step waits out its deadline, a retry its
	// interval) that is most of their time, and would make a burst, whose
	// tail is a small part of it, look faster than healthy.
	rate := cmp.Or(best, whole)
	fmt.Fprintf(out, "warm-up: %d orders settled in %.1fs (%.1f orders/s over the whole); the healthy rate, its best %s, is %.1f orders/s\n\n",
		len(ids), took, whole, goodputSpan, rate)
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

// rate notes final orders at now and returns the rate over the last
// goodputSpan (ok false until a span has passed).
func (g *goodputWindow) rate(now time.Time, final int) (float64, bool) {
	g.marks = append(g.marks, goodputMark{now, final})
	for len(g.marks) > 1 && now.Sub(g.marks[1].at) >= goodputSpan {
		g.marks = g.marks[1:]
	}
	first := g.marks[0]
	span := now.Sub(first.at)
	if span < goodputSpan {
		return 0, false
	}
	return float64(final-first.final) / span.Seconds(), true
}

// tick notes final orders at now and returns the progress line's goodput
// part ("" until a span has passed).
func (g *goodputWindow) tick(now time.Time, final int) string {
	rate, ok := g.rate(now, final)
	if !ok {
		return ""
	}
	if g.healthy <= 0 {
		return fmt.Sprintf(" | goodput %.1f/s", rate)
	}
	return fmt.Sprintf(" | goodput %.1f/s (%.0f%% of healthy)", rate, 100*rate/g.healthy)
}
