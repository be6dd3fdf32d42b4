package suites_test

import (
	"github.com/sas-go/sas/internal/dev/judge"

	"context"
	"testing"
	"time"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

const (
	// The agent capacity C is known by construction: one agent instance
	// polling with one worker runs up to agenthost.DefaultConcurrency calls at
	// once, and every call takes overloadLatency at the remote (no jitter, no
	// faults), so C = concurrency ÷ latency single-step orders per second.
	overloadInstances = 1
	overloadLatency   = 500 * time.Millisecond
	overloadOrders    = 600 // a burst of 30 s of work at C
	slowFactor        = 10
	slowAfter         = 10 * time.Second // into the run
	slowFor           = 30 * time.Second
	// A step's execution limit fits a slowed call (5 s) with room to spare,
	// so what fails an order here can only be waiting, never executing.
	overloadStepTimeout = 30 * time.Second
)

// BenchmarkOverload bursts overloadOrders single-step orders into a system
// whose agent capacity C is known, slows the remote tenfold for 30 s
// mid-run, and reports, a line a second, the backlog (open steps not at the
// remote), the calls in flight at the remote and the orders completed that
// second; then goodput ÷ C (over the seconds at full speed with work
// waiting), orders failed by waiting (by Judge's rules; nonzero is an error:
// that is an outcome, not a timing), rescues per order, and the time to get
// back to full goodput once the slowdown ended.
func BenchmarkOverload(b *testing.B) {
	emulator.Require(b)
	for b.Loop() {
		overloadRun(b)
	}
}

func overloadRun(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sys, err := localrun.Start(ctx, localrun.Options{
		Instances: overloadInstances, StepTimeout: overloadStepTimeout, PickupTimeout: time.Minute,
		AttemptTimeout: overloadStepTimeout,
		Faults:         remotesim.Faults{Profile: remotesim.Profile{LatencyBase: overloadLatency}},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sys.Close()
	capacity := float64(overloadInstances*sys.Opts.PollerWorkers*agenthost.DefaultConcurrency) / overloadLatency.Seconds()
	b.Logf("C = %d instance(s) × %d worker(s) × %d calls per invocation ÷ %s = %.1f orders/s; burst of %d; remote ×%d slower from %s for %s",
		overloadInstances, sys.Opts.PollerWorkers, agenthost.DefaultConcurrency, overloadLatency, capacity, overloadOrders, slowFactor, slowAfter, slowFor)

	defer runInBackground(ctx, sys)()

	ids, batch := paymentIntakes(sys, "ovl", overloadOrders)
	start := time.Now()
	if err := sys.Submit(ctx, batch...); err != nil { // in batches of ten
		b.Fatal(err)
	}
	slowing := time.AfterFunc(slowAfter-time.Since(start), func() { sys.Sim.SlowDown(slowFactor) })
	restoring := time.AfterFunc(slowAfter+slowFor-time.Since(start), func() { sys.Sim.SlowDown(1.0 / slowFactor) })
	defer slowing.Stop()
	defer restoring.Stop()

	// Completed work is counted as effects at the remote (one per order:
	// no faults), the backlog from the steps still open in the store's index
	// less the calls at the remote; all cheap to read. Whether an order whose
	// effect was done still failed (its reply waited) is Judge's to say.
	type second struct {
		at                  time.Duration
		completed, backlog  int
		inFlight, processed int
	}
	var seconds []second
	lastDone := 0
	views, err := sys.WaitSettled(ctx, ids, time.Second, func(open int) {
		processed := len(sys.Sim.Effects())
		active := sys.Sim.Active()
		s := second{at: time.Since(start).Round(time.Second), completed: processed - lastDone, backlog: max(0, open-active), inFlight: active, processed: processed}
		lastDone = processed
		seconds = append(seconds, s)
		b.Logf("%4s  backlog %4d  in flight %3d  completed %4d/s  (effects so far %d)", s.at, s.backlog, s.inFlight, s.completed, s.processed)
	})
	if err != nil {
		b.Fatalf("the burst did not settle: %v", err)
	}
	elapsed := time.Since(start)
	rescued, _, _ := sys.Totals()
	v := judge.Judge(sys.Evidence(ids, views), judge.JudgeRules{})

	// Goodput while the remote ran at full speed and work was waiting.
	slowFrom, slowTo := slowAfter, slowAfter+slowFor
	var fullDone, fullSecs int
	recovered := time.Duration(-1)
	for _, s := range seconds {
		if s.at > slowFrom && s.at <= slowTo+time.Second {
			continue
		}
		if s.backlog > 0 || s.inFlight > 0 {
			fullDone += s.completed
			fullSecs++
		}
		if recovered < 0 && s.at > slowTo && (float64(s.completed) >= 0.9*capacity || (s.backlog == 0 && s.inFlight == 0)) {
			recovered = s.at - slowTo
		}
	}
	goodput := float64(fullDone) / float64(max(fullSecs, 1))
	wholeCapacity := capacity * (elapsed.Seconds() - slowFor.Seconds() + slowFor.Seconds()/slowFactor)
	b.Logf("processed %d of %d in %s; goodput at full speed %.1f orders/s = %.2f × C; whole run %.2f of the capacity it had; failed by waiting %d; rescues per order %.2f; recovered full goodput %s after the slowdown",
		v.Processed, len(ids), elapsed.Round(time.Millisecond), goodput, goodput/capacity, float64(v.Processed)/wholeCapacity, v.FailedByWaiting, float64(rescued)/float64(len(ids)), recovered)
	b.ReportMetric(capacity, "C_orders/s")
	b.ReportMetric(goodput/capacity, "goodput/C")
	b.ReportMetric(float64(v.Processed)/wholeCapacity, "run_goodput/capacity")
	b.ReportMetric(float64(v.FailedByWaiting), "failed_by_waiting")
	b.ReportMetric(float64(rescued)/float64(len(ids)), "rescues/order")
	b.ReportMetric(recovered.Seconds(), "recover_s")
	if v.FailedByWaiting > 0 {
		for i, d := range v.Defects {
			if i == 5 {
				break
			}
			b.Logf("DEFECT %s (%s): %v", d.OrderID, d.State, d.Why)
		}
		b.Errorf("%d orders failed by waiting (no fault was injected: an overloaded system must not fail them)", v.FailedByWaiting)
	}
	if p := v.Problems(); len(p) > 0 {
		b.Logf("verdict: %v", p)
	}
}
