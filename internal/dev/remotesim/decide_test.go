package remotesim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The latency distribution is checked on the draws themselves: timing real
// requests would measure the machine instead.
func TestDecideLatencyDistribution(t *testing.T) {
	t.Parallel()
	const (
		n      = 4000
		base   = 10 * time.Millisecond
		jitter = 20 * time.Millisecond
		extra  = time.Second
	)
	s, err := New(Config{Seed: 5, Faults: Faults{Profile: Profile{
		LatencyBase: base, LatencyJitter: jitter, SlowRate: 0.1, SlowExtra: extra,
	}}})
	require.NoError(t, err)

	var slow int
	var fastSum time.Duration
	for range n {
		d := s.decide("k", "o", "/payments")
		require.Equal(t, FaultNone, d.fault)
		require.False(t, d.lost)
		lat := d.latency
		if lat >= extra {
			slow++
			lat -= extra
		} else {
			fastSum += lat
		}
		require.GreaterOrEqual(t, lat, base)
		require.Less(t, lat, base+jitter)
	}
	assert.InDelta(t, 0.1*n, slow, 0.02*n, "slowRate")
	mean := fastSum / time.Duration(n-slow)
	assert.InDelta(t, float64(base+jitter/2), float64(mean), float64(time.Millisecond), "uniform jitter averages to its middle")
}

// The three exclusive rates share one draw, so each is a fraction of all calls.
func TestDecideExclusiveRates(t *testing.T) {
	t.Parallel()
	const n = 10000
	s, err := New(Config{Seed: 11, Faults: Faults{Profile: Profile{
		TransientRate: 0.3, HangRate: 0.2, PermanentRate: 0.5, LostRate: 0.4,
	}}})
	require.NoError(t, err)
	counts := map[FaultKind]int{}
	lost := 0
	for range n {
		d := s.decide("k", "o", "/payments")
		counts[d.fault]++
		if d.lost {
			lost++
		}
	}
	assert.Zero(t, counts[FaultNone], "the rates sum to 1")
	assert.InDelta(t, 0.3*n, counts[FaultTransient], 0.02*n)
	assert.InDelta(t, 0.2*n, counts[FaultHang], 0.02*n)
	assert.InDelta(t, 0.5*n, counts[FaultPermanent], 0.02*n)
	assert.InDelta(t, 0.4*n, lost, 0.02*n, "lost is drawn on its own")
}

func TestScriptStep(t *testing.T) {
	t.Parallel()
	sc := Script{Key: "k", Plan: []ScriptStep{
		{Fault: FaultTransient, Times: 2},
		{Fault: FaultLost, Times: 1},
		{Fault: FaultPermanent},
	}}
	want := []FaultKind{FaultTransient, FaultTransient, FaultLost, FaultPermanent, FaultPermanent}
	for i, w := range want {
		st, ok := sc.step(i)
		require.True(t, ok, "call %d", i)
		assert.Equal(t, w, st.Fault, "call %d", i)
	}

	finite := Script{Key: "k", Plan: []ScriptStep{{Fault: FaultHang, Times: 1}}}
	_, ok := finite.step(1)
	assert.False(t, ok, "a finite plan runs out")
}
