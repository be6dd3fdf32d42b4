package remotesim_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/remotesim"
)

func TestAdminFaults(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Profile: remotesim.Profile{LatencyBase: time.Millisecond}}})

	r := h.admin(t, "GET", "/_sim/faults", "")
	require.Equal(t, http.StatusOK, r.status)
	assert.JSONEq(t, `{
		"latencyBase":"1ms","latencyJitter":"0s","slowRate":0,"slowExtra":"0s",
		"transientRate":0,"transientStatus":0,"retryAfter":"0s",
		"permanentRate":0,"permanentStatus":0,
		"hangRate":0,"hangFor":"0s",
		"lostRate":0,"lostMode":""
	}`, string(r.body))

	r = h.admin(t, "PUT", "/_sim/faults", `{"transientRate":1,"transientStatus":429,"retryAfter":"2s",
		"paths":{"/refunds":{"latencyBase":"0s"}},
		"scripts":[{"key":"vip","plan":[{"fault":"none"}]}]}`)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.body)
	f := h.sim.Faults()
	assert.InDelta(t, 1.0, f.TransientRate, 1e-12)
	assert.Zero(t, f.LatencyBase, "PUT replaces everything")
	assert.Contains(t, f.Paths, "/refunds")
	require.Len(t, f.Scripts, 1)

	pay := h.mustCall(t, "/payments", "k", payment("o", 1))
	assert.Equal(t, http.StatusTooManyRequests, pay.status)
	assert.Equal(t, "2", pay.header.Get("Retry-After"))
	assert.Equal(t, http.StatusCreated, h.mustCall(t, "/payments", "vip", payment("o", 1)).status)

	r = h.admin(t, "PATCH", "/_sim/faults", `{"transientRate":0}`)
	require.Equal(t, http.StatusOK, r.status, "body %s", r.body)
	f = h.sim.Faults()
	assert.Zero(t, f.TransientRate)
	assert.Equal(t, 429, f.TransientStatus, "PATCH keeps what it does not name")
	assert.Len(t, f.Scripts, 1)
	assert.Equal(t, http.StatusCreated, h.mustCall(t, "/payments", "k", payment("o", 1)).status)
}

func TestAdminFaultsRejects(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Profile: remotesim.Profile{HangRate: 0.5}}})
	for name, body := range map[string]string{
		"misspelt knob":   `{"hangRat":1}`,
		"out of range":    `{"hangRate":1.5}`,
		"number duration": `{"hangFor":30}`,
		"not json":        `hang please`,
	} {
		r := h.admin(t, "PUT", "/_sim/faults", body)
		assert.Equal(t, http.StatusBadRequest, r.status, name)
		assert.Equal(t, "bad_faults", r.errorType(t), name)
	}
	assert.InDelta(t, 0.5, h.sim.Faults().HangRate, 1e-12, "a rejected PUT changes nothing")
}

func TestAdminStatsLedgerReset(t *testing.T) {
	t.Parallel()
	// Admin requests are never faulted, even when everything else is.
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{
		Profile: remotesim.Profile{TransientRate: 1},
		Paths:   map[string]remotesim.Profile{"/payments": {}},
	}})
	require.Equal(t, http.StatusCreated, h.mustCall(t, "/payments", "k", payment("o-1", 7)).status)
	require.Equal(t, http.StatusCreated, h.mustCall(t, "/payments", "k", payment("o-1", 7)).status)
	require.Equal(t, http.StatusServiceUnavailable, h.mustCall(t, "/refunds", "r", payment("o-1", 7)).status)

	r := h.admin(t, "GET", "/_sim/stats", "")
	require.Equal(t, http.StatusOK, r.status)
	var st remotesim.Stats
	require.NoError(t, json.Unmarshal(r.body, &st))
	assert.EqualValues(t, 3, st.Calls)
	assert.EqualValues(t, 1, st.Effects)
	assert.EqualValues(t, 1, st.Replays)
	assert.EqualValues(t, 1, st.Transient)
	assert.EqualValues(t, 1, st.Paths["/refunds"].Transient)

	r = h.admin(t, "GET", "/_sim/ledger", "")
	require.Equal(t, http.StatusOK, r.status)
	var l remotesim.Ledger
	require.NoError(t, json.Unmarshal(r.body, &l))
	require.Len(t, l.Effects, 1)
	assert.Equal(t, "k", l.Effects[0].Key)
	assert.Equal(t, "o-1", l.Effects[0].OrderID)
	require.Len(t, l.Keys, 1)
	assert.Equal(t, "done", l.Keys[0].State)
	assert.Equal(t, http.StatusCreated, l.Keys[0].Status)
	assert.NotNil(t, l.Duplicates)
	assert.Empty(t, l.Duplicates)

	r = h.admin(t, "POST", "/_sim/reset", "")
	assert.Equal(t, http.StatusNoContent, r.status)
	assert.Empty(t, h.sim.Effects())
	assert.Zero(t, h.sim.Stats().Calls)
	assert.InDelta(t, 1.0, h.sim.Faults().TransientRate, 1e-12, "reset keeps the knobs")

	// After a reset the key is new again, and ids keep counting.
	again := h.mustCall(t, "/payments", "k", payment("o-1", 7))
	require.Equal(t, http.StatusCreated, again.status)
	assert.Empty(t, again.header.Get("Idempotent-Replayed"))
	assert.Equal(t, "pay_000002", again.json(t)["paymentId"])
}

func TestAdminRouting(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{})
	cases := []struct {
		method, path string
		want         int
	}{
		{"GET", "/_sim/healthz", 200},
		{"HEAD", "/_sim/healthz", 200},
		{"POST", "/_sim/stats", 405},
		{"PUT", "/_sim/ledger", 405},
		{"GET", "/_sim/reset", 405},
		{"DELETE", "/_sim/faults", 405},
		{"GET", "/_sim/nothing", 404},
		{"GET", "/_sim", 404},
	}
	for _, tc := range cases {
		r := h.admin(t, tc.method, tc.path, "")
		assert.Equal(t, tc.want, r.status, "%s %s", tc.method, tc.path)
	}
	assert.Zero(t, h.sim.Stats().Calls, "admin requests are not calls")
}

// Changing a rate mid-test must not restart a script; changing the scripts does.
func TestScriptProgressSurvivesRateChanges(t *testing.T) {
	t.Parallel()
	script := `"scripts":[{"key":"k","plan":[{"fault":"transient","times":1}]}]`
	h := newHarness(t, remotesim.Config{})
	require.Equal(t, http.StatusOK, h.admin(t, "PUT", "/_sim/faults", `{`+script+`}`).status)
	assert.Equal(t, http.StatusServiceUnavailable, h.mustCall(t, "/payments", "k", payment("o", 1)).status)

	require.Equal(t, http.StatusOK, h.admin(t, "PATCH", "/_sim/faults", `{"latencyBase":"1ms"}`).status)
	assert.Equal(t, http.StatusCreated, h.mustCall(t, "/payments", "k", payment("o", 1)).status)

	require.Equal(t, http.StatusOK, h.admin(t, "PATCH", "/_sim/faults",
		`{"scripts":[{"key":"k","plan":[{"fault":"transient","times":2}]}]}`).status)
	assert.Equal(t, http.StatusServiceUnavailable, h.mustCall(t, "/payments", "k", payment("o", 1)).status,
		"new scripts start from their first step")
}
