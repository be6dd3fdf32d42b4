package localrun

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/remotesim"
)

// A scheduled outage takes the simulator down at its time, brings it up
// after its length, and says when; ended early, the service is up again
// and the window says it never came up on its own.
func TestScheduledOutageTakesTheRemoteDownThenUp(t *testing.T) {
	t.Parallel()
	sim, err := remotesim.New(remotesim.Config{})
	require.NoError(t, err)
	defer sim.Close()

	none := scheduleOutage(sim, time.Now(), 0, 0)
	none.end()
	from, to := none.window()
	require.Zero(t, from)
	require.Zero(t, to)

	o := scheduleOutage(sim, time.Now(), 20*time.Millisecond, 100*time.Millisecond)
	require.Eventually(t, sim.IsDown, 10*time.Second, time.Millisecond)
	require.Equal(t, " | REMOTE DOWN", o.mark())
	require.Eventually(t, func() bool { return !sim.IsDown() }, 10*time.Second, time.Millisecond)
	o.end()
	from, to = o.window()
	require.GreaterOrEqual(t, from, 20*time.Millisecond)
	require.GreaterOrEqual(t, to-from, 100*time.Millisecond)
	require.Empty(t, o.mark())

	cut := scheduleOutage(sim, time.Now(), 0, time.Hour)
	require.Eventually(t, sim.IsDown, 10*time.Second, time.Millisecond)
	cut.end()
	require.False(t, sim.IsDown(), "a run that ends takes its outage with it")
	from, to = cut.window()
	require.NotZero(t, from)
	require.Zero(t, to, "it never came up on its own")

	late := scheduleOutage(sim, time.Now(), time.Hour, time.Minute)
	late.end()
	require.False(t, sim.IsDown())
	from, _ = late.window()
	require.Zero(t, from, "ended before its time, it never starts")
}
