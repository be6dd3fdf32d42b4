package localrun

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/dev/judge"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/awscount"
)

// DemoOptions shape `make run` and `make chaos`.
type DemoOptions struct {
	Orders    int
	MultiStep float64
	// Branches is the share of orders on the split workflow: the
	// three-step one with its first two steps as branches run at once, the
	// third their join (SplitWorkflow). Drawn after MultiStep's.
	Branches                                         float64
	Timeout                                          time.Duration
	TransientRate, PermanentRate, HangRate, LostRate float64
	// LostMode is how responses are lost (remotesim.LostError by default:
	// a 503 after the effect; drop and hang stall the call).
	LostMode string
	Seed     uint64
	// KillEvery kills a random scheduler or agent instance this often.
	KillEvery time.Duration
	// DuplicateRate is the chance that a sent message is delivered twice.
	DuplicateRate float64
	// KillBeforeSendRate is the chance that a scheduler dies between its
	// write and its send of an agent request.
	KillBeforeSendRate float64
	// Supervisors run at once (default 2), their clocks spread over
	// [-ClockSkew, +ClockSkew].
	Supervisors int
	ClockSkew   time.Duration
	// MinProcessed is the share of orders that must end Processed (e.g.
	// 0.97); below it the run fails.
	MinProcessed float64
	// Quiet drops the per-second progress lines (tests).
	Quiet bool
	// PickupTimeout is the scheduler's and the supervisor's pick-up
	// timeout: a claim's allowance for its request to be picked up
	// (docs/protocol.md, "Deadlines start at pick-up"). Default 10s.
	PickupTimeout time.Duration
	// Warmup orders run first, on their own, and settle before the
	// burst is submitted: the healthy rate the burst's goodput is
	// measured against, in the same run (docs/cost.md, "Bursts").
	Warmup int
	// OutageFor takes the remote service down (every call answered 503,
	// remotesim.Sim.Down) for this long, OutageAt after the burst is
	// submitted: a remote outage in the middle of a run. Zero: none.
	OutageAt, OutageFor time.Duration
}

