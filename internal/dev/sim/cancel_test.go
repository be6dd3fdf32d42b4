package sim_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/sim"
)

// Cancellations are exercised, not only allowed: among the first seeds,
// submitters and operators cancel orders in flight, those orders end
// Cancelled with their submitter told, and some cancels are refused.
func TestCancellationsAreExercised(t *testing.T) {
	t.Parallel()
	counts := map[string]int{}
	for seed := int64(1); seed <= 80; seed++ {
		res := sim.Run(sim.ForSeed(seed))
		require.False(t, res.Failed(), res.Summary(40))
		for _, l := range res.Trace {
			for what, sign := range map[string]string{
				"submitter": "submitter cancels", "operator": "sasctl cancel",
				"told": " cancelled\n", "refused": " cancel-refused",
			} {
				if strings.Contains(l+"\n", sign) {
					counts[what]++
				}
			}
		}
	}
	for _, what := range []string{"submitter", "operator", "told", "refused"} {
		require.Positive(t, counts[what], "%s: %v", what, counts)
	}
}

// Cancels land while branches run: with a graph's workflow and cancels in
// every seed, some cancels land while two steps or more of their order
// are in flight (the order's every step in flight is marked, each let to
// settle, then everything undone), and every invariant holds, "started
// after its cancel" and "effect not undone" among them.
func TestCancelsLandWhileBranchesRun(t *testing.T) {
	t.Parallel()
	landed := 0
	for seed := int64(1); seed <= 100; seed++ {
		cfg := sim.ForSeed(seed)
		cfg.Branches, cfg.Cancels = true, true
		res := sim.Run(cfg)
		require.False(t, res.Failed(), res.Summary(40))
		landed += res.CancelsWhileBranching
	}
	t.Logf("%d cancels landed while two steps or more of their order were in flight", landed)
	require.Positive(t, landed, "no cancel of 100 seeds landed while two branches were in flight")
}
