package supervisor

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)
	p := policy{MaxFailures: 3, BaseBackoff: 5 * time.Second, MaxBackoff: 15 * time.Minute}
	rec := func(state sas.ProcessState, lockedBy string, failures int, dueAt time.Time) sas.StepRecord {
		r := sas.StepRecord{OrderID: "o-1", Step: 0, ProcessState: state, LockedBy: lockedBy,
			FailureCount: failures, Attempt: 2, DueAt: dueAt}
		if lockedBy != "" {
			r.StartedAt = dueAt.Add(-time.Second) // its agent reported the pick-up: a passed deadline is a failure
		}
		return r
	}
	past, future := now.Add(-time.Second), now.Add(time.Millisecond)
	tests := []struct {
		name     string
		policy   policy
		rec      sas.StepRecord
		action   action
		failures int
		backoff  time.Duration
		reason   string
	}{
		{"processing expired, first failure", p, rec(sas.Processing, "s1", 0, past), rescue, 1, 5 * time.Second, "attempt 2 not finished by its deadline 2026-11-05T09:59:59Z (failure 1 of 3: retry in "},
		{"a deadline equal to now has passed", p, rec(sas.Processing, "s1", 0, now), rescue, 1, 5 * time.Second, "failure 1 of 3"},
		{"processing not yet expired", p, rec(sas.Processing, "s1", 0, future), skip, 0, 0, ""},
		{"second failure backs off longer", p, rec(sas.Processing, "s1", 1, past), rescue, 2, 10 * time.Second, "failure 2 of 3: retry in "},
		{"at the threshold: give up", p, rec(sas.Processing, "s1", 2, past), giveUp, 3, 0, "attempt 2 not finished by its deadline 2026-11-05T09:59:59Z (failure 3 of 3: giving up)"},
		{"past the threshold (lowered since): give up", p, rec(sas.Processing, "s1", 7, past), giveUp, 8, 0, "failure 8 of 3: giving up"},
		// A step never claimed by its pick-up deadline has not failed: sent
		// again, no failure counted, after as long as it has waited
		// unclaimed (here the second since its deadline).
		{"stranded pending", p, rec(sas.Pending, "", 0, past), rescue, 0, time.Second, "not claimed by its pick-up deadline 2026-11-05T09:59:59Z, unclaimed since 2026-11-05T09:59:59Z: nothing ran, not a failure"},
		{"stranded pending at the threshold: not given up", p, rec(sas.Pending, "", 2, past), rescue, 2, time.Second, "not claimed by its pick-up deadline"},
		{"pending that waits on an earlier step", p, rec(sas.Pending, "", 0, time.Time{}), skip, 0, 0, ""},
		{"pending, pick-up deadline ahead", p, rec(sas.Pending, "", 0, future), skip, 0, 0, ""},
		// An undo has its own retry policy (the default: 20 attempts, 10s
		// doubling to 5m), whatever the forward one says.
		{"undo expired", p, rec(sas.Compensating, "s1", 0, past), rescue, 1, 10 * time.Second, "undo attempt 2 not finished by its deadline"},
		{"undo handed back, not re-claimed: not a failure", p, rec(sas.Compensating, "", 19, past), rescue, 19, time.Second, "undo not re-claimed by its pick-up deadline"},
		{"undo past the forward threshold", p, rec(sas.Compensating, "s1", 2, past), rescue, 3, 40 * time.Second, "(failure 3 of 20: retry in "},
		{"undo, its wait capped", p, rec(sas.Compensating, "s1", 12, past), rescue, 13, 5 * time.Minute, "(failure 13 of 20: retry in "},
		{"undo at its threshold", p, rec(sas.Compensating, "s1", 19, past), giveUp, 20, 0, "undo attempt 2 not finished by its deadline 2026-11-05T09:59:59Z (failure 20 of 20: giving up)"},
		{"the step's own undo policy", stepPolicy(p, sas.StepLimits{Undo: sas.RetryPolicy{MaxAttempts: 4, InitialInterval: time.Second}}), rec(sas.Compensating, "s1", 2, past), rescue, 3, 4 * time.Second, "(failure 3 of 4: retry in "},
		{"the step's own undo threshold", stepPolicy(p, sas.StepLimits{Undo: sas.RetryPolicy{MaxAttempts: 4}}), rec(sas.Compensating, "s1", 3, past), giveUp, 4, 0, "(failure 4 of 4: giving up)"},
		{"a forward threshold does not apply to the undo", stepPolicy(p, sas.StepLimits{MaxFailures: 1}), rec(sas.Compensating, "s1", 0, past), rescue, 1, 10 * time.Second, "(failure 1 of 20: retry in "},
		{"processed is never due", p, rec(sas.Processed, "", 0, past), skip, 0, 0, ""},
		{"error waits for an operator", p, rec(sas.Error, "", 3, past), skip, 0, 0, ""},
		{"compensation failed waits for an operator", p, rec(sas.CompensationFailed, "", 3, past), skip, 0, 0, ""},
		{"threshold 1 gives up at once", policy{MaxFailures: 1, BaseBackoff: time.Second, MaxBackoff: time.Minute}, rec(sas.Processing, "s1", 0, past), giveUp, 1, 0, "failure 1 of 1: giving up"},
		// A step's own retry policy (workflow.Retry) overrides the
		// supervisor's; what it leaves zero comes from the supervisor.
		{"the step's threshold", stepPolicy(p, sas.StepLimits{MaxFailures: 5}), rec(sas.Processing, "s1", 2, past), rescue, 3, 20 * time.Second, "failure 3 of 5: retry in "},
		{"the step's threshold reached", stepPolicy(p, sas.StepLimits{MaxFailures: 5}), rec(sas.Processing, "s1", 4, past), giveUp, 5, 0, "failure 5 of 5: giving up"},
		{"the step's backoff", stepPolicy(p, sas.StepLimits{BaseBackoff: time.Second, MaxBackoff: 3 * time.Second}), rec(sas.Processing, "s1", 1, past), rescue, 2, 2 * time.Second, "failure 2 of 3: retry in "},
		{"the step's backoff, capped by its max", stepPolicy(p, sas.StepLimits{MaxFailures: 9, BaseBackoff: time.Second, MaxBackoff: 3 * time.Second}), rec(sas.Processing, "s1", 5, past), rescue, 6, 3 * time.Second, "retry in "},
		{"the step's base above the supervisor's max", stepPolicy(policy{MaxFailures: 3, BaseBackoff: time.Second, MaxBackoff: time.Second}, sas.StepLimits{BaseBackoff: 5 * time.Second}), rec(sas.Processing, "s1", 1, past), rescue, 2, 5 * time.Second, "retry in "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.policy.decide(tc.rec, tc.policy.limits(tc.rec.StepName, sas.StepLimits{}, false), now)
			require.Equal(t, tc.action, d.Action, "action")
			require.Equal(t, tc.failures, d.Failures, "failures")
			// tc.backoff is the policy's wait before jitter: the rescue's
			// is drawn from its upper half, in whole seconds.
			require.LessOrEqual(t, d.Backoff, tc.backoff, "backoff")
			require.GreaterOrEqual(t, d.Backoff, tc.backoff/2, "backoff")
			require.Zero(t, d.Backoff%time.Second, "whole seconds (an SQS delay)")
			require.Contains(t, d.Reason, tc.reason)
			switch {
			case d.Action == rescue && tc.rec.LockedBy == "":
				require.True(t, d.Lost, "a step never claimed: no failure")
				require.Contains(t, d.Reason, "sent again in "+d.Backoff.String())
				require.Equal(t, tc.rec.FailureCount, d.Failures, "the write counts no failure")
			case d.Action == rescue:
				require.Contains(t, d.Reason, "retry in "+d.Backoff.String()+")")
				fallthrough
			case d.Action != skip:
				require.Equal(t, tc.rec.FailureCount+1, d.Failures, "the write bumps FailureCount once")
			}
		})
	}
}

