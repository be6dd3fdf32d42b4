package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// crash is what a simulated kill panics with: the supervisor's process ends
// there, and whatever it held in memory is gone.
type crash struct{ where string }

// crashStore kills the supervisor around its writes, once.
type crashStore struct {
	*hookStore
	afterGiveUp, beforeSettle atomic.Bool
	settleFails               atomic.Bool
}

func (c *crashStore) GiveUp(ctx context.Context, p sas.GiveUpParams) (sas.StepRecord, error) {
	r, err := c.hookStore.GiveUp(ctx, p)
	if err == nil && c.afterGiveUp.CompareAndSwap(true, false) {
		panic(crash{"after the give-up write"})
	}
	return r, err
}

func (c *crashStore) Settle(ctx context.Context, p sas.SettleParams) (sas.StepRecord, error) {
	if c.beforeSettle.CompareAndSwap(true, false) {
		panic(crash{"before the settle write"})
	}
	if c.settleFails.CompareAndSwap(true, false) {
		return sas.StepRecord{}, errors.New("dynamodb: throttled")
	}
	return c.hookStore.Settle(ctx, p)
}

// crashAlerter kills the supervisor right after an alert was delivered, or
// fails alerts, once.
type crashAlerter struct {
	sas.Alerter
	afterAlert, fail atomic.Bool
}

func (c *crashAlerter) Alert(ctx context.Context, a sas.Alert) error {
	if c.fail.CompareAndSwap(true, false) {
		return errors.New("sns: topic unreachable")
	}
	err := c.Alerter.Alert(ctx, a)
	if err == nil && c.afterAlert.CompareAndSwap(true, false) {
		panic(crash{"after the alert"})
	}
	return err
}

// runCrashing runs one sweep of a fresh supervisor and reports whether it
// was killed.
func runCrashing(t *testing.T, s *Supervisor) (killed bool) {
	t.Helper()
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(crash); !ok {
				panic(v)
			}
			killed = true
		}
	}()
	_, _ = s.RunOnce(t.Context())
	return false
}

// TestGiveUpEffectsSurviveACrashAtEveryPoint kills (or fails) the
// supervisor at every point between its give-up write and its settle write.
// Whatever the point, later sweeps by other instances raise the alert and
// send the compensate request: each alert carries the give-up's one id, and
// once it is settled nothing more goes out.
func TestGiveUpEffectsSurviveACrashAtEveryPoint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		arm  func(*crashStore, *crashAlerter, *env)
		// killed: the first run dies; otherwise it returns an error.
		killed bool
	}{
		{"killed after the give-up write, before any send", func(s *crashStore, _ *crashAlerter, _ *env) { s.afterGiveUp.Store(true) }, true},
		{"killed after the alert, before the compensate send", func(_ *crashStore, a *crashAlerter, _ *env) { a.afterAlert.Store(true) }, true},
		{"killed after the compensate send, before the settle write", func(s *crashStore, _ *crashAlerter, _ *env) { s.beforeSettle.Store(true) }, true},
		{"the compensate send fails", func(_ *crashStore, _ *crashAlerter, e *env) { e.failSends(errors.New("sqs: throttled")) }, false},
		{"the alert fails", func(_ *crashStore, a *crashAlerter, _ *env) { a.fail.Store(true) }, false},
		{"the settle write fails", func(s *crashStore, _ *crashAlerter, _ *env) { s.settleFails.Store(true) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cs := &crashStore{hookStore: e.store}
			ca := &crashAlerter{Alerter: e.alerts}
			sup := func() *Supervisor {
				return e.supervisor(t, func(c *Config) { c.MaxFailures = 1; c.Store = cs; c.Alerter = ca })
			}
			e.submitClaimed(t, "o-c", 1)
			e.clock.Set(T0.Add(stepTimeout))
			tc.arm(cs, ca, e)

			require.Equal(t, tc.killed, runCrashing(t, sup()), "the first run dies or reports its failure")
			e.failSends(nil)
			r := e.step(t, "o-c", 0)
			require.Equal(t, sas.Error, r.ProcessState, "the give-up write happened")

			// Not before OwedRetry: a sweep leaves a fresh give-up to the
			// run that made it.
			e.clock.Advance(DefaultOwedRetry - time.Second)
			before := len(e.alerts.Alerts())
			runOnce(t, sup())
			require.Len(t, e.alerts.Alerts(), before)

			e.clock.Advance(time.Second)
			rep := runOnce(t, sup())
			require.Equal(t, 1, rep.Redriven, "another instance re-sends what is owed")
			require.Equal(t, 1, rep.Awaiting, "sent: the compensate request waits for the compensation it asks for")
			require.Zero(t, rep.Settled)
			require.Equal(t, []sas.Effect{sas.EffectAlert, sas.EffectCompensate}, e.step(t, "o-c", 0).Owes)

			// The scheduler starts the compensation and settles the give-up.
			_, err := e.store.Settle(t.Context(), sas.SettleParams{Key: r.Key(), State: r.ProcessState, Attempt: r.Attempt})
			require.NoError(t, err)
			require.Empty(t, e.step(t, "o-c", 0).Owes)

			e.clock.Advance(time.Hour)
			rep = runOnce(t, sup())
			require.Zero(t, rep.Redriven, "settled: nothing more goes out")

			al := e.alerts.Alerts()
			require.NotEmpty(t, al, "the operator is alerted")
			for _, a := range al {
				require.Equal(t, al[0], a, "a re-driven alert is the same alert")
			}
			require.Equal(t, "o-c/0/Error/1", al[0].ID)
			require.Equal(t, r.LastError, al[0].Reason)
			msgs := e.queue.take(t)
			require.NotEmpty(t, msgs, "the compensation is requested")
			for _, m := range msgs {
				require.Equal(t, sas.KindCompensate, m.Kind)
				require.Equal(t, msgs[0], m, "a re-sent request is the same request")
			}
			require.LessOrEqual(t, len(al), 2, "at most one re-send")
			require.LessOrEqual(t, len(msgs), 2)
		})
	}
}

