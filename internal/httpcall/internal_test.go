package httpcall

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBackoffCeiling(t *testing.T) {
	t.Parallel()
	const base, maxB = 100 * time.Millisecond, 2 * time.Second
	tests := []struct {
		n    int
		want time.Duration
	}{
		{0, 100 * time.Millisecond},
		{1, 200 * time.Millisecond},
		{2, 400 * time.Millisecond},
		{4, 1600 * time.Millisecond},
		{5, 2 * time.Second},
		{60, 2 * time.Second},
		{1 << 20, 2 * time.Second},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, backoffCeiling(base, maxB, tc.n), "n=%d", tc.n)
	}
	// No overflow near the largest Duration.
	huge := time.Duration(math.MaxInt64)
	for n := range 70 {
		got := backoffCeiling(time.Hour, huge, n)
		require.Positive(t, got, "n=%d", n)
		require.LessOrEqual(t, got, huge)
	}
}

func TestFullJitterBounds(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10_000 {
		base := time.Duration(1 + rng.Int64N(int64(time.Second)))
		maxB := base * time.Duration(1+rng.IntN(100))
		n := rng.IntN(20)
		ceiling := backoffCeiling(base, maxB, n)
		d := fullJitter(ceiling, rng.Float64())
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.Less(t, d, ceiling, "base %s max %s n %d", base, maxB, n)
		require.LessOrEqual(t, ceiling, maxB)
		require.LessOrEqual(t, ceiling, base<<min(n, 40))
	}

	// The edges of r, including a Rand that breaks its contract.
	const c = time.Second
	for _, tc := range []struct {
		r    float64
		want time.Duration
	}{
		{0, 0},
		{0.25, 250 * time.Millisecond},
		{math.Nextafter(1, 0), c - 1},
		{1, c - 1},
		{2, c - 1},
		{-1, 0},
		{math.NaN(), 0},
	} {
		assert.Equal(t, tc.want, fullJitter(c, tc.r), "r=%v", tc.r)
	}
	assert.Zero(t, fullJitter(0, 0.5))
	// The whole window is used: a spread of r covers [0, ceiling).
	lo, hi := c, time.Duration(0)
	for i := range 1000 {
		d := fullJitter(c, float64(i)/1000)
		lo, hi = min(lo, d), max(hi, d)
	}
	assert.Zero(t, lo)
	assert.Greater(t, hi, 990*time.Millisecond)
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"absent", "", 0, false},
		{"seconds", "2", 2 * time.Second, true},
		{"zero", "0", 0, true},
		{"spaces", " 7 ", 7 * time.Second, true},
		{"negative", "-3", 0, false},
		{"fraction", "1.5", 0, false},
		{"garbage", "soon", 0, false},
		{"huge", "99999999999999999", time.Duration(math.MaxInt64/int64(time.Second)) * time.Second, true},
		{"IMF-fixdate", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"RFC 850", now.Add(time.Minute).Format(time.RFC850), time.Minute, true},
		{"asctime", now.Add(time.Hour).Format(time.ANSIC), time.Hour, true},
		{"date in the past", now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tc.value != "" {
				h.Set("Retry-After", tc.value)
			}
			d, ok := retryAfter(h, now)
			assert.Equal(t, tc.wantOK, ok)
			assert.Equal(t, tc.want, d)
		})
	}
}

func TestTransientStatus(t *testing.T) {
	t.Parallel()
	for code := 100; code < 600; code++ {
		want := code == 408 || code == 429 || (code >= 500 && code != 501 && code != 505)
		assert.Equal(t, want, transientStatus(code), "status %d", code)
	}
}

func TestExcerpt(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "", excerpt(nil))
	assert.Equal(t, "a b c", excerpt([]byte("  a\n\tb\r\n\x00c  ")))
	assert.Equal(t, "bad \uFFFD byte", excerpt([]byte("bad \xff byte")))

	long := excerpt([]byte(strings.Repeat("é", 300)))
	assert.True(t, strings.HasSuffix(long, "…"))
	assert.LessOrEqual(t, len(strings.TrimSuffix(long, "…")), excerptBytes)
	assert.True(t, strings.HasPrefix(long, "éé"))
	assert.NotContains(t, long, "\uFFFD", "cut at a rune boundary")
}

