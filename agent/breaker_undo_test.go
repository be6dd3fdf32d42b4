package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
)

// The breaker counts failures of the dependency (issue 28 §5): a step's
// own RetryAfter (a poll told "not yet") is the service answering, and
// never opens it, so another step of the same dependency still runs; and
// the forward calls' failures never refuse an undo, which has a breaker of
// its own.
func TestBreakerCountsTheDependencyNotAPollNorRefusesAnUndo(t *testing.T) {
	t.Parallel()
	undos := 0
	poll := func(context.Context, agent.Request) (any, error) {
		return nil, agent.RetryAfter(time.Minute, errors.New("approval pending"))
	}
	down := func(context.Context, agent.Request) (any, error) { return nil, errors.New("HTTP 503") }
	undo := func(context.Context, agent.Request) (any, error) { undos++; return nil, nil }
	a := agent.New("bank", agent.Tries(1), agent.Breaker(agent.BreakerConfig{Window: time.Hour, OpenFor: time.Hour})).
		Step("await", poll, nil).
		Step("deposit", down, undo).
		Step("check", func(context.Context, agent.Request) (any, error) { return "ok", nil }, nil)

	for range 3 * agent.DefaultBreakerThreshold {
		out := a.Run(t.Context(), agent.Request{OrderID: "o-1", Step: "await"})
		require.NotErrorIs(t, out.Err, agent.ErrCircuitOpen, "a poll's RetryAfter is no failure of the bank")
	}
	require.Equal(t, agent.StatusDone, a.Run(t.Context(), agent.Request{OrderID: "o-2", Step: "check"}).Status, "the bank's breaker is closed")

	opened := false
	for range 100 { // until the failures are the window's rate (the polls were healthy runs)
		if opened = errors.Is(a.Run(t.Context(), agent.Request{OrderID: "o-3", Step: "deposit"}).Err, agent.ErrCircuitOpen); opened {
			break
		}
	}
	require.True(t, opened, "the bank is down: its breaker opened")
	out := a.Run(t.Context(), agent.Request{OrderID: "o-4", Step: "deposit", Undo: true})
	require.Equal(t, agent.StatusDone, out.Status, "another order's deposit is still undone")
	require.Equal(t, 1, undos)
}
