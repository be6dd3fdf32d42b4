package sas_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func TestRetryBackoffGrowsAndIsCapped(t *testing.T) {
	t.Parallel()
	p := sas.RetryPolicy{InitialInterval: 5 * time.Second, MaxInterval: 15 * time.Minute}
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 900, 900}
	for i, w := range want {
		require.Equal(t, w*time.Second, p.Backoff(i+1), "failure %d", i+1)
	}
	require.Equal(t, 15*time.Minute, p.Backoff(1_000_000), "no overflow")
	require.Equal(t, 25*time.Second, sas.RetryPolicy{InitialInterval: 10 * time.Second, MaxInterval: 25 * time.Second}.Backoff(3),
		"a cap between two doublings")
	require.Equal(t, 45*time.Second, sas.RetryPolicy{InitialInterval: 5 * time.Second, Coefficient: 3, MaxInterval: time.Hour}.Backoff(3),
		"the coefficient; the cap is SQS's 15m at most")
}

// The jittered interval is drawn from [Backoff/2, Backoff], in whole
// seconds, the same for the same seed, and spread over the range by
// different seeds (the orders an outage failed together come back apart).
func TestRetryIntervalJitterBounds(t *testing.T) {
	t.Parallel()
	for _, p := range []sas.RetryPolicy{
		{InitialInterval: 5 * time.Second, MaxInterval: 15 * time.Minute},
		{InitialInterval: time.Second, MaxInterval: 8 * time.Second},
		{InitialInterval: 10 * time.Second, Coefficient: 1.5, MaxInterval: 5 * time.Minute},
	} {
		for failures := 1; failures <= 12; failures++ {
			b := p.Backoff(failures)
			seen := map[time.Duration]bool{}
			for i := range 200 {
				seed := sas.JitterSeed(sas.StepKey{OrderID: fmt.Sprintf("o-%d", i), Step: i % 3}, 1+i%4)
				d := p.Interval(failures, seed)
				require.Zero(t, d%time.Second, "whole seconds (an SQS delay)")
				require.GreaterOrEqual(t, d, b/2, "%+v failure %d", p, failures)
				ceil := (b + time.Second - 1) / time.Second * time.Second
				require.LessOrEqual(t, d, ceil, "%+v failure %d", p, failures)
				require.LessOrEqual(t, d, sas.DefaultMaxInterval)
				require.Equal(t, d, p.Interval(failures, seed), "the same seed draws the same")
				seen[d] = true
			}
			if b >= 8*time.Second {
				require.Greater(t, len(seen), 2, "%+v failure %d: spread, not one value", p, failures)
			}
		}
	}
}

func TestJitterSeedNamesTheAttempt(t *testing.T) {
	t.Parallel()
	k := sas.StepKey{OrderID: "o-1", Step: 2}
	require.Equal(t, "o-1/2/3", sas.JitterSeed(k, 3))
	require.NotEqual(t, sas.JitterSeed(k, 3), sas.JitterSeed(k, 4))
}