// stepPolicy is p with limits for the step of TestDecide's records.
func stepPolicy(p policy, l sas.StepLimits) policy {
	p.Steps = map[string]sas.StepLimits{"": l}
	return p
}

// TestDecideWaitsForAnUnstartedRequest: a held step past its deadline
// whose pick-up was never reported may still be queued. It is waited on
// (no failure, no second request) until its delivery horizon, the queue's
// retention from the first deadline that passed; past it the request can no
// longer be delivered and the step is re-driven as lost, still without a
// failure. A reported pick-up makes a passed deadline a failure. A step's
// overall limit overrides both.
func TestDecideWaitsForAnUnstartedRequest(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)
	const horizon = 96 * time.Hour
	p := policy{MaxFailures: 3, BaseBackoff: 5 * time.Second, MaxBackoff: 15 * time.Minute, PickupTimeout: time.Minute,
		Horizon: horizon, Steps: map[string]sas.StepLimits{
			"charge": {Timeout: 30 * time.Second},
			"ship":   {Timeout: 30 * time.Second, TotalLimit: time.Hour},
		}}
	rec := func(step string, state sas.ProcessState, lockedBy string, dueAt, waitingSince time.Time) sas.StepRecord {
		return sas.StepRecord{OrderID: "o-1", StepName: step, ProcessState: state, LockedBy: lockedBy, Attempt: 1,
			DueAt: dueAt, CompleteBy: dueAt, WaitingSince: waitingSince, CreatedAt: now.Add(-5 * time.Minute), FailureCount: 1}
	}
	started := func(r sas.StepRecord) sas.StepRecord { r.StartedAt = r.DueAt.Add(-30 * time.Second); return r }
	past := now.Add(-time.Second)
	tests := []struct {
		name     string
		rec      sas.StepRecord
		action   action
		failures int
		until    time.Time
		reason   string
	}{
		{"no pick-up reported: wait to the horizon", rec("charge", sas.Processing, "s1", past, time.Time{}), wait, 1, past.Add(horizon), "no pick-up reported: its request may still be queued"},
		{"waited already: the horizon counts from the first deadline", rec("charge", sas.Processing, "s1", past, now.Add(-time.Hour)), wait, 1, now.Add(-time.Hour).Add(horizon), "delivery horizon"},
		{"past the horizon: lost, re-driven, no failure", rec("charge", sas.Processing, "s1", past, now.Add(-horizon)), rescue, 1, time.Time{}, "the request was lost; re-driven, not a failure"},
		{"an undo waits too", rec("charge", sas.Compensating, "s1", past, time.Time{}), wait, 1, past.Add(horizon), "undo attempt 1"},
		{"pick-up reported: a failure", started(rec("charge", sas.Processing, "s1", past, time.Time{})), rescue, 2, time.Time{}, "failure 2 of 3"},
		{"pick-up reported after a wait: a failure", started(rec("charge", sas.Processing, "s1", past, now.Add(-time.Hour))), rescue, 2, time.Time{}, "failure 2 of 3"},
		{"an unheld step never waits: it is sent again, not counted", rec("charge", sas.Pending, "", past, time.Time{}), rescue, 1, time.Time{}, "not claimed by its pick-up deadline"},
		{"the overall limit caps a wait", func() sas.StepRecord {
			r := rec("ship", sas.Processing, "s1", past, time.Time{})
			r.CreatedAt = now.Add(-time.Hour + 10*time.Second)
			return r
		}(), wait, 1, now.Add(10 * time.Second), ""},
		{"past the overall limit: give up, started or not", func() sas.StepRecord {
			r := rec("ship", sas.Processing, "s1", past, time.Time{})
			r.CreatedAt = now.Add(-time.Hour)
			return r
		}(), giveUp, 2, time.Time{}, "overall limit of 1h0m0s since the order was submitted has passed"},
		{"not due: skip", rec("charge", sas.Processing, "s1", now.Add(time.Second), time.Time{}), skip, 0, time.Time{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := p.decide(tc.rec, p.limits(tc.rec.StepName, sas.StepLimits{}, false), now)
			require.Equal(t, tc.action, d.Action, "action: %s", d.Reason)
			require.Contains(t, d.Reason, tc.reason)
			require.True(t, tc.until.Equal(d.Until), "until %s, want %s", d.Until, tc.until)
			if tc.action != skip {
				require.Equal(t, tc.failures, d.Failures, "failures")
			}
			require.Equal(t, tc.action == rescue && tc.rec.StartedAt.IsZero(), d.Lost, "lost")
			if d.Lost && tc.rec.LockedBy != "" {
				require.Zero(t, d.Backoff, "a lost request is re-driven at once")
			}
		})
	}
}

