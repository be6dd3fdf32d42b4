package suites_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// TestSoak is the small chaos soak (`make chaos` is the large one): a few
// hundred single- and three-step orders, a fifth of them with two branches
// at once and a join (localrun.SplitWorkflow), on the emulators with every fault
// kind at once — transient errors, permanent refusals, hangs, dropped
// responses, instances killed mid-batch, duplicate deliveries, schedulers
// killed between their write and their send, three supervisors with skewed
// clocks — run until the store says every order is terminal, then judged
// (judge.Judge): nothing lost, nothing done twice, every history legal,
// one alert per failed step, compensation exactly for what took effect, and
// every failure explained by a fault injected into its own order. The share
// processed is reported, not asserted: faults this heavy fail orders by
// design.
func TestSoak(t *testing.T) {
	emulator.Require(t)
	// Bounds for a busy machine, not timings: quiet, the orders settle in
	// about 15 s; at a load average of 44 only 80 of 200 had in 100 s.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out bytes.Buffer
	sum, err := localrun.Demo(ctx, localrun.DemoOptions{
		Orders: 200, MultiStep: 0.3, Branches: 0.2, Timeout: 6 * time.Minute, Seed: 7,
		TransientRate: 0.1, PermanentRate: 0.02, HangRate: 0.03, LostRate: 0.02, LostMode: remotesim.LostDrop,
		KillEvery: 4 * time.Second, DuplicateRate: 0.03, KillBeforeSendRate: 0.02,
		Supervisors: 3, ClockSkew: 300 * time.Millisecond, Quiet: true,
	}, &out)
	if err != nil {
		t.Fatalf("soak did not run: %v\n%s", err, out.String())
	}
	t.Logf("%d orders in %s: %d processed, %d failed, %d compensated, %d compensation failed; %.2f rescues and %.1f AWS requests per order; p50 %s, p99 %s; harness faults %v",
		sum.Submitted, sum.Elapsed.Round(time.Millisecond), sum.Processed, sum.Failed, sum.Compensated, sum.CompensationFailed,
		float64(sum.Rescues)/float64(sum.Submitted), float64(sum.Requests)/float64(sum.Submitted), sum.P50, sum.P99, sum.HarnessFaults)
	if !sum.OK() {
		// The summary names every violated invariant and every defect.
		for _, l := range strings.Split(out.String(), "\n") {
			t.Log(l)
		}
		t.Fatalf("soak failed its verdict: %s", sum.Problem())
	}
}
