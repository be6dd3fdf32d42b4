package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// The wait goes after charge: in a straight line between charge and hold,
// in a graph in charge's branch, the join following it instead of charge.
func TestWithWaitKeepsTheGraph(t *testing.T) {
	line := withWait(tripWorkflow(), 1)
	require.False(t, line.Graph())
	require.Equal(t, "cool-off", line.Steps[2].Name)
	require.Equal(t, []int{2}, line.Preds(3), "the step after charge follows the wait")

	g := withWait(tripBranches(), 1)
	names := func(is []int) []string {
		var out []string
		for _, i := range is {
			out = append(out, g.Steps[i].Name)
		}
		return out
	}
	require.Equal(t, "cool-off", g.Steps[2].Name)
	require.Equal(t, []string{"charge"}, names(g.Preds(2)))
	require.Equal(t, []string{"reserve"}, names(g.Preds(3)), "hold: the other branch")
	require.Equal(t, []string{"cool-off", "hold"}, names(g.Preds(4)), "ship joins the wait's branch and hold's")
	_, err := sas.NewRegistry(g)
	require.NoError(t, err, "a graph a registry loads")
}