// TestRescueBackoffIsJittered: the steps one outage stalled together are
// re-driven apart, each by a draw from the upper half of its policy's wait
// seeded by its step and attempt (sas.JitterSeed), the same draw the
// scheduler makes for a reported failure; the same record always draws the
// same wait, so a retried sweep decides the same.
func TestRescueBackoffIsJittered(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)
	p := policy{MaxFailures: 10, BaseBackoff: 5 * time.Second, MaxBackoff: 15 * time.Minute}
	lim := p.limits("", sas.StepLimits{}, false)
	for failures := 0; failures < 9; failures++ {
		ceiling := sas.RetryPolicy{InitialInterval: 5 * time.Second, MaxInterval: 15 * time.Minute}.Backoff(failures + 1)
		seen := map[time.Duration]int{}
		for i := range 100 {
			rec := sas.StepRecord{OrderID: fmt.Sprintf("o-%d", i), Step: 1, ProcessState: sas.Processing, LockedBy: "s1",
				FailureCount: failures, Attempt: failures + 1, DueAt: now.Add(-time.Second), StartedAt: now.Add(-time.Minute)}
			d := p.decide(rec, lim, now)
			require.Equal(t, rescue, d.Action)
			require.GreaterOrEqual(t, d.Backoff, ceiling/2, "failure %d", failures+1)
			require.LessOrEqual(t, d.Backoff, ceiling, "failure %d", failures+1)
			require.Zero(t, d.Backoff%time.Second)
			require.Equal(t, d.Backoff, p.decide(rec, lim, now).Backoff, "the same record draws the same")
			pol := sas.RetryPolicy{InitialInterval: lim.BaseBackoff, MaxInterval: lim.MaxBackoff}
			require.Equal(t, pol.Interval(failures+1, sas.JitterSeed(rec.Key(), rec.Attempt)), d.Backoff,
				"the scheduler's draw for the same failure")
			seen[d.Backoff]++
		}
		if ceiling >= 10*time.Second {
			require.Greater(t, len(seen), 3, "failure %d: 100 stalled steps spread over the range, not re-driven at once", failures+1)
		}
	}
}

