package remotesim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/remotesim"
)

// The call log names, per key and order, every fault the simulator injected
// and every effect and replay it served: a harness explains failures with it.
func TestCallLogRecordsInjectedFaultsPerKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Scripts: []remotesim.Script{
		{Key: "o-1:0", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultTransient, Times: 1}, {Fault: remotesim.FaultLost, Times: 1, Mode: remotesim.LostError}}},
		{Key: "o-2:0", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultPermanent}}},
	}}})
	require.Equal(t, 503, h.mustCall(t, "/payments", "o-1:0", payment("o-1", 5)).status)
	require.Equal(t, 503, h.mustCall(t, "/payments", "o-1:0", payment("o-1", 5)).status) // lost after the effect
	require.Equal(t, 201, h.mustCall(t, "/payments", "o-1:0", payment("o-1", 5)).status) // replay
	require.Equal(t, 402, h.mustCall(t, "/payments", "o-2:0", payment("o-2", 5)).status)
	require.Equal(t, 422, h.mustCall(t, "/refunds", "o-1:0", payment("o-1", 5)).status)

	by := h.sim.CallsByKey()
	o1 := by["o-1:0"]
	require.Len(t, o1, 4)
	require.Equal(t, remotesim.FaultTransient, o1[0].Fault)
	require.Equal(t, remotesim.FaultLost, o1[1].Fault)
	require.Equal(t, remotesim.LostError, o1[1].LostMode)
	require.Equal(t, "effect", o1[1].Outcome)
	require.False(t, o1[2].Injected())
	require.Equal(t, "replay", o1[2].Outcome)
	require.Equal(t, "conflict", o1[3].Outcome)
	require.Equal(t, "o-1", o1[0].OrderID)
	require.Equal(t, remotesim.FaultPermanent, by["o-2:0"][0].Fault)
	require.True(t, by["o-2:0"][0].Injected())

	h.sim.Reset()
	calls, dropped := h.sim.Calls()
	require.Empty(t, calls)
	require.Zero(t, dropped)
}

func TestSlowDownScalesLatency(t *testing.T) {
	t.Parallel()
	sim, err := remotesim.New(remotesim.Config{Faults: remotesim.Faults{
		Profile: remotesim.Profile{LatencyBase: 10 * time.Millisecond, LatencyJitter: 2 * time.Millisecond},
		Paths:   map[string]remotesim.Profile{"/refunds": {LatencyBase: time.Millisecond}},
	}})
	require.NoError(t, err)
	sim.SlowDown(10)
	f := sim.Faults()
	require.Equal(t, 100*time.Millisecond, f.LatencyBase)
	require.Equal(t, 20*time.Millisecond, f.LatencyJitter)
	require.Equal(t, 10*time.Millisecond, f.Paths["/refunds"].LatencyBase)
}

// Down refuses every call, scripted ones too, logs each as a transient
// fault, and takes effect nowhere; once up, the calls succeed again and a
// script resumes where it was.
func TestDownRefusesEveryCallUntilUp(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Scripts: []remotesim.Script{
		{Key: "o-2:0", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultPermanent}}},
	}}})
	up := h.sim.Down()
	second := h.sim.Down()
	require.True(t, h.sim.IsDown())
	require.Equal(t, 503, h.mustCall(t, "/payments", "o-1:0", payment("o-1", 5)).status)
	require.Equal(t, 503, h.mustCall(t, "/payments", "o-2:0", payment("o-2", 5)).status)
	up()
	up() // twice does nothing more: the second outage still holds
	require.True(t, h.sim.IsDown())
	require.Equal(t, 503, h.mustCall(t, "/payments", "o-1:0", payment("o-1", 5)).status)
	second()
	require.False(t, h.sim.IsDown())
	require.Empty(t, h.sim.Effects(), "nothing takes effect during an outage")

	require.Equal(t, 201, h.mustCall(t, "/payments", "o-1:0", payment("o-1", 5)).status)
	require.Equal(t, 402, h.mustCall(t, "/payments", "o-2:0", payment("o-2", 5)).status, "the script resumes at its first step")
	by := h.sim.CallsByKey()
	require.Len(t, by["o-1:0"], 3)
	for _, c := range by["o-1:0"][:2] {
		require.Equal(t, remotesim.FaultTransient, c.Fault)
		require.True(t, c.Injected())
	}
	require.Equal(t, remotesim.FaultTransient, by["o-2:0"][0].Fault)
	require.Len(t, h.sim.Effects(), 1)
}
