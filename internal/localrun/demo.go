package localrun

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/remotesim"
	"github.com/sas-go/sas/internal/sas"
)

// DemoOptions shape `make run`.
type DemoOptions struct {
	Orders                                           int
	MultiStep                                        float64
	Timeout                                          time.Duration
	TransientRate, PermanentRate, HangRate, LostRate float64
	Seed                                             uint64
	KillEvery                                        time.Duration // kill a random instance this often (chaos)
}

// Summary is what a demo run ends with.
type Summary struct {
	Submitted, Rejected                 int
	Processed, Failed, Compensated      int
	CompensationFailed, NotSettled      int
	Rescues, GaveUp, Alerts, Killed     int
	TransientErrors, Hangs, LostReplies int
	Effects, DuplicateEffects           int
	P50, P99, Max                       time.Duration
	DeadLetters                         int
	Elapsed                             time.Duration
	RejectedReasons                     []string
	Unsettled                           []string
}

// describe says where an unsettled order stands, for the summary.
func describe(id string, v sas.OrderView, found bool) string {
	if !found {
		return id + ": not in the state store"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s):", id, v.Order.Workflow)
	for _, r := range v.Steps {
		fmt.Fprintf(&b, " [%d %s attempt %d failures %d due %s held by %q]", r.Step, r.ProcessState, r.Attempt, r.FailureCount, r.DueAt.Format("15:04:05.000"), r.LockedBy)
	}
	for _, h := range v.History {
		fmt.Fprintf(&b, "\n      %s step %d %s -> %s attempt %d by %s: %s", h.At.Format("15:04:05.000"), h.Step, h.From, h.To, h.Attempt, h.Actor, h.Reason)
	}
	return b.String()
}

// OK reports whether every order settled and nothing happened twice.
func (s Summary) OK() bool { return s.NotSettled == 0 && s.DuplicateEffects == 0 && s.DeadLetters == 0 }

// Problem says what is not OK.
func (s Summary) Problem() string {
	var p []string
	if s.NotSettled > 0 {
		p = append(p, fmt.Sprintf("%d orders never settled", s.NotSettled))
	}
	if s.DuplicateEffects > 0 {
		p = append(p, fmt.Sprintf("%d effects happened twice", s.DuplicateEffects))
	}
	if s.DeadLetters > 0 {
		p = append(p, fmt.Sprintf("%d messages went to a dead-letter queue", s.DeadLetters))
	}
	return strings.Join(p, "; ")
}

// badInputs are intake messages a careless application might send; each
// must be rejected alone, with a reason, while the orders beside it proceed.
func badInputs(replyTo string) []string {
	rt := `,"replyTo":"` + replyTo + `"`
	return []string{
		`{"orderId":"bad-1","workflow":"payment","payload":`,                      // truncated JSON: nobody to tell but the log
		`{"workflow":"payment"` + rt + `}`,                                        // no orderId
		`{"orderId":"bad 3","workflow":"payment"` + rt + `}`,                      // illegal characters
		`{"orderId":"bad-4","workflow":"teleport"` + rt + `}`,                     // unknown workflow
		`{"orderId":"bad-5","workflow":"payment","payload":[1,2,3]` + rt + `}`,    // payload not an object
		`{"orderId":"bad-6","workflow":"payment","replyTo":"http://elsewhere/q"}`, // replyTo not allowed: never posted to
	}
}