// TestAnUnansweredCompensateIsSentAgain (issue 29, N6): the supervisor's
// compensate request is lost after it went out (dead-lettered in an outage
// of the store, say). The give-up stays owed until the compensation starts,
// so a sweep at CompensateRecheck sends the same request again, and keeps
// doing so each recheck, never before; once the scheduler has started the
// compensation (its claim settles the give-up), nothing more goes out.
func TestAnUnansweredCompensateIsSentAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t, func(c *Config) { c.MaxFailures = 1 })
	e.submitClaimed(t, "o-n6", 1)
	e.clock.Set(T0.Add(stepTimeout))
	rep := runOnce(t, s)
	require.Equal(t, 1, rep.Awaiting, "%+v", rep)
	first := e.queue.take(t)
	require.Len(t, first, 1)
	require.Equal(t, sas.KindCompensate, first[0].Kind)
	r := e.step(t, "o-n6", 0)
	require.Equal(t, sas.Error, r.ProcessState)
	require.True(t, r.OwesCompensate(), "sent, not yet answered")
	// The request is lost: nobody ever handles it.

	e.clock.Advance(DefaultCompensateRecheck - time.Second)
	rep = runOnce(t, s)
	require.Zero(t, rep.Redriven, "never before the recheck")
	require.Empty(t, e.queue.take(t))

	e.clock.Advance(time.Second)
	rep = runOnce(t, s)
	require.Equal(t, 1, rep.Redriven, "%+v", rep)
	require.Equal(t, 1, rep.Awaiting)
	again := e.queue.take(t)
	require.Equal(t, first, again, "the same request again")
	alerts := e.alerts.Alerts()
	require.Len(t, alerts, 2)
	require.Equal(t, alerts[0].ID, alerts[1].ID, "its alert repeats under its one id")

	// Answered: the scheduler's compensation claim settles the give-up.
	_, err := e.store.Settle(t.Context(), sas.SettleParams{Key: r.Key(), State: sas.Error, Attempt: r.Attempt})
	require.NoError(t, err)
	e.clock.Advance(24 * time.Hour)
	rep = runOnce(t, s)
	require.Zero(t, rep.Redriven)
	require.Empty(t, e.queue.take(t))
}

