package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// totalLimit is enforced by the scheduler too (issue 28 §5): a step whose
// agent keeps answering transient, with attempts to spare and a service
// that asks to be called again in an hour, is given up at its overall
// limit, not run past it. The wait before a next attempt never passes the
// limit, and the outcome that comes at or after it gives the step up.
func TestTransientStepIsGivenUpAtItsTotalLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	reg, err := sas.NewRegistry(sas.Workflow{Name: "poll", Steps: []sas.StepDef{
		{Name: "poll", Agent: "payments", Action: "GET /status", Timeout: stepTimeout, MaxFailures: 50, TotalLimit: time.Minute}}})
	require.NoError(t, err)
	f.h = schedulerHandler(f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL}))
	f.deliver(intake("o-lim", "poll", f.replyURL))
	start := f.clock.Now()
	req := f.request()

	gaveUp := false
	for range 50 {
		f.clock.Advance(5 * time.Second) // the attempt runs
		rep := signedReply(req, sas.OutcomeTransient, "not ready yet")
		rep.RetryAfterMs = time.Hour.Milliseconds() // the service asks to be called in an hour
		f.deliver(sas.Encode(rep))
		if rec := f.step("o-lim", 0); rec.ProcessState != sas.Processing {
			gaveUp = true
			break
		}
		var wait time.Duration
		req, wait = f.nextRequest()
		require.LessOrEqual(t, f.clock.Now().Sub(start), time.Minute+time.Second, "a next attempt starts by the limit (waited %s)", wait)
	}
	require.True(t, gaveUp, "given up, not retried for ever")
	rec := f.step("o-lim", 0)
	require.Less(t, rec.FailureCount, 50, "at its limit, with attempts to spare")
	require.LessOrEqual(t, f.clock.Now().Sub(start), time.Minute+stepTimeout, "at most one attempt past the limit")
	require.Contains(t, rec.LastError, "overall limit of 1m0s")
	require.Len(t, f.alerts.all(), 1, "a give-up alerts, as the supervisor's")
}