// TestAStepNeverClaimedIsSentAgainLaterEachTime: a step handed back and not
// claimed by its pick-up deadline (its re-drive waited in a busy queue, or
// died with a scheduler) counts no failure however often it is re-driven,
// and each re-drive waits as long as the step has waited unclaimed already
// (WaitingSince, from its first pick-up deadline passed), at most the
// leg's longest retry interval: a backlog of an hour costs each step a few
// messages, not one per pick-up timeout (docs/protocol.md, "A step never
// claimed has not failed").
func TestAStepNeverClaimedIsSentAgainLaterEachTime(t *testing.T) {
	t.Parallel()
	first := time.Date(2026, 11, 5, 10, 0, 0, 0, time.UTC)
	const pickup = 10 * time.Second
	p := policy{MaxFailures: 3, BaseBackoff: 5 * time.Second, MaxBackoff: 15 * time.Minute, PickupTimeout: pickup}
	for _, undo := range []bool{false, true} {
		state, limit := sas.Pending, 15*time.Minute // the step's MaxBackoff
		if undo {
			state, limit = sas.Compensating, 5*time.Minute // the undo's default MaxInterval
		}
		rec := sas.StepRecord{OrderID: "o-1", Step: 1, ProcessState: state, Attempt: 2, FailureCount: 2, DueAt: first}
		now, prev, redrives := first, time.Duration(-1), 0
		for now.Before(first.Add(time.Hour)) {
			d := p.decide(rec, p.limits("", sas.StepLimits{}, false), now)
			require.Equal(t, rescue, d.Action, "%s", d.Reason)
			require.True(t, d.Lost)
			require.Equal(t, 2, d.Failures, "never counted, however often re-driven")
			require.True(t, d.Since.Equal(first), "unclaimed since its first deadline passed")
			require.Greater(t, d.Backoff, prev, "each re-drive waits longer")
			require.LessOrEqual(t, d.Backoff, limit, "at most the leg's longest interval")
			redrives++
			prev = d.Backoff
			// The rescue's write: Pending (or the undo unheld) again, due
			// at its next pick-up deadline, keeping how long it has waited.
			rec.WaitingSince, rec.DueAt = d.Since, now.Add(d.Backoff+pickup)
			now = rec.DueAt
			if prev == limit {
				break
			}
		}
		require.Less(t, redrives, 9, "re-drives before the interval's cap: a handful, not one per pick-up timeout")
		require.Equal(t, limit, prev, "the cap is reached within the hour")
	}
}
