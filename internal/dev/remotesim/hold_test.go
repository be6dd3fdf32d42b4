package remotesim_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/remotesim"
)

// A held order's call waits, unrecorded, until its release; other orders'
// calls pass it; a client that gives up on a held call leaves no trace.
func TestHoldKeepsAnOrdersCallsUntilReleased(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Seed: 1})
	release := h.sim.Hold(func(orderID string) bool { return orderID == "held" })

	done := make(chan reply, 1)
	go func() {
		r, err := h.call(context.Background(), "/payments", "held:pay", payment("held", 1))
		if err != nil {
			r.status = -1
		}
		done <- r
	}()
	eventually(t, func() bool { return h.sim.Held() == 1 }, "the call is held")

	other := h.mustCall(t, "/payments", "other:pay", payment("other", 1))
	require.Equal(t, http.StatusCreated, other.status, "another order passes the held one")
	require.Zero(t, h.sim.EffectCount("held:pay"))
	calls, _ := h.sim.Calls()
	require.Len(t, calls, 1, "a held call is not recorded")

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		_, err := h.call(ctx, "/payments", "held:refund", payment("held", 2))
		gone <- err
	}()
	eventually(t, func() bool { return h.sim.Held() == 2 }, "the second call is held")
	cancel()
	require.Error(t, <-gone)
	eventually(t, func() bool { return h.sim.Held() == 1 }, "the call whose client went is no longer held")

	release()
	release() // twice is safe
	r := <-done
	require.Equal(t, http.StatusCreated, r.status)
	require.Equal(t, 1, h.sim.EffectCount("held:pay"))
	require.Zero(t, h.sim.EffectCount("held:refund"), "the call given up while held never reached the service")
	require.Zero(t, h.sim.Held())
}