// TestFailedAlertHoldsTheCompensationBack: the alert goes before the
// compensate request (owed.go says why), so a failed alert leaves both owed.
func TestFailedAlertHoldsTheCompensationBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ca := &crashAlerter{Alerter: e.alerts}
	ca.fail.Store(true)
	s := e.supervisor(t, func(c *Config) { c.MaxFailures = 1; c.Alerter = ca })
	e.submitClaimed(t, "o-al", 1)
	e.clock.Set(T0.Add(stepTimeout))
	rep, err := s.RunOnce(t.Context())
	require.ErrorContains(t, err, "sns: topic unreachable")
	require.ErrorContains(t, err, "still owed")
	require.Equal(t, 1, rep.AlertFailures)
	require.Equal(t, 1, rep.Owed)
	require.Empty(t, e.queue.take(t))
	require.Equal(t, []sas.Effect{sas.EffectAlert, sas.EffectCompensate}, e.step(t, "o-al", 0).Owes)
	require.Contains(t, e.logs.String(), "topic unreachable", "and the failure is in the log")
	require.Zero(t, rep.OwedOldestAge, "given up this very run")

	// Still failing four minutes later: owed and older, which the
	// OwedTooLong alarm reads (internal/metrics.OwedOldestAge).
	var out bytes.Buffer
	ca.fail.Store(true) // fails once per Store
	s = e.supervisor(t, func(c *Config) { c.MaxFailures = 1; c.Alerter = ca; c.Metrics = &out })
	e.clock.Set(T0.Add(stepTimeout + 4*time.Minute))
	rep, err = s.RunOnce(t.Context())
	require.Error(t, err, "%+v", rep)
	require.Equal(t, 1, rep.Owed, "%+v", rep)
	require.Equal(t, 4*time.Minute, rep.OwedOldestAge)
	var line map[string]any
	require.NoError(t, json.Unmarshal(out.Bytes(), &line))
	require.Equal(t, float64(1), line["OwedEffects"])
	require.Equal(t, float64(240), line["OwedOldestAgeSeconds"])

	// Delivered: nothing left owed, and the age is back to zero.
	out.Reset()
	e.clock.Set(T0.Add(stepTimeout + 5*time.Minute))
	rep, err = s.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, rep.Owed)
	require.NoError(t, json.Unmarshal(out.Bytes(), &line))
	require.Equal(t, float64(0), line["OwedEffects"])
	require.Equal(t, float64(0), line["OwedOldestAgeSeconds"])
}

// TestCompensationClaimBeforeSettleLeavesNothingOwed: the scheduler claims
// the given-up step's undo between the supervisor's sends and its settle
// write. The settle loses the race, harmlessly: the claim settled it.
func TestCompensationClaimBeforeSettleLeavesNothingOwed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := &crashStore{hookStore: e.store}
	s := e.supervisor(t, func(c *Config) { c.MaxFailures = 1; c.Store = claimingStore{cs, e, t} })
	e.submitClaimed(t, "o-cl", 1)
	e.clock.Set(T0.Add(stepTimeout))
	rep := runOnce(t, s)
	require.Equal(t, 1, rep.LostRaces)
	require.Zero(t, rep.Settled)
	r := e.step(t, "o-cl", 0)
	require.Equal(t, sas.Compensating, r.ProcessState)
	require.Empty(t, r.Owes)
	e.clock.Advance(stepTimeout - time.Second) // the undo's lease still runs
	require.Zero(t, runOnce(t, s).Redriven)
	require.Len(t, e.alerts.Alerts(), 1)
}

// claimingStore claims the undo of the step about to be settled.
type claimingStore struct {
	*crashStore
	e *env
	t *testing.T
}

func (c claimingStore) Settle(ctx context.Context, p sas.SettleParams) (sas.StepRecord, error) {
	c.e.claim(c.t, p.Key, sas.Error, p.Attempt)
	return c.crashStore.Settle(ctx, p)
}
