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