// Summary is what a demo run ends with.
type Summary struct {
	Submitted, Rejected                 int
	Processed, Failed, Compensated      int
	CompensationFailed, NotSettled      int
	Rescues, GaveUp, Alerts, Killed     int
	NothingRan                          int // of Rescues, re-drives of steps none of whose attempts ran
	TransientErrors, Hangs, LostReplies int
	Permanent                           int
	HarnessFaults                       map[string]int // kills, kills before a send, duplicates
	Effects, DuplicateEffects           int
	P50, P99, Max                       time.Duration
	DeadLetters                         int               // every dead-lettered message, counted exactly
	DeadLettered                        []DeadLetterQueue // by queue, each message named
	DeadLetterError                     string            // a DLQ that could not be read
	Elapsed                             time.Duration
	RejectedReasons                     []string
	Unsettled                           []string
	Requests                            int // AWS requests the system made
	Verdict                             judge.Verdict
	// Healthy is the warm-up's rate (orders settled per second), zero
	// without a warm-up; Goodput the run's, orders settled per second
	// from submission to the last.
	Healthy, Goodput float64
	// OutageFrom and OutageTo are when the remote was down (DemoOptions'
	// OutageFor), from submission; zero without an outage. OutageTo is
	// zero when the run ended before the service was up again.
	OutageFrom, OutageTo time.Duration
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

// OK reports whether the run passed: the verdict (nothing lost, nothing done
// twice, legal histories, alerts, compensation, every failure explained,
// enough processed) and no dead letters.
func (s Summary) OK() bool { return len(s.problems()) == 0 }

// Problem says what is not OK.
func (s Summary) Problem() string { return strings.Join(s.problems(), "; ") }

func (s Summary) problems() []string {
	p := s.Verdict.Problems()
	if s.DeadLetters > 0 {
		var per []string
		for _, q := range s.DeadLettered {
			per = append(per, fmt.Sprintf("%d to %s's", q.Count, q.Queue))
		}
		p = append(p, fmt.Sprintf("%d messages went to a dead-letter queue (%s)", s.DeadLetters, strings.Join(per, ", ")))
	}
	if s.DeadLetterError != "" {
		p = append(p, "the dead-letter queues could not be read: "+s.DeadLetterError)
	}
	return p
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

// Demo runs the whole system with faults on, prints progress, and ends with
// a summary and a verdict computed from what happened (Judge). The emulator
// endpoints must already be in the environment.
func Demo(ctx context.Context, o DemoOptions, out io.Writer) (Summary, error) {
	var sum Summary
	start := time.Now()
	if o.LostMode == "" {
		o.LostMode = remotesim.LostError
	}
	if o.Supervisors == 0 {
		o.Supervisors = 2
	}
	faults := remotesim.Faults{Profile: remotesim.Profile{
		LatencyBase: 5 * time.Millisecond, LatencyJitter: 20 * time.Millisecond,
		TransientRate: o.TransientRate, RetryAfter: 200 * time.Millisecond,
		PermanentRate: o.PermanentRate, HangRate: o.HangRate, LostRate: o.LostRate, LostMode: o.LostMode,
	}}
	counter := awscount.New("IdxPK", "IdxSK")
	sys, err := Start(ctx, Options{
		// Long enough that a healthy step never expires on a busy laptop, short
		// enough that a hung call is rescued within the run.
		StepTimeout: demoStepTimeout, PickupTimeout: cmp.Or(o.PickupTimeout, 10*time.Second), SupervisorEvery: time.Second,
		Supervisors: o.Supervisors, ClockSkew: o.ClockSkew, Instances: 2, Faults: faults, Seed: o.Seed,
		// 2 × 10 concurrent agent batches: the deployed event source's cap
		// (infra/), so a hung call holds back what it would in AWS, no more.
		AgentWorkers: 10,
		KillEvery:    o.KillEvery, DuplicateRate: o.DuplicateRate, KillBeforeSendRate: o.KillBeforeSendRate,
		Counter: counter, Logger: slog.New(slog.NewTextHandler(demoLog(), nil)),
		Workflows: demoWorkflows(o),
	})
	if err != nil {
		return sum, err
	}
	defer sys.Close()
	fmt.Fprintf(out, "tables %s, %s; queues intake/scheduler/agent with DLQs; simulator at %s\n", sys.Config.OrdersTable, sys.Config.StateTable, sys.SimURL)
	fmt.Fprintf(out, "remote faults: %.0f%% transient, %.0f%% permanent, %.0f%% hang, %.0f%% lost responses (%s); step timeout %s, supervisor every %s\n",
		100*o.TransientRate, 100*o.PermanentRate, 100*o.HangRate, 100*o.LostRate, o.LostMode, sys.Opts.StepTimeout, sys.Opts.SupervisorEvery)
	fmt.Fprintf(out, "harness faults: kill an instance every %s, %.0f%% duplicate deliveries, %.0f%% schedulers killed before a send; %d supervisors, clocks skewed by up to ±%s\n",
		o.KillEvery, 100*o.DuplicateRate, 100*o.KillBeforeSendRate, o.Supervisors, o.ClockSkew)
	if o.OutageFor > 0 {
		fmt.Fprintf(out, "remote outage: every call answered 503 for %s, from %s after submission\n", o.OutageFor, o.OutageAt)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { sys.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()

	rng := rand.New(rand.NewPCG(o.Seed, 7))
	if o.Warmup > 0 {
		if sum.Healthy, err = warmup(ctx, sys, o, rng, out); err != nil {
			return sum, err
		}
		start = time.Now()
	}
	requestsBefore := counter.Snapshot().Total("")
	ids := make([]string, o.Orders)
	ours := map[string]bool{}
	var msgs []sas.OutboundMessage
	runID := sys.Opts.Name
	for i := range ids {
		wf := o.workflow(rng)
		ids[i] = fmt.Sprintf("%s-%05d", runID, i)
		ours[ids[i]] = true
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
	sum.Submitted = len(ids)
	down := scheduleOutage(sys.Sim, submittedAt, o.OutageAt, o.OutageFor)
	defer down.end()
	fmt.Fprintf(out, "submitted %d orders (%.0f%% on the three-step workflow, %.0f%% on its split form with two branches) and %d bad messages in batches of 10\n\n",
		len(ids), 100*o.MultiStep, 100*o.Branches, len(badInputs("")))

	rejected := map[string]bool{}
	final := map[string]string{}
	window := goodputWindow{healthy: sum.Healthy}
	// The statuses are the caller's view, shown as progress; the store (its
	// index of what is in flight, then every order) decides when it is over.
	waitCtx, cancelWait := context.WithTimeout(ctx, o.Timeout)
	views, werr := sys.WaitSettled(waitCtx, ids, time.Second, func(inFlight int) {
		sts, err := sys.Statuses(waitCtx)
		if err != nil && waitCtx.Err() == nil {
			fmt.Fprintln(out, "warning: reading statuses:", err)
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
					final[st.OrderID] = st.Status
				}
			}
		}
		if o.Quiet {
			return
		}
		counts := map[string]int{}
		for _, s := range final {
			counts[s]++
		}
		rescued, gaveUp, _ := sys.Totals()
		fmt.Fprintf(out, "%5.1fs  processed %d  failed %d  compensated %d  no final status yet %d  steps in flight %d | rescues %d, gave up %d, alerts %d, killed %d%s%s\n",
			time.Since(start).Seconds(), counts[sas.StatusProcessed], counts[sas.StatusFailed], counts[sas.StatusCompensated],
			len(ids)-len(final), inFlight, rescued, gaveUp, len(sys.Alerts.Alerts()), sys.Killed(), window.tick(time.Now(), len(final)), down.mark())
	})
	cancelWait()
	elapsed := time.Since(submittedAt)
	sum.Requests = counter.Snapshot().Total("") - requestsBefore
	if werr != nil {
		fmt.Fprintln(out, "warning:", werr)
		// Judge what there is: the orders still moving are reported lost.
		// A minute, and 10 ms an order more: 20,000 orders on a busy
		// DynamoDB Local took longer than a minute to read.
		readCtx, cancel := context.WithTimeout(ctx, time.Minute+time.Duration(len(ids))*10*time.Millisecond)
		if views, err = sys.Views(readCtx, ids); err != nil {
			cancel()
			return sum, fmt.Errorf("reading the orders after the wait: %w", err)
		}
		cancel()
	}
	// An alert a settled order still owes comes with the redelivery of
	// the message whose handler died before sending it: wait for it, a
	// while, before the system stops (judge.MissingAlerts).
	if missing, waited := awaitOwedAlerts(ctx, views, sys.Alerts.Alerts, 6*sys.Opts.Visibility, time.Second); waited > 0 {
		fmt.Fprintf(out, "waited %s for alerts settled orders still owed; %d still missing\n", waited.Round(time.Second), len(missing))
	}
	stop() // nothing moves while the evidence is gathered
	<-done
	sum.OutageFrom, sum.OutageTo = down.window()
	var lat []time.Duration
	for _, id := range ids {
		v, ok := views[id]
		if !ok || !v.Settled() {
			sum.NotSettled++
			sum.Unsettled = append(sum.Unsettled, describe(id, v, ok))
			continue
		}
		if len(v.History) > 0 {
			lat = append(lat, v.History[len(v.History)-1].At.Sub(submittedAt))
		}
	}
	sum.Verdict = judge.Judge(sys.Evidence(ids, views), judge.JudgeRules{})
	sum.Verdict.MinProcessed = o.MinProcessed
	sum.Processed, sum.Failed, sum.Compensated, sum.CompensationFailed = sum.Verdict.Processed, sum.Verdict.Failed, sum.Verdict.Compensated, sum.Verdict.CompensationFailed
	sum.Rescues, sum.GaveUp, _ = sys.Totals()
	sum.NothingRan = sys.NothingRan()
	sum.Alerts = len(sys.Alerts.Alerts())
	sum.Killed = sys.Killed()
	sum.HarnessFaults = sys.Injected.Counts()
	st := sys.Sim.Stats()
	sum.TransientErrors, sum.Hangs, sum.LostReplies, sum.Permanent = int(st.Transient), int(st.Hangs), int(st.Lost), int(st.Permanent)
	sum.Effects = len(sys.Sim.Effects())
	sum.DuplicateEffects = len(sum.Verdict.DoubleEffects)
	if dl, err := countDeadLetters(ctx, sys.Queue, sys.DLQs); err != nil {
		sum.DeadLetterError = err.Error()
	} else {
		sum.DeadLettered = dl
		for _, q := range dl {
			sum.DeadLetters += q.Count
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		sum.P50, sum.P99, sum.Max = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], lat[len(lat)-1]
	}
	sum.Elapsed = elapsed
	sum.Goodput = float64(len(ids)-sum.NotSettled) / max(elapsed.Seconds(), 0.001)
	printSummary(out, sum)
	return sum, nil
}

func printSummary(out io.Writer, s Summary) {
	perOrder := func(n int) float64 { return float64(n) / float64(max(s.Submitted, 1)) }
	fmt.Fprintf(out, `
== summary (%.1fs from submission to the last order settled, %.1f orders/s) ==
orders submitted        %d
  processed             %d
  failed (Error)        %d   a step failed with nothing to undo (no step with an undo ran)
  compensated           %d   a step failed: what ran (the failed step included) was undone
  compensation failed   %d
  not settled           %d
bad messages rejected   %d told to their replyTo (of 6 sent; the rest are rejected in the log only: no valid replyTo)
remote faults injected  %d transient, %d permanent, %d hangs, %d lost responses
harness faults          %d instances killed (%d messages abandoned), %d schedulers killed before a send, %d duplicate deliveries
supervisor              %d rescues of stuck or stranded steps (%.2f per order), %d gave up
  of attempts that ran  %d (%.2f per order): their agent went quiet
  of steps none ran     %d (%.2f per order): never claimed, or a request lost; no failure counted
operator alerts         %d
effects at the remote   %d, done twice: %d
AWS requests            %d (%.1f per order, idle polls included)
dead-lettered messages  %d
latency to a final state: p50 %s, p99 %s, max %s
`, s.Elapsed.Seconds(), float64(s.Submitted)/max(s.Elapsed.Seconds(), 0.001), s.Submitted, s.Processed, s.Failed, s.Compensated, s.CompensationFailed, s.NotSettled,
		s.Rejected, s.TransientErrors, s.Permanent, s.Hangs, s.LostReplies,
		s.Killed, s.HarnessFaults[judge.FaultKilled], s.HarnessFaults[judge.FaultKilledBeforeSend], s.HarnessFaults[judge.FaultDuplicate],
		s.Rescues, perOrder(s.Rescues), s.GaveUp, s.Rescues-s.NothingRan, perOrder(s.Rescues-s.NothingRan), s.NothingRan, perOrder(s.NothingRan), s.Alerts, s.Effects, s.DuplicateEffects,
		s.Requests, perOrder(s.Requests), s.DeadLetters, s.P50.Round(time.Millisecond), s.P99.Round(time.Millisecond), s.Max.Round(time.Millisecond))
	if s.OutageFrom > 0 {
		to := "the end of the run (it was still down)"
		if s.OutageTo > 0 {
			to = fmt.Sprintf("%.1fs", s.OutageTo.Seconds())
		}
		fmt.Fprintf(out, "remote outage           every call answered 503 from %.1fs to %s after submission\n", s.OutageFrom.Seconds(), to)
	}
	if s.Healthy > 0 {
		fmt.Fprintf(out, "goodput                 %.1f orders/s to a final state over the run, %.0f%% of the healthy rate (%.1f orders/s, the warm-up's in the same run)\n",
			s.Goodput, 100*s.Goodput/s.Healthy, s.Healthy)
	}
	for i, u := range s.Unsettled {
		if i == 20 {
			fmt.Fprintf(out, "  … and %d more not settled\n", len(s.Unsettled)-20)
			break
		}
		fmt.Fprintf(out, "  NOT SETTLED %s\n", u)
	}
	for _, r := range s.RejectedReasons {
		fmt.Fprintf(out, "  rejected %s\n", r)
	}
	for _, q := range s.DeadLettered {
		fmt.Fprintf(out, "  %d dead-lettered from %s:\n", q.Count, q.Queue)
		for _, m := range q.Messages {
			fmt.Fprintf(out, "    %s\n", m)
		}
		if q.Count > len(q.Messages) {
			fmt.Fprintf(out, "    … and %d more\n", q.Count-len(q.Messages))
		}
	}
	if s.DeadLetters > 0 {
		fmt.Fprintf(out, "FAIL: %d messages were dead-lettered\n", s.DeadLetters)
	}
	if s.DeadLetterError != "" {
		fmt.Fprintf(out, "FAIL: the dead-letter queues could not be read: %s\n", s.DeadLetterError)
	}
	judge.PrintVerdict(out, s.Verdict)
	if s.OK() {
		fmt.Fprintln(out, "inspect an order with: sasctl show <orderId> (set SAS_ORDERS_TABLE/SAS_STATE_TABLE and the endpoints; see README)")
	}
}

// awaitOwedAlerts waits, at most grace and polling every tick, until the
// settled orders among views owe no alert that alerts does not hold. A
// scheduler that wrote a step's failure and died before its alert went out
// leaves the alert to the redelivery of its message, which comes a
// visibility timeout later (longer behind a backlog), while the order is
// settled already: a run that stops at once judged it a mismatch (issue 31).
// It returns what is still missing and how long it waited (0: nothing was
// owed).
func awaitOwedAlerts(ctx context.Context, views map[string]sas.OrderView, alerts func() []sas.Alert, grace, tick time.Duration) ([]string, time.Duration) {
	start := time.Now()
	missing := judge.MissingAlerts(views, alerts())
	if len(missing) == 0 {
		return nil, 0
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	t := time.NewTicker(tick)
	defer t.Stop()
	for len(missing) > 0 {
		select {
		case <-ctx.Done():
			return missing, time.Since(start)
		case <-deadline.C:
			return missing, time.Since(start)
		case <-t.C:
			missing = judge.MissingAlerts(views, alerts())
		}
	}
	return nil, max(time.Since(start), time.Nanosecond)
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

// demoStepTimeout is the runs' step timeout: long enough that a healthy
// step never expires on a busy laptop, short enough that a hung call is
// rescued within the run.
const demoStepTimeout = 8 * time.Second

// SplitWorkflow is the three-step order workflow with its first two steps,
// reserve and charge, as branches that start with the order, and ship their
// join (docs/workflows.md, "Branches in parallel").
const SplitWorkflow = "split"

// demoWorkflows are the reference workflows, and the split one when the
// run draws orders for it (nil: the reference workflows alone).
func demoWorkflows(o DemoOptions) sas.Registry {
	if o.Branches <= 0 {
		return nil
	}
	ord := registry.OrderWorkflow(demoStepTimeout)
	split := sas.Workflow{Name: SplitWorkflow, Steps: slices.Clone(ord.Steps)}
	split.Steps[1].After = []int{}
	split.Steps[2].After = []int{0, 1}
	reg, err := sas.NewRegistry(registry.PaymentWorkflow(demoStepTimeout), ord, split)
	if err != nil {
		panic(err) // fixed definitions: a test catches it
	}
	return reg
}

// workflow draws an order's workflow: the three-step one at MultiStep, the
// split one at Branches, else the single-step one. With no branches it
// draws as it always did, so a seed's run is unchanged.
func (o DemoOptions) workflow(rng *rand.Rand) string {
	r := rng.Float64()
	switch {
	case r < o.MultiStep:
		return "order"
	case r < o.MultiStep+o.Branches:
		return SplitWorkflow
	}
	return "payment"
}