func TestBreakerTransitions(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	newB := func() *breaker {
		return &breaker{cfg: BreakerConfig{FailureThreshold: 2, FailureRate: 0.5, Window: 10 * time.Second, OpenFor: time.Minute}}
	}
	admit := func(t *testing.T, b *breaker, now time.Time) ticket {
		t.Helper()
		tk, _, ok := b.allow(now)
		require.True(t, ok)
		return tk
	}

	t.Run("successes dilute failures: it opens on a rate, not a run", func(t *testing.T) {
		t.Parallel()
		b := newB()
		for range 6 {
			b.report(admit(t, b, t0), healthy, t0)
		}
		// Three failures out of nine: past the threshold, under the rate.
		for range 3 {
			b.report(admit(t, b, t0), unhealthy, t0)
		}
		assert.Equal(t, BreakerClosed, b.current(t0))
		// Six out of twelve: half the window's tries.
		for range 2 {
			b.report(admit(t, b, t0), unhealthy, t0)
			assert.Equal(t, BreakerClosed, b.current(t0))
		}
		b.report(admit(t, b, t0), unhealthy, t0)
		assert.Equal(t, BreakerOpen, b.current(t0))
	})

	t.Run("a partial fault at volume never opens it", func(t *testing.T) {
		t.Parallel()
		b := newB()
		// One try in four fails, in runs of eight, for a minute.
		now := t0
		for i := range 2000 {
			h := healthy
			if i%32 >= 24 {
				h = unhealthy
			}
			b.report(admit(t, b, now), h, now)
			require.Equal(t, BreakerClosed, b.current(now), "try %d", i)
			now = now.Add(30 * time.Millisecond)
		}
	})

	t.Run("tries older than the window are forgotten", func(t *testing.T) {
		t.Parallel()
		b := newB()
		b.report(admit(t, b, t0), unhealthy, t0)
		later := t0.Add(11 * time.Second)
		b.report(admit(t, b, later), unhealthy, later)
		assert.Equal(t, BreakerClosed, b.current(later), "one failure in the window")
		b.report(admit(t, b, later), unhealthy, later)
		assert.Equal(t, BreakerOpen, b.current(later))
	})

	t.Run("successes outside the window do not dilute", func(t *testing.T) {
		t.Parallel()
		b := newB()
		for range 100 {
			b.report(admit(t, b, t0), healthy, t0)
		}
		later := t0.Add(20 * time.Second)
		b.report(admit(t, b, later), unhealthy, later)
		b.report(admit(t, b, later), unhealthy, later)
		assert.Equal(t, BreakerOpen, b.current(later))
	})

	t.Run("neutral outcomes count for nothing", func(t *testing.T) {
		t.Parallel()
		b := newB()
		b.report(admit(t, b, t0), unhealthy, t0)
		for range 5 {
			b.report(admit(t, b, t0), neutral, t0)
		}
		assert.Equal(t, BreakerClosed, b.current(t0))
	})

	t.Run("open reports when it reopens", func(t *testing.T) {
		t.Parallel()
		b := newB()
		b.report(admit(t, b, t0), unhealthy, t0)
		b.report(admit(t, b, t0), unhealthy, t0)
		_, retryAt, ok := b.allow(t0.Add(time.Second))
		assert.False(t, ok)
		assert.Equal(t, t0.Add(time.Minute), retryAt)
	})

	t.Run("stale reports are ignored", func(t *testing.T) {
		t.Parallel()
		b := newB()
		slow := admit(t, b, t0) // admitted while closed, answers late
		b.report(admit(t, b, t0), unhealthy, t0)
		b.report(admit(t, b, t0), unhealthy, t0)
		require.Equal(t, BreakerOpen, b.current(t0))

		b.report(slow, healthy, t0.Add(time.Second))
		assert.Equal(t, BreakerOpen, b.current(t0.Add(time.Second)), "a late success must not close an open breaker")

		probeAt := t0.Add(time.Minute)
		probe := admit(t, b, probeAt)
		b.report(probe, healthy, probeAt)
		require.Equal(t, BreakerClosed, b.current(probeAt))
		b.report(slow, unhealthy, probeAt)
		b.report(slow, unhealthy, probeAt)
		assert.Equal(t, BreakerClosed, b.current(probeAt), "late failures must not count against the new closed period")
	})

	t.Run("a neutral probe frees the slot for the next probe", func(t *testing.T) {
		t.Parallel()
		b := newB()
		b.report(admit(t, b, t0), unhealthy, t0)
		b.report(admit(t, b, t0), unhealthy, t0)
		at := t0.Add(time.Minute)
		probe := admit(t, b, at)
		_, retryAt, ok := b.allow(at)
		require.False(t, ok, "one probe at a time")
		assert.True(t, retryAt.IsZero())
		b.report(probe, neutral, at)
		assert.Equal(t, BreakerHalfOpen, b.current(at))
		b.report(admit(t, b, at), unhealthy, at)
		assert.Equal(t, BreakerOpen, b.current(at))
		_, retryAt, ok = b.allow(at)
		assert.False(t, ok)
		assert.Equal(t, at.Add(time.Minute), retryAt, "a failed probe restarts the open period")
	})
}
