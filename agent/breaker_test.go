package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
)

// A step's breaker opens on its dependency's failures and then refuses runs
// without calling the step (a transient outcome, CircuitOpen); a step that
// depends on something else keeps its own breaker, closed.
func TestStepBreakerOpensPerDependency(t *testing.T) {
	t.Parallel()
	calls := map[string]int{}
	fail := func(name string) agent.Func {
		return func(context.Context, agent.Request) (any, error) {
			calls[name]++
			if name == "reserve" {
				return nil, errors.New("HTTP 503")
			}
			return "ok", nil
		}
	}
	a := agent.New("shop", agent.Tries(1), agent.Breaker(agent.BreakerConfig{Window: time.Hour, OpenFor: time.Hour})).
		Step("reserve", fail("reserve"), nil, agent.DependsOn("inventory-api")).
		Step("notify", fail("notify"), nil, agent.DependsOn("mail-api"))
	for range agent.DefaultBreakerThreshold {
		require.Equal(t, agent.StatusTransient, a.Run(t.Context(), agent.Request{OrderID: "o", Step: "reserve"}).Status)
	}
	out := a.Run(t.Context(), agent.Request{OrderID: "o", Step: "reserve"})
	require.Equal(t, agent.StatusTransient, out.Status)
	require.ErrorIs(t, out.Err, agent.ErrCircuitOpen)
	require.Equal(t, "CircuitOpen", agent.ErrorName(out.Err))
	require.Equal(t, agent.DefaultBreakerThreshold, calls["reserve"], "the refused run was not made")

	require.Equal(t, agent.StatusDone, a.Run(t.Context(), agent.Request{OrderID: "o", Step: "notify"}).Status, "another dependency's breaker")

	off := agent.New("shop", agent.Tries(1), agent.Breaker(agent.BreakerConfig{FailureThreshold: -1})).Step("reserve", fail("reserve"), nil)
	for range 2 * agent.DefaultBreakerThreshold {
		require.NotErrorIs(t, off.Run(t.Context(), agent.Request{OrderID: "o", Step: "reserve"}).Err, agent.ErrCircuitOpen, "no breaker")
	}
}
