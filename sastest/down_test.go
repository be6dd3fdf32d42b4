package sastest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/sastest"
	"github.com/sas-go/sas/workflow"
)

// A Go step whose dependency is always down, with every default (the
// agent's tries, the deployment's three attempts and backoff): the step
// fails in its attempts and their backoff, not in a wait limit, and the
// dependency sees at most tries × attempts calls (issue 19: it saw 2,116
// over 33 minutes before).
func TestDependencyDownFailsWithinItsRetryPolicy(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	down := func(context.Context, agent.Request) (any, error) {
		calls.Add(1)
		return nil, errors.New("connection refused")
	}
	agents := []*agent.Agent{
		agent.New("airline").Step("flight", ok, ok),
		agent.New("hotels").Step("hotel", down, ok),
		agent.New("payments").Step("pay", ok, nil),
	}
	env := sastest.New(t, trip, agents...)
	res := env.Run("trip", "order-1", nil)

	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Equal(t, []string{"hotel", "flight"}, res.Undone, "newest first, the given-up step too: its effect may exist")
	hotel, _ := res.Step("hotel")
	require.Equal(t, sastest.StateCompensated, hotel.State)
	// Attempts that reached the Func: the last may have been refused by
	// the agent's breaker, which counts as a failed attempt all the same.
	require.LessOrEqual(t, hotel.Attempts, sastest.DefaultMaxFailures)
	require.Less(t, res.Took, time.Minute, "well under two minutes of virtual time: attempts × (timeout + backoff)")

	const bound = agent.DefaultTries * sastest.DefaultMaxFailures
	require.LessOrEqual(t, calls.Load(), int64(bound), "at most tries × attempts calls of the dependency")
	require.Positive(t, calls.Load())
	t.Logf("dependency down: %d calls, Error and compensated after %s of virtual time\n%s", calls.Load(), res.Took, strings.Join(res.History, "\n"))

	// Every failure was counted as one, by the scheduler on the agent's
	// word; nothing waited.
	var failed, waits int
	for _, h := range res.History {
		switch {
		case strings.Contains(h, "may still be waiting"):
			waits++
		case strings.HasPrefix(h, "hotel Processing→") && strings.Contains(h, "failed"):
			failed++
		}
	}
	require.Zero(t, waits, "no wait: the failing step's own retries are not a backlog\n%s", strings.Join(res.History, "\n"))
	require.Equal(t, sastest.DefaultMaxFailures, failed, strings.Join(res.History, "\n"))
	require.Len(t, res.Alerts, 1)
	require.Contains(t, res.Alerts[0], "hotel: Error: attempt 3 failed")
}

// The breaker the requests of an agent share: once the dependency has
// failed enough, its calls stop, and what the breaker refuses is a failed
// attempt at once, not a wait. Twenty orders against a dead dependency
// cost far fewer than tries × attempts calls each.
func TestBreakerBoundsCallsAcrossOrders(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	down := func(context.Context, agent.Request) (any, error) {
		calls.Add(1)
		return nil, errors.New("503")
	}
	wf := []workflow.Workflow{{Name: "one", Steps: []workflow.Step{
		{Name: "call", Agent: "remote", Action: "call", Timeout: workflow.Duration(10 * time.Second)},
	}}}
	env := sastest.New(t, wf, agent.New("remote").Step("call", down, nil, agent.DependsOn("remote-api")))
	const orders = 20
	for i := range orders {
		res := env.Run("one", "o-"+string(rune('a'+i)), nil)
		require.Equal(t, sastest.StatusFailed, res.Status)
		for _, h := range res.History {
			require.NotContains(t, h, "may still be waiting")
		}
	}
	require.Less(t, calls.Load(), int64(orders*agent.DefaultTries*sastest.DefaultMaxFailures/2),
		"the breaker keeps the dependency from every order's tries")
	t.Logf("%d orders, %d calls of the dead dependency (%.2f per order)", orders, calls.Load(), float64(calls.Load())/orders)
}

