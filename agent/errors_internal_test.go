package agent

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/sas"
)

// Classification reads the chain (errors.As, errors.Is), so wrapped errors
// keep their class; Permanent wins over RetryAfter; an error the HTTP
// client already retried is not retried again in-process.
func TestClassify(t *testing.T) {
	t.Parallel()
	cause := errors.New("boom")
	for name, tc := range map[string]struct {
		err   error
		class class
		wait  time.Duration
	}{
		"plain":                    {cause, transient, 0},
		"permanent":                {Permanent(cause), permanent, 0},
		"permanent, wrapped":       {fmt.Errorf("reserving: %w", Permanent(cause)), permanent, 0},
		"permanent(nil)":           {Permanent(nil), permanent, 0},
		"retry after":              {RetryAfter(time.Minute, cause), later, time.Minute},
		"retry after, wrapped":     {fmt.Errorf("a: %w", fmt.Errorf("b: %w", RetryAfter(time.Second, cause))), later, time.Second},
		"retry after(nil)":         {RetryAfter(time.Second, nil), later, time.Second},
		"negative wait":            {RetryAfter(-time.Second, cause), later, 0},
		"permanent over retry":     {Permanent(RetryAfter(time.Minute, cause)), permanent, 0},
		"retry inside permanent":   {RetryAfter(time.Minute, Permanent(cause)), permanent, 0},
		"joined":                   {errors.Join(cause, RetryAfter(time.Minute, nil)), later, time.Minute},
		"client out of tries":      {fmt.Errorf("calling: %w after 5 tries: %w", httpcall.ErrTransient, cause), spent, 0},
		"client at the deadline":   {fmt.Errorf("calling: %w", httpcall.ErrDeadline), spent, 0},
		"client's 4xx, as Do says": {doError(fmt.Errorf("calling: %w: HTTP 404", httpcall.ErrPermanent)), permanent, 0},
	} {
		c, d := classify(tc.err)
		require.Equal(t, tc.class, c, name)
		require.Equal(t, tc.wait, d, name)
	}
	require.Equal(t, "boom", Permanent(cause).Error(), "the reason is the error's text")
	require.ErrorIs(t, Permanent(cause), cause)
	require.ErrorIs(t, RetryAfter(time.Second, cause), cause)
	require.EqualError(t, RetryAfter(time.Second, nil), "retry after 1s")
	require.NoError(t, doError(nil))
}

// The waits between in-process tries double from the first, capped,
// jittered within [w/2, w].
func TestWaitsGrowWithinBounds(t *testing.T) {
	t.Parallel()
	a := New("a", Backoff(100*time.Millisecond, time.Second))
	for n, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		for range 50 {
			w := a.wait(n)
			require.GreaterOrEqual(t, w, ceiling/2, "n=%d", n)
			require.LessOrEqual(t, w, ceiling, "n=%d", n)
		}
	}
}

// The predicates read an error as the SDK does, through wrapping.
func TestErrorPredicates(t *testing.T) {
	t.Parallel()
	base := errors.New("HTTP 503")
	wrap := func(err error) error { return fmt.Errorf("reserving: %w", err) }

	require.True(t, IsPermanent(wrap(Permanent(base))))
	require.True(t, IsPermanent(Permanent(nil)))
	require.True(t, IsPermanent(wrap(RetryAfter(time.Second, Permanent(base)))), "Permanent wins")
	require.False(t, IsPermanent(base))
	require.False(t, IsPermanent(nil))

	d, ok := RetryDelay(wrap(RetryAfter(3*time.Second, base)))
	require.True(t, ok)
	require.Equal(t, 3*time.Second, d)
	_, ok = RetryDelay(Permanent(RetryAfter(time.Second, base)))
	require.False(t, ok, "Permanent wins")
	_, ok = RetryDelay(base)
	require.False(t, ok)

	require.Equal(t, "CardDeclined", ErrorName(wrap(Named("CardDeclined", base))))
	require.Equal(t, sas.ErrorCircuitOpen, ErrorName(wrap(&circuitOpenError{dependency: "x"})))
	require.Empty(t, ErrorName(base))
}
