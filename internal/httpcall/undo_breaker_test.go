package httpcall_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// An endpoint's forward calls opening its breaker never refuse an undo
// (issue 28 §5): undos go through a breaker of their own.
func TestAnOpenBreakerDoesNotRefuseAnUndo(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	clock := newFakeClock()
	c := newCaller(t, breakerConfig(clock))
	openBreaker(t, c, svc, clock)

	svc.SetScript(reply{Status: 200, Body: `{"refunded":true}`})
	undo := newRequest(svc.URL(), clock)
	undo.Undo = true
	res, err := c.Call(context.Background(), undo)
	require.NoError(t, err, "the undo is sent although the forward breaker is open")
	require.Equal(t, 1, res.Tries)
	_, err = c.Call(context.Background(), newRequest(svc.URL(), clock))
	require.Error(t, err, "the forward calls are still refused")
}