// An undo has its own retry policy, which rides out an outage where a
// step fails fast: the hotel refuses, so the flight is cancelled, but the
// airline is down for ten minutes, far longer than the forward policy
// (three attempts, about 15s of backoff) would wait. The cancellation is
// tried again until the airline is back, and the order ends Compensated,
// not CompensationFailed with an operator left to cancel by hand.
func TestUndoRidesOutAnOutageLongerThanTheForwardPolicy(t *testing.T) {
	t.Parallel()
	const outage = 10 * time.Minute
	var env *sastest.Env
	var start time.Time
	var cancels atomic.Int64
	cancel := func(context.Context, agent.Request) (any, error) {
		cancels.Add(1)
		if env.Now().Before(start.Add(outage)) {
			return nil, errors.New("the airline is down")
		}
		return "cancelled", nil
	}
	refuse := func(context.Context, agent.Request) (any, error) {
		return nil, agent.Permanent(errors.New("no rooms"))
	}
	env = sastest.New(t, trip,
		agent.New("airline").Step("flight", ok, cancel),
		agent.New("hotels").Step("hotel", refuse, ok),
		agent.New("payments").Step("pay", ok, nil),
	)
	start = env.Now()
	res := env.Run("trip", "order-1", nil)

	require.Equal(t, sastest.StatusCompensated, res.Status, strings.Join(res.History, "\n"))
	flight, _ := res.Step("flight")
	require.Equal(t, sastest.StateCompensated, flight.State)
	require.Greater(t, res.Took, outage, "it waited for the airline")
	require.Less(t, res.Took, outage+6*time.Minute, "and ran within the undo policy's longest wait (5m) of its return")
	var undoFailures int
	for _, h := range res.History {
		if strings.HasPrefix(h, "flight Compensating→") && strings.Contains(h, "failed") {
			undoFailures++
		}
	}
	require.Greater(t, undoFailures, sastest.DefaultMaxFailures, "more failed undo attempts than the forward policy allows")
	require.Less(t, undoFailures, 20)
	require.Len(t, res.Alerts, 1, "the refusal's alert only: nothing for an operator to undo")
	t.Logf("undo rode out a %s outage: %d failed attempts, %d calls, compensated after %s", outage, undoFailures, cancels.Load(), res.Took)
}

// An undo whose dependency never comes back is given up within its
// policy's bound (20 attempts, the wait doubling from 10s to 5m: at most
// 75 minutes of waits plus the attempts), CompensationFailed, and an
// operator alerted.
func TestUndoDownForeverFailsWithinItsPolicy(t *testing.T) {
	t.Parallel()
	var cancels atomic.Int64
	down := func(context.Context, agent.Request) (any, error) {
		cancels.Add(1)
		return nil, errors.New("the airline is down")
	}
	refuse := func(context.Context, agent.Request) (any, error) {
		return nil, agent.Permanent(errors.New("no rooms"))
	}
	env := sastest.New(t, trip,
		agent.New("airline").Step("flight", ok, down),
		agent.New("hotels").Step("hotel", refuse, ok),
		agent.New("payments").Step("pay", ok, nil),
	)
	res := env.Run("trip", "order-1", nil)

	require.Equal(t, sastest.StatusCompensationFailed, res.Status, strings.Join(res.History, "\n"))
	flight, _ := res.Step("flight")
	require.Equal(t, sastest.StateCompensationFailed, flight.State)
	require.Len(t, res.Alerts, 2)
	require.Contains(t, res.Alerts[1], "flight: CompensationFailed")
	require.Contains(t, res.Alerts[1], "(failure 20 of 20: giving up)")
	// The bound: the waits' ceilings (75m10s) and 20 attempts of at most the
	// step's 30s timeout; it fails fast here, so it is well inside.
	require.Less(t, res.Took, 75*time.Minute+10*time.Second+20*30*time.Second)
	require.Greater(t, res.Took, 35*time.Minute, "it rode out more than half the ceilings' sum before giving up")
	require.LessOrEqual(t, cancels.Load(), int64(20*agent.DefaultTries), "at most tries × attempts calls")
	t.Logf("undo down for good: CompensationFailed after %s, %d calls", res.Took, cancels.Load())
}
