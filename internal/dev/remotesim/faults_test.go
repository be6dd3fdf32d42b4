package remotesim_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/remotesim"
)

func TestFaultsValidate(t *testing.T) {
	t.Parallel()
	step := func(f remotesim.FaultKind, times int) remotesim.ScriptStep {
		return remotesim.ScriptStep{Fault: f, Times: times}
	}
	cases := []struct {
		name    string
		faults  remotesim.Faults
		wantErr string // "" means valid
	}{
		{"zero", remotesim.Faults{}, ""},
		{"rates summing to 1", remotesim.Faults{Profile: remotesim.Profile{TransientRate: 0.1, HangRate: 0.2, PermanentRate: 0.7}}, ""},
		{"rate above 1", remotesim.Faults{Profile: remotesim.Profile{LostRate: 1.5}}, "lostRate"},
		{"negative rate", remotesim.Faults{Profile: remotesim.Profile{SlowRate: -0.1}}, "slowRate"},
		{"exclusive rates over 1", remotesim.Faults{Profile: remotesim.Profile{TransientRate: 0.6, PermanentRate: 0.6}}, "sum to at most 1"},
		{"negative duration", remotesim.Faults{Profile: remotesim.Profile{LatencyBase: -time.Second}}, "latencyBase"},
		{"transient status", remotesim.Faults{Profile: remotesim.Profile{TransientStatus: 404}}, "transientStatus"},
		{"permanent status", remotesim.Faults{Profile: remotesim.Profile{PermanentStatus: 429}}, "permanentStatus"},
		{"lost mode", remotesim.Faults{Profile: remotesim.Profile{LostMode: "vanish"}}, "lostMode"},
		{"path without slash", remotesim.Faults{Paths: map[string]remotesim.Profile{"payments": {}}}, "starts with /"},
		{"bad path profile", remotesim.Faults{Paths: map[string]remotesim.Profile{"/payments": {HangRate: 3}}}, `paths["/payments"]: hangRate`},
		{"script without selector", remotesim.Faults{Scripts: []remotesim.Script{{Plan: []remotesim.ScriptStep{step(remotesim.FaultHang, 1)}}}}, "at least one of"},
		{"script without plan", remotesim.Faults{Scripts: []remotesim.Script{{Key: "k"}}}, "needs a plan"},
		{"unknown fault", remotesim.Faults{Scripts: []remotesim.Script{{Key: "k", Plan: []remotesim.ScriptStep{step("explode", 1)}}}}, "explode"},
		{"negative times", remotesim.Faults{Scripts: []remotesim.Script{{Key: "k", Plan: []remotesim.ScriptStep{step(remotesim.FaultHang, -1)}}}}, "negative"},
		{"forever before the end", remotesim.Faults{Scripts: []remotesim.Script{{Key: "k", Plan: []remotesim.ScriptStep{
			step(remotesim.FaultTransient, 0), step(remotesim.FaultNone, 1)}}}}, "must be the last"},
		{"script status", remotesim.Faults{Scripts: []remotesim.Script{{Key: "k", Plan: []remotesim.ScriptStep{
			{Fault: remotesim.FaultTransient, Status: 402}}}}}, "transient status"},
		{"script mode", remotesim.Faults{Scripts: []remotesim.Script{{Key: "k", Plan: []remotesim.ScriptStep{
			{Fault: remotesim.FaultLost, Mode: "nope"}}}}}, "lost mode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.faults.Validate()
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)

			sim, err := remotesim.New(remotesim.Config{})
			require.NoError(t, err)
			assert.Error(t, sim.SetFaults(tc.faults), "SetFaults validates too")
		})
	}
}

func TestFaultsJSONRoundTrip(t *testing.T) {
	t.Parallel()
	in := remotesim.Faults{
		Profile: remotesim.Profile{
			LatencyBase: 5 * time.Millisecond, LatencyJitter: 20 * time.Millisecond,
			SlowRate: 0.01, SlowExtra: 2 * time.Second,
			TransientRate: 0.1, TransientStatus: 429, RetryAfter: time.Second,
			PermanentRate: 0.02, PermanentStatus: 422,
			HangRate: 0.01, HangFor: time.Minute,
			LostRate: 0.05, LostMode: remotesim.LostHang,
		},
		Paths: map[string]remotesim.Profile{"/refunds": {LatencyBase: time.Millisecond}},
		Scripts: []remotesim.Script{{OrderID: "o-1", Path: "/payments", Plan: []remotesim.ScriptStep{
			{Fault: remotesim.FaultTransient, Times: 2, Status: 503},
			{Fault: remotesim.FaultLost, Times: 1, Mode: remotesim.LostDrop},
		}}},
	}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"latencyJitter":"20ms"`, "durations are Go duration strings")
	assert.Contains(t, string(b), `"paths":{"/refunds":{`)

	var out remotesim.Faults
	require.NoError(t, json.Unmarshal(b, &out))
	assert.Equal(t, in, out)
}

func TestFaultsJSONRejects(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"unknown knob":        `{"transientRat": 0.1}`,
		"number duration":     `{"hangFor": 30}`,
		"bad duration":        `{"hangFor": "soon"}`,
		"unknown script knob": `{"scripts":[{"key":"k","plan":[{"fault":"hang","tims":1}]}]}`,
		"not an object":       `[]`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var f remotesim.Faults
			assert.Error(t, json.Unmarshal([]byte(body), &f))
		})
	}
}

// Decoding onto existing knobs merges, which is what PATCH /_sim/faults does.
func TestFaultsJSONMerges(t *testing.T) {
	t.Parallel()
	f := remotesim.Faults{
		Profile: remotesim.Profile{TransientRate: 0.5, LatencyBase: time.Second},
		Scripts: []remotesim.Script{
			{Key: "a", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultHang}}},
			{Key: "b", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultHang}}},
		},
	}
	require.NoError(t, json.Unmarshal([]byte(`{"transientRate": 0.25}`), &f))
	assert.InDelta(t, 0.25, f.TransientRate, 1e-12)
	assert.Equal(t, time.Second, f.LatencyBase, "absent fields keep their values")
	assert.Len(t, f.Scripts, 2)

	require.NoError(t, json.Unmarshal([]byte(`{"scripts":[{"key":"c","plan":[{"fault":"none"}]}]}`), &f))
	require.Len(t, f.Scripts, 1, "a present list replaces the old one")
	assert.Equal(t, "c", f.Scripts[0].Key)
}