// Demo runs the whole system with faults on and prints progress and a
// summary to out. The emulator endpoints must already be in the environment.
func Demo(ctx context.Context, o DemoOptions, out io.Writer) (Summary, error) {
	var sum Summary
	start := time.Now()
	faults := remotesim.Faults{Profile: remotesim.Profile{
		LatencyBase: 5 * time.Millisecond, LatencyJitter: 20 * time.Millisecond,
		TransientRate: o.TransientRate, RetryAfter: 200 * time.Millisecond,
		PermanentRate: o.PermanentRate, HangRate: o.HangRate, LostRate: o.LostRate, LostMode: remotesim.LostError,
	}}
	sys, err := Start(ctx, Options{
		// Long enough that a healthy step never expires on a busy laptop, short
		// enough that a hung call is rescued within the run.
		StepTimeout: 8 * time.Second, PickupTimeout: 10 * time.Second, SupervisorEvery: time.Second,
		Supervisors: 2, Instances: 2, Faults: faults, Seed: o.Seed, KillEvery: o.KillEvery,
		Logger: slog.New(slog.NewTextHandler(demoLog(), nil)),
	})
	if err != nil {
		return sum, err
	}
	defer sys.Close()
	fmt.Fprintf(out, "tables %s, %s; queues intake/scheduler/agent with DLQs; simulator at %s\n", sys.Config.OrdersTable, sys.Config.StateTable, sys.SimURL)
	fmt.Fprintf(out, "faults: %.0f%% transient, %.0f%% permanent, %.0f%% hang, %.0f%% lost responses; step timeout %s, supervisor every %s\n",
		100*o.TransientRate, 100*o.PermanentRate, 100*o.HangRate, 100*o.LostRate, sys.Opts.StepTimeout, sys.Opts.SupervisorEvery)

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { sys.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	rng := rand.New(rand.NewPCG(o.Seed, 7))
	ids := make([]string, o.Orders)
	ours := map[string]bool{}
	var msgs []sas.OutboundMessage
	runID := sys.Opts.Name
	for i := range ids {
		wf := "payment"
		if rng.Float64() < o.MultiStep {
			wf = "order"
		}
		ids[i] = fmt.Sprintf("%s-%04d", runID, i)
		in := sas.Intake{OrderID: ids[i], Workflow: wf, ReplyTo: sys.StatusQueueURL,
			Payload: []byte(fmt.Sprintf(`{"amount":%d,"currency":"EUR"}`, 5+rng.IntN(500)))}
		msgs = append(msgs, sas.OutboundMessage{ID: fmt.Sprintf("o%d", i), Body: sas.Encode(in)})
	}
	for i, b := range badInputs(sys.StatusQueueURL) {
		// Mixed into the first batches, beside good orders.
		pos := min(i*7, len(msgs))
		msgs = append(msgs[:pos], append([]sas.OutboundMessage{{ID: fmt.Sprintf("bad%d", i), Body: b}}, msgs[pos:]...)...)
	}
	submittedAt := time.Now() // the batches go out together: one start for every order
	for i := 0; i < len(msgs); i += 10 {
		if err := sys.SendRaw(ctx, sys.Config.IntakeQueueURL, msgs[i:min(i+10, len(msgs))]...); err != nil {
			return sum, fmt.Errorf("submitting: %w", err)
		}
	}
	for _, id := range ids {
		ours[id] = true
	}
	sum.Submitted = len(ids)
	fmt.Fprintf(out, "submitted %d orders and %d bad messages in batches of 10\n\n", len(ids), len(badInputs("")))

	latency := map[string]time.Duration{}
	settled := map[string]bool{}
	rejected := map[string]bool{}
	tickN := 0
	final := map[string]string{}
	deadline := time.Now().Add(o.Timeout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		sts, err := sys.Statuses(ctx)
		if err != nil {
			return sum, err
		}
		for _, st := range sts {
			switch st.Status {
			case sas.StatusRejected:
				// At least once: a redelivered bad message is rejected again.
				if r := st.OrderID + ": " + st.Reason; !rejected[r] {
					rejected[r] = true
					sum.Rejected++
					sum.RejectedReasons = append(sum.RejectedReasons, r)
				}
			case sas.StatusProcessed, sas.StatusFailed, sas.StatusCompensated:
				if ours[st.OrderID] {
					if _, seen := latency[st.OrderID]; !seen || st.Status != sas.StatusFailed {
						latency[st.OrderID] = time.Since(submittedAt)
					}
					final[st.OrderID] = st.Status
				}
			}
		}
		counts := map[string]int{}
		for _, s := range final {
			counts[s]++
		}
		rescued, gaveUp, _ := sys.Totals()
		fmt.Fprintf(out, "%5.1fs  processed %d  failed %d  compensated %d  awaiting a final status %d  | rescues %d, gave up %d, alerts %d, killed %d\n",
			time.Since(start).Seconds(), counts[sas.StatusProcessed], counts[sas.StatusFailed], counts[sas.StatusCompensated],
			len(ids)-len(final), rescued, gaveUp, len(sys.Alerts.Alerts()), sys.Killed())
		// The statuses are the caller's view; the store decides when the run is
		// over. Orders with a final status are checked every second (a failed
		// one may still be compensating); the rest every fifth second (an undo
		// the supervisor gave up on ends without a status to the caller).
		tickN++
		for _, id := range ids {
			if settled[id] {
				continue
			}
			if _, ok := final[id]; !ok && tickN%5 != 0 {
				continue
			}
			if v, err := sys.Store.GetOrder(ctx, id); err == nil && Settled(v) {
				settled[id] = true
			}
		}
		if len(settled) == len(ids) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	// The status messages are the caller's view; the store is the truth.
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	views, werr := sys.WaitTerminal(waitCtx, ids, 250*time.Millisecond)
	cancel()
	for _, id := range ids {
		v, ok := views[id]
		if !ok || !Settled(v) {
			sum.NotSettled++
			sum.Unsettled = append(sum.Unsettled, describe(id, v, ok))
			continue
		}
		switch v.State() {
		case sas.Processed:
			sum.Processed++
		case sas.Compensated:
			sum.Compensated++
		case sas.CompensationFailed:
			sum.CompensationFailed++
		default:
			sum.Failed++
		}
	}
	if werr != nil {
		fmt.Fprintln(out, "warning:", werr)
	}
	sum.Rescues, sum.GaveUp, _ = sys.Totals()
	sum.Alerts = len(sys.Alerts.Alerts())
	sum.Killed = sys.Killed()
	st := sys.Sim.Stats()
	sum.TransientErrors, sum.Hangs, sum.LostReplies = int(st.Transient), int(st.Hangs), int(st.Lost)
	effects := map[string]int{}
	for _, e := range sys.Sim.Effects() {
		effects[e.OrderID+" "+e.Path]++
	}
	sum.Effects = len(sys.Sim.Effects())
	for _, n := range effects {
		if n > 1 {
			sum.DuplicateEffects += n - 1
		}
	}
	for _, url := range sys.DLQs {
		msgs, err := sys.Queue.Receive(ctx, sas.ReceiveParams{QueueURL: url, Max: 10})
		if err == nil {
			sum.DeadLetters += len(msgs)
		}
	}
	var lat []time.Duration
	for _, d := range latency {
		lat = append(lat, d)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		sum.P50, sum.P99, sum.Max = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], lat[len(lat)-1]
	}
	sum.Elapsed = time.Since(start)
	printSummary(out, sum)
	return sum, nil
}

func printSummary(out io.Writer, s Summary) {
	fmt.Fprintf(out, `
== summary (%.1fs) ==
orders submitted        %d
  processed             %d
  failed (Error)        %d   refused for good (or given up), nothing left to undo
  compensated           %d   failed after earlier steps succeeded: those were undone
  compensation failed   %d
  not settled           %d
bad messages rejected   %d told to their replyTo (of 6 sent; the rest are rejected in the log only: no valid replyTo)
remote faults injected  %d transient, %d hangs, %d lost responses — retried by the agents
instances killed        %d (their batches abandoned mid-flight)
supervisor              %d rescues of stuck or stranded steps, %d gave up
operator alerts         %d
effects at the remote   %d, done twice: %d
dead-lettered messages  %d
latency to a final status: p50 %s, p99 %s, max %s
`, s.Elapsed.Seconds(), s.Submitted, s.Processed, s.Failed, s.Compensated, s.CompensationFailed, s.NotSettled,
		s.Rejected, s.TransientErrors, s.Hangs, s.LostReplies, s.Killed, s.Rescues, s.GaveUp, s.Alerts, s.Effects, s.DuplicateEffects,
		s.DeadLetters, s.P50.Round(time.Millisecond), s.P99.Round(time.Millisecond), s.Max.Round(time.Millisecond))
	for _, u := range s.Unsettled {
		fmt.Fprintf(out, "  NOT SETTLED %s\n", u)
	}
	for _, r := range s.RejectedReasons {
		fmt.Fprintf(out, "  rejected %s\n", r)
	}
	if s.OK() {
		fmt.Fprintln(out, "\nevery order settled; nothing was lost and nothing was done twice.")
		fmt.Fprintln(out, "inspect one with: sasctl show <orderId> (set SAS_ORDERS_TABLE/SAS_STATE_TABLE and the endpoints; see README)")
	}
}

// demoLog is where the actors' logs go during `make run`: nowhere, unless
// SAS_RUN_LOG names a file.
func demoLog() io.Writer {
	if p := os.Getenv("SAS_RUN_LOG"); p != "" {
		if f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644); err == nil {
			return f
		}
	}
	return io.Discard
}
