package supervisor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// TestAPausedAgentsStepsAreLeftAloneAndThePauseDoesNotCount: an operator
// pauses the agent of a held, started step; its deadline and then some pass
// while paused, and the supervisor neither rescues, waits on nor gives up
// on it. After the resume it is judged as if the pause had not passed: due
// at its deadline plus the pause, then a failure as usual.
func TestAPausedAgentsStepsAreLeftAloneAndThePauseDoesNotCount(t *testing.T) {
	t.Parallel()
	e, agentURL := busyEnv(t, time.Minute)
	s := e.supervisor(t, func(c *Config) {
		c.Pauses = e.mem
		c.StepAgents = map[string][]string{"step0": {"payments"}}
		c.MaxFailures = 1 // any failure would be a give-up
	})
	e.submitClaimed(t, "o-paused", 1)
	e.backlog(t, agentURL, 5)
	pausedAt := T0.Add(stepTimeout / 2)
	_, err := e.mem.PauseAgent(t.Context(), sas.PauseParams{Agent: "payments", Now: pausedAt, Actor: "op"})
	require.NoError(t, err)

	for _, d := range []time.Duration{stepTimeout, 2 * time.Minute, time.Hour} {
		e.clock.Set(T0.Add(d))
		rep := runOnce(t, s)
		require.Equal(t, 1, rep.Held, "after %s", d)
		require.Zero(t, rep.Waited+rep.Rescued+rep.GaveUp)
		r := e.step(t, "o-paused", 0)
		require.Equal(t, sas.Processing, r.ProcessState)
		require.Len(t, r.History, 2, "no write while paused")
	}

	resumedAt := T0.Add(time.Hour)
	_, err = e.mem.ResumeAgent(t.Context(), sas.PauseParams{Agent: "payments", Now: resumedAt, Actor: "op"})
	require.NoError(t, err)
	// The step had used half its timeout before the pause: it has the other
	// half after the resume.
	e.clock.Set(resumedAt.Add(stepTimeout/2 - time.Second))
	rep := runOnce(t, s)
	require.Zero(t, rep.DueFound+rep.Held, "not due yet: the pause does not count")

	// Due now: its agent reported the pick-up, so a failure, and with
	// MaxFailures 1 a give-up.
	e.clock.Set(resumedAt.Add(stepTimeout/2 + time.Second))
	rep = runOnce(t, s)
	require.Equal(t, 1, rep.GaveUp, "due at its deadline plus the pause")
}

func TestAdjustLeavesOutThePause(t *testing.T) {
	t.Parallel()
	p, r := T0.Add(10*time.Second), T0.Add(110*time.Second)
	ps := sas.Pauses{"a": {Agent: "a", PausedAt: p, ResumedAt: r}, "b": {Agent: "b", PausedAt: p}}
	for _, tc := range []struct {
		name  string
		start time.Time
		want  time.Duration // the deadline's credit
	}{
		{"claimed before the pause: all of it", T0, 100 * time.Second},
		{"claimed during the pause: from the claim", T0.Add(60 * time.Second), 50 * time.Second},
		{"claimed after the resume: none", T0.Add(150 * time.Second), 0},
	} {
		rec := sas.StepRecord{UpdatedAt: tc.start, DueAt: tc.start.Add(30 * time.Second)}
		got, hold := ps.Adjust(rec, "a")
		require.False(t, hold, tc.name)
		require.Equal(t, rec.DueAt.Add(tc.want), got.DueAt, tc.name)
	}
	_, hold := ps.Adjust(sas.StepRecord{UpdatedAt: T0}, "a", "b")
	require.True(t, hold, "any of the step's agents paused holds it")
	rec := sas.StepRecord{UpdatedAt: T0, DueAt: T0.Add(time.Second), CreatedAt: T0, WaitingSince: T0.Add(50 * time.Second)}
	got, hold := ps.Adjust(rec, "c")
	require.False(t, hold)
	require.Equal(t, rec, got, "another agent's pause gives no credit")
	got, _ = ps.Adjust(rec, "a")
	require.Equal(t, T0.Add(110*time.Second), got.WaitingSince, "the wait limit counts from the resume")
	require.Equal(t, T0.Add(100*time.Second), got.CreatedAt, "the total limit leaves out the pause")
}
