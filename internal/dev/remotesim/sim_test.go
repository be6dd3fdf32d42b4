package remotesim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/remotesim"
)

// A large request gets a small answer: an id, the key, a status. Echoing the
// request once made a 50 KiB payload of '<' a 307 KiB answer (HTML-escaped),
// over the agent's response limit, for a charge that happened.
func TestLargeRequestGetsASmallAnswer(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Seed: 1})
	body := map[string]any{"orderId": "o-big", "note": strings.Repeat("<", 50<<10)}
	r := h.mustCall(t, "/payments", "o-big:0", body)
	require.Equal(t, http.StatusCreated, r.status, "body %s", r.body)
	assert.Less(t, len(r.body), 512, "answer %s", r.body)
	got := r.json(t)
	assert.Equal(t, "captured", got["status"])
	assert.Equal(t, "o-big:0", got["idempotencyKey"])
	assert.Equal(t, "o-big", got["orderId"])
}

func TestPaymentThenReplay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Seed: 1})

	first := h.mustCall(t, "/payments", "order-1:pay", payment("order-1", 4200))
	require.Equal(t, http.StatusCreated, first.status, "body %s", first.body)
	got := first.json(t)
	assert.Equal(t, "captured", got["status"])
	assert.Equal(t, "order-1", got["orderId"])
	assert.Equal(t, "order-1:pay", got["idempotencyKey"])
	assert.NotContains(t, got, "amount", "the request is not echoed, as a payments API would not")
	payID, _ := got["paymentId"].(string)
	require.True(t, strings.HasPrefix(payID, "pay_"), "paymentId %q", payID)
	assert.Equal(t, payID, got["id"])
	assert.Empty(t, first.header.Get("Idempotent-Replayed"))

	again := h.mustCall(t, "/payments", "order-1:pay", payment("order-1", 4200))
	require.Equal(t, http.StatusCreated, again.status)
	assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	assert.Equal(t, first.body, again.body, "a replay is the stored response, byte for byte")

	assert.Equal(t, 1, h.sim.EffectCount("order-1:pay"))
	assert.Empty(t, h.sim.Duplicates())
	effects := h.sim.Effects()
	require.Len(t, effects, 1)
	assert.Equal(t, payID, effects[0].ResourceID)
	assert.Equal(t, "order-1", effects[0].OrderID)
	assert.Equal(t, "/payments", effects[0].Path)
	assert.JSONEq(t, `{"orderId":"order-1","amount":4200,"currency":"EUR"}`, string(effects[0].Body))

	st := h.sim.Stats()
	assert.EqualValues(t, 2, st.Calls)
	assert.EqualValues(t, 1, st.Effects)
	assert.EqualValues(t, 1, st.Replays)
	assert.EqualValues(t, 1, st.Paths["/payments"].Replays)
}

func TestResources(t *testing.T) {
	t.Parallel()
	cases := []struct {
		path, idField, prefix, status string
	}{
		{"/payments", "paymentId", "pay_", "captured"},
		{"/refunds", "refundId", "re_", "refunded"},
		{"/shipments", "shipmentId", "shipment_", "created"},
		{"/inventory/reservations", "reservationId", "reservation_", "created"},
	}
	h := newHarness(t, remotesim.Config{})
	for _, tc := range cases {
		t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
			r := h.mustCall(t, tc.path, "k"+tc.path, map[string]any{"orderId": "o-1", "paymentId": "pay_1"})
			require.Equal(t, http.StatusCreated, r.status, "body %s", r.body)
			got := r.json(t)
			id, _ := got[tc.idField].(string)
			assert.True(t, strings.HasPrefix(id, tc.prefix), "%s = %q", tc.idField, id)
			assert.Equal(t, tc.status, got["status"])
			assert.Equal(t, 1, h.sim.EffectCount("k"+tc.path))
		})
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		method  string
		path    string
		keys    []string
		body    string
		status  int
		errType string
	}{
		{"no key", "POST", "/payments", nil, `{"orderId":"o"}`, 400, "idempotency_key_required"},
		{"empty key", "POST", "/payments", []string{""}, `{"orderId":"o"}`, 400, "idempotency_key_required"},
		{"two keys", "POST", "/payments", []string{"a", "b"}, `{"orderId":"o"}`, 400, "idempotency_key_required"},
		{"key with space", "POST", "/payments", []string{"a b"}, `{"orderId":"o"}`, 400, "idempotency_key_required"},
		{"key too long", "POST", "/payments", []string{strings.Repeat("k", 256)}, `{"orderId":"o"}`, 400, "idempotency_key_required"},
		{"not json", "POST", "/payments", []string{"k"}, `orderId=o`, 400, "bad_body"},
		{"json array", "POST", "/payments", []string{"k"}, `[1,2]`, 400, "bad_body"},
		{"json null", "POST", "/payments", []string{"k"}, `null`, 400, "bad_body"},
		{"too large", "POST", "/payments", []string{"k"}, `{"pad":"` + strings.Repeat("x", 300) + `"}`, 413, "body_too_large"},
		{"GET", "GET", "/payments", []string{"k"}, ``, 405, "method_not_allowed"},
		{"root", "POST", "/", []string{"k"}, `{}`, 404, "not_found"},
		{"odd path", "POST", "/pay%20ments", []string{"k"}, `{}`, 404, "not_found"},
	}
	h := newHarness(t, remotesim.Config{MaxBodyBytes: 256})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, h.srv.URL+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			for _, k := range tc.keys {
				req.Header.Add("Idempotency-Key", k)
			}
			r, err := h.do(req)
			require.NoError(t, err)
			assert.Equal(t, tc.status, r.status, "body %s", r.body)
			assert.Equal(t, tc.errType, r.errorType(t))
		})
	}
	assert.Empty(t, h.sim.Effects())
	assert.EqualValues(t, len(cases), h.sim.Stats().BadRequests)
}

func TestQuotedKeyIsTheSameKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{})
	require.Equal(t, http.StatusCreated, h.mustCall(t, "/payments", `"k-1"`, payment("o", 1)).status)
	r := h.mustCall(t, "/payments", "k-1", payment("o", 1))
	assert.Equal(t, "true", r.header.Get("Idempotent-Replayed"), "the IETF draft quotes the key; Stripe does not")
	assert.Equal(t, 1, h.sim.EffectCount("k-1"))
}

func TestKeyReusedWithOtherRequest(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		path string
		body map[string]any
	}{
		{"other body", "/payments", payment("order-1", 9999)},
		{"other path", "/refunds", payment("order-1", 4200)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, remotesim.Config{})
			require.Equal(t, http.StatusCreated, h.mustCall(t, "/payments", "k", payment("order-1", 4200)).status)

			r := h.mustCall(t, tc.path, "k", tc.body)
			assert.Equal(t, http.StatusUnprocessableEntity, r.status)
			assert.Equal(t, "idempotency_key_reused", r.errorType(t))
			assert.Equal(t, 1, h.sim.EffectCount("k"))
			assert.EqualValues(t, 1, h.sim.Stats().Conflicts)
		})
	}
}

func TestKeyInUseWhileFirstCallRuns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Profile: remotesim.Profile{
		LatencyBase: 300 * time.Millisecond, RetryAfter: time.Second,
	}}})

	done := make(chan reply, 1)
	go func() {
		r, err := h.call(context.Background(), "/payments", "k", payment("o", 1))
		assert.NoError(t, err)
		done <- r
	}()
	eventually(t, func() bool {
		keys := h.sim.Ledger().Keys
		return len(keys) == 1 && keys[0].State == "inFlight"
	}, "first call holds the key")

	r := h.mustCall(t, "/payments", "k", payment("o", 1))
	assert.Equal(t, http.StatusConflict, r.status)
	assert.Equal(t, "idempotency_key_in_use", r.errorType(t))
	assert.Equal(t, "1", r.header.Get("Retry-After"))

	assert.Equal(t, http.StatusCreated, (<-done).status)
	assert.Equal(t, 1, h.sim.EffectCount("k"))
}

func TestConcurrentCallsSameKeyOneEffect(t *testing.T) {
	t.Parallel()
	// A little latency widens the window in which the calls overlap.
	h := newHarness(t, remotesim.Config{Seed: 3, Faults: remotesim.Faults{Profile: remotesim.Profile{
		LatencyBase: 2 * time.Millisecond, LatencyJitter: 5 * time.Millisecond,
	}}})
	for round := range 5 {
		key := fmt.Sprintf("order-%d:pay", round)
		start := make(chan struct{})
		replies := make([]reply, 20)
		var wg sync.WaitGroup
		for i := range replies {
			wg.Go(func() {
				<-start
				r, err := h.call(context.Background(), "/payments", key, payment("order", 100))
				assert.NoError(t, err)
				replies[i] = r
			})
		}
		close(start)
		wg.Wait()

		require.Equal(t, 1, h.sim.EffectCount(key), "round %d", round)
		ids := map[any]bool{}
		for _, r := range replies {
			switch r.status {
			case http.StatusCreated:
				ids[r.json(t)["paymentId"]] = true
			case http.StatusConflict: // in flight: the caller retries later
			default:
				t.Errorf("round %d: status %d body %s", round, r.status, r.body)
			}
		}
		assert.Len(t, ids, 1, "round %d: every success names the same payment", round)
	}
	assert.Empty(t, h.sim.Duplicates())
}

// TestRates checks each rate knob on its own over many calls with a fixed
// seed: the counter lands near rate*N and the effects are what is left.
func TestRates(t *testing.T) {
	t.Parallel()
	const n = 400
	const tolerance = 0.05 * n
	cases := []struct {
		name    string
		profile remotesim.Profile
		rate    float64
		counter func(remotesim.Counters) int64
		// effects given the counter's value
		effects func(hit int64) int64
	}{
		{
			name:    "transient",
			profile: remotesim.Profile{TransientRate: 0.2},
			rate:    0.2,
			counter: func(c remotesim.Counters) int64 { return c.Transient },
			effects: func(hit int64) int64 { return n - hit },
		},
		{
			name:    "permanent",
			profile: remotesim.Profile{PermanentRate: 0.15},
			rate:    0.15,
			counter: func(c remotesim.Counters) int64 { return c.Permanent },
			effects: func(hit int64) int64 { return n - hit },
		},
		{
			name:    "hang",
			profile: remotesim.Profile{HangRate: 0.1, HangFor: 2 * time.Millisecond},
			rate:    0.1,
			counter: func(c remotesim.Counters) int64 { return c.Hangs },
			effects: func(hit int64) int64 { return n - hit },
		},
		{
			name:    "lost after effect",
			profile: remotesim.Profile{LostRate: 0.25, LostMode: remotesim.LostError},
			rate:    0.25,
			counter: func(c remotesim.Counters) int64 { return c.Lost },
			effects: func(int64) int64 { return n }, // the effect happened anyway
		},
		{
			name:    "slow",
			profile: remotesim.Profile{SlowRate: 0.3, SlowExtra: time.Millisecond},
			rate:    0,
			counter: func(c remotesim.Counters) int64 { return c.Transient + c.Permanent + c.Hangs + c.Lost },
			effects: func(int64) int64 { return n },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, remotesim.Config{Seed: 42, Faults: remotesim.Faults{Profile: tc.profile}})
			for i := range n {
				_, _ = h.call(context.Background(), "/payments", fmt.Sprintf("k-%d", i), payment("o", i))
			}
			st := h.sim.Stats()
			hit := tc.counter(st.Counters)
			assert.InDelta(t, tc.rate*n, float64(hit), tolerance, "counter")
			assert.EqualValues(t, n, st.Calls)
			assert.EqualValues(t, tc.effects(hit), st.Effects)
			assert.Len(t, h.sim.Effects(), int(st.Effects))
			assert.Empty(t, h.sim.Duplicates())
		})
	}
}

func TestTransientHasRetryAfter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status     int
		retryAfter time.Duration
		wantHeader string
		wantType   string
	}{
		{0, 1500 * time.Millisecond, "2", "unavailable"}, // default 503, rounded up
		{503, 3 * time.Second, "3", "unavailable"},
		{429, 0, "0", "rate_limited"},
		{502, time.Millisecond, "1", "unavailable"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d-%s", tc.status, tc.retryAfter), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Profile: remotesim.Profile{
				TransientRate: 1, TransientStatus: tc.status, RetryAfter: tc.retryAfter,
			}}})
			r := h.mustCall(t, "/payments", "k", payment("o", 1))
			want := tc.status
			if want == 0 {
				want = remotesim.DefaultTransientStatus
			}
			assert.Equal(t, want, r.status)
			assert.Equal(t, tc.wantHeader, r.header.Get("Retry-After"))
			assert.Equal(t, tc.wantType, r.errorType(t))
			assert.Zero(t, h.sim.EffectCount("k"))
			assert.Empty(t, h.sim.Ledger().Keys, "a fault before the effect leaves no trace")
		})
	}
}

func TestPermanentFailure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		faults   remotesim.Faults
		want     int
		wantType string
	}{
		{"rate, default 402", remotesim.Faults{Profile: remotesim.Profile{PermanentRate: 1}}, 402, "payment_declined"},
		{"rate, 422", remotesim.Faults{Profile: remotesim.Profile{PermanentRate: 1, PermanentStatus: 422}}, 422, "unprocessable"},
		{"script status", remotesim.Faults{Scripts: []remotesim.Script{{
			Key: "k", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultPermanent, Status: 404}},
		}}}, 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, remotesim.Config{Faults: tc.faults})
			r := h.mustCall(t, "/payments", "k", payment("o", 1))
			assert.Equal(t, tc.want, r.status)
			assert.Equal(t, tc.wantType, r.errorType(t))
			assert.Empty(t, r.header.Get("Retry-After"))
			assert.Zero(t, h.sim.EffectCount("k"))
			assert.Empty(t, h.sim.Ledger().Keys)
			assert.EqualValues(t, 1, h.sim.Stats().Permanent)
		})
	}
}

// A decline is not stored: after the cause is fixed, a resubmit with the
// same key goes through (docs/pattern.md §4.7).
func TestPermanentFailureIsNotStored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Scripts: []remotesim.Script{{
		Key: "k", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultPermanent, Times: 1}},
	}}}})
	assert.Equal(t, http.StatusPaymentRequired, h.mustCall(t, "/payments", "k", payment("o", 1)).status)
	r := h.mustCall(t, "/payments", "k", payment("o", 1))
	assert.Equal(t, http.StatusCreated, r.status)
	assert.Empty(t, r.header.Get("Idempotent-Replayed"))
	assert.Equal(t, 1, h.sim.EffectCount("k"))
}

func TestHangBlocksUntilClientDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Profile: remotesim.Profile{HangRate: 1}}})
	const deadline = 80 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	start := time.Now()
	_, err := h.call(ctx, "/payments", "k", payment("o", 1))
	elapsed := time.Since(start)

	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, elapsed, deadline)
	// The hang lasts up to HangFor (10 minutes), or until the client goes:
	// the server's handler returns once the client went.
	eventually(t, func() bool { return h.sim.Active() == 0 }, "the hang ends with the client")
	assert.EqualValues(t, 1, h.sim.Stats().Hangs)
	assert.Zero(t, h.sim.EffectCount("k"))
	assert.Empty(t, h.sim.Ledger().Keys, "a hang before the effect holds no key")
}

func TestHangEndsAfterHangFor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Profile: remotesim.Profile{
		HangRate: 1, HangFor: 30 * time.Millisecond,
	}}})
	start := time.Now()
	_, err := h.call(context.Background(), "/payments", "k", payment("o", 1))
	require.Error(t, err, "the connection is dropped without a response")
	assert.NotErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond)
}

func TestCloseReleasesHangs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Profile: remotesim.Profile{HangRate: 1}}})
	errc := make(chan error, 1)
	go func() {
		// A generous deadline only so a broken Close cannot wedge the suite.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := h.call(ctx, "/payments", "k", payment("o", 1))
		errc <- err
	}()
	eventually(t, func() bool { return h.sim.Stats().Hangs == 1 }, "the call hangs")
	h.sim.Close()
	select {
	case err := <-errc:
		require.Error(t, err)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the hanging request")
	}
}

// TestLostResponseThenRetry is why idempotency keys exist: the effect happens,
// the answer never arrives, and the retry must get the stored answer rather
// than a second payment.
func TestLostResponseThenRetry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		mode  string
		check func(t *testing.T, r reply, err error)
	}{
		{remotesim.LostDrop, func(t *testing.T, _ reply, err error) {
			require.Error(t, err)
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
		}},
		{remotesim.LostError, func(t *testing.T, r reply, err error) {
			require.NoError(t, err)
			assert.Equal(t, http.StatusServiceUnavailable, r.status)
			assert.NotEmpty(t, r.header.Get("Retry-After"))
		}},
		{remotesim.LostHang, func(t *testing.T, _ reply, err error) {
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Scripts: []remotesim.Script{{
				Key: "order-9:pay", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultLost, Times: 1, Mode: tc.mode}},
			}}}})

			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			r, err := h.call(ctx, "/payments", "order-9:pay", payment("order-9", 500))
			cancel()
			tc.check(t, r, err)

			require.Equal(t, 1, h.sim.EffectCount("order-9:pay"), "the effect happened although the answer was lost")
			payID := h.sim.Effects()[0].ResourceID

			retry := h.mustCall(t, "/payments", "order-9:pay", payment("order-9", 500))
			require.Equal(t, http.StatusCreated, retry.status, "body %s", retry.body)
			assert.Equal(t, "true", retry.header.Get("Idempotent-Replayed"))
			assert.Equal(t, payID, retry.json(t)["paymentId"])
			assert.Equal(t, 1, h.sim.EffectCount("order-9:pay"))
			assert.Empty(t, h.sim.Duplicates())
			st := h.sim.Stats()
			assert.EqualValues(t, 1, st.Lost)
			assert.EqualValues(t, 1, st.Replays)
		})
	}
}

// Latency is processing time that runs on after the client gives up: a
// deadline shorter than the service is slow makes an effect nobody hears of.
func TestSlowCallCompletesAfterClientDeadline(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Profile: remotesim.Profile{
		LatencyBase: 100 * time.Millisecond,
	}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := h.call(ctx, "/payments", "k", payment("o", 1))
	require.ErrorIs(t, err, context.DeadlineExceeded)

	eventually(t, func() bool { return h.sim.EffectCount("k") == 1 }, "the effect happens anyway")
	r := h.mustCall(t, "/payments", "k", payment("o", 1))
	assert.Equal(t, http.StatusCreated, r.status)
	assert.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
}

func TestLatencyBase(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Profile: remotesim.Profile{
		LatencyBase: 40 * time.Millisecond, LatencyJitter: 10 * time.Millisecond,
	}}})
	start := time.Now()
	r := h.mustCall(t, "/payments", "k", payment("o", 1))
	assert.Equal(t, http.StatusCreated, r.status)
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
}

func TestPathProfiles(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{
		Profile: remotesim.Profile{TransientRate: 1},
		Paths:   map[string]remotesim.Profile{"/refunds": {}},
	}})
	assert.Equal(t, http.StatusServiceUnavailable, h.mustCall(t, "/payments", "p", payment("o", 1)).status)
	assert.Equal(t, http.StatusCreated, h.mustCall(t, "/refunds", "r", payment("o", 1)).status,
		"a path's profile replaces the default")
	st := h.sim.Stats()
	assert.EqualValues(t, 1, st.Paths["/payments"].Transient)
	assert.EqualValues(t, 1, st.Paths["/refunds"].Effects)
}

func TestScripts(t *testing.T) {
	t.Parallel()
	type call struct {
		path, key, orderID string
		want               int
	}
	steps := func(s ...remotesim.ScriptStep) []remotesim.ScriptStep { return s }
	cases := []struct {
		name    string
		profile remotesim.Profile
		scripts []remotesim.Script
		calls   []call
	}{
		{
			name:    "fail the first two calls for a key",
			scripts: []remotesim.Script{{Key: "k", Plan: steps(remotesim.ScriptStep{Fault: remotesim.FaultTransient, Times: 2})}},
			calls: []call{
				{"/payments", "k", "o", 503}, {"/payments", "k", "o", 503}, {"/payments", "k", "o", 201},
				{"/payments", "other", "o", 201},
			},
		},
		{
			name: "always decline an order's payments, refunds go through",
			scripts: []remotesim.Script{{OrderID: "o-7", Path: "/payments",
				Plan: steps(remotesim.ScriptStep{Fault: remotesim.FaultPermanent})}},
			calls: []call{
				{"/payments", "a", "o-7", 402}, {"/payments", "b", "o-7", 402}, {"/payments", "c", "o-7", 402},
				{"/refunds", "d", "o-7", 201}, {"/payments", "e", "o-8", 201},
			},
		},
		{
			name: "a sequence: 429, lost, then the replay",
			scripts: []remotesim.Script{{Key: "k", Plan: steps(
				remotesim.ScriptStep{Fault: remotesim.FaultTransient, Times: 1, Status: 429},
				remotesim.ScriptStep{Fault: remotesim.FaultLost, Times: 1, Mode: remotesim.LostError},
			)}},
			calls: []call{{"/payments", "k", "o", 429}, {"/payments", "k", "o", 503}, {"/payments", "k", "o", 201}},
		},
		{
			name:    "a scripted key is exempt from the rates",
			profile: remotesim.Profile{TransientRate: 1},
			scripts: []remotesim.Script{{Key: "k", Plan: steps(remotesim.ScriptStep{Fault: remotesim.FaultNone, Times: 1})}},
			calls:   []call{{"/payments", "k", "o", 201}, {"/payments", "k", "o", 201}, {"/payments", "x", "o", 503}},
		},
		{
			name:    "a path-only script",
			scripts: []remotesim.Script{{Path: "/shipments", Plan: steps(remotesim.ScriptStep{Fault: remotesim.FaultTransient, Times: 1})}},
			calls:   []call{{"/shipments", "s1", "o", 503}, {"/shipments", "s2", "o", 201}, {"/payments", "p", "o", 201}},
		},
		{
			name: "the first matching script wins",
			scripts: []remotesim.Script{
				{Key: "k", Plan: steps(remotesim.ScriptStep{Fault: remotesim.FaultPermanent, Times: 1})},
				{OrderID: "o", Plan: steps(remotesim.ScriptStep{Fault: remotesim.FaultTransient})},
			},
			calls: []call{{"/payments", "k", "o", 402}, {"/payments", "k", "o", 201}, {"/payments", "j", "o", 503}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{Profile: tc.profile, Scripts: tc.scripts}})
			for i, c := range tc.calls {
				r := h.mustCall(t, c.path, c.key, payment(c.orderID, 10))
				assert.Equal(t, c.want, r.status, "call %d (%s %s): %s", i, c.path, c.key, r.body)
			}
			assert.Empty(t, h.sim.Duplicates())
		})
	}
}

// outcomes runs n sequential calls and returns what each one saw.
func outcomes(t *testing.T, h *harness, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		r := h.mustCall(t, "/payments", fmt.Sprintf("k-%d", i), payment("o", i))
		out[i] = fmt.Sprint(r.status)
	}
	return out
}

func TestSeedIsDeterministic(t *testing.T) {
	t.Parallel()
	profile := remotesim.Profile{TransientRate: 0.3, PermanentRate: 0.2, LostRate: 0.2, LostMode: remotesim.LostError}
	run := func(seed uint64) (*harness, []string) {
		h := newHarness(t, remotesim.Config{Seed: seed, Faults: remotesim.Faults{Profile: profile}})
		return h, outcomes(t, h, 60)
	}
	h, a := run(7)
	_, b := run(7)
	_, c := run(8)
	assert.Equal(t, a, b, "same seed, same story")
	assert.NotEqual(t, a, c, "another seed, another story")

	h.sim.Reset()
	assert.Equal(t, a, outcomes(t, h, 60), "Reset reseeds")
}

// TestRetryingClientsNeverDuplicate is a small chaos run: clients that retry
// everything but permanent failures, through every fault at once, with the
// same key per logical operation. Every operation ends with one effect.
func TestRetryingClientsNeverDuplicate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, remotesim.Config{Seed: 99, Faults: remotesim.Faults{Profile: remotesim.Profile{
		LatencyJitter: 3 * time.Millisecond, SlowRate: 0.05, SlowExtra: 40 * time.Millisecond,
		TransientRate: 0.2, PermanentRate: 0.05, HangRate: 0.05, HangFor: time.Minute,
		LostRate: 0.2, LostMode: remotesim.LostDrop,
	}}})
	const ops = 60
	var mu sync.Mutex
	succeeded := map[string]string{} // key → paymentId
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for op := w; op < ops; op += 6 {
				key := fmt.Sprintf("order-%d:pay", op)
				for attempt := 0; ; attempt++ {
					if !assert.Less(t, attempt, 200, "op %d never settled", op) {
						break
					}
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
					r, err := h.call(ctx, "/payments", key, payment(fmt.Sprintf("order-%d", op), op))
					cancel()
					if err != nil || r.status >= 500 || r.status == http.StatusTooManyRequests || r.status == http.StatusConflict {
						continue // transient: same key again
					}
					if r.status == http.StatusCreated {
						// Not r.json: require must not run off the test goroutine.
						var got struct{ PaymentID string }
						assert.NoError(t, json.Unmarshal(r.body, &got))
						mu.Lock()
						succeeded[key] = got.PaymentID
						mu.Unlock()
					}
					break // success or permanent
				}
			}
		})
	}
	wg.Wait()

	assert.Empty(t, h.sim.Duplicates())
	for key, id := range succeeded {
		require.Equal(t, 1, h.sim.EffectCount(key), key)
		for _, e := range h.sim.Effects() {
			if e.Key == key {
				assert.Equal(t, id, e.ResourceID, key)
			}
		}
	}
	st := h.sim.Stats()
	t.Logf("calls %d, effects %d, replays %d, lost %d, transient %d, hangs %d, permanent %d, busy %d",
		st.Calls, st.Effects, st.Replays, st.Lost, st.Transient, st.Hangs, st.Permanent, st.Busy)
	assert.Positive(t, st.Replays, "the run exercised replays")
}

func TestNewRejectsBadKnobs(t *testing.T) {
	t.Parallel()
	_, err := remotesim.New(remotesim.Config{Faults: remotesim.Faults{Profile: remotesim.Profile{HangRate: 2}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "hangRate")
}

// An undo commutes with what it undoes: a forward call that reaches its
// effect after its undo took effect makes none, and says so with a stored 409
// that has no Retry-After (a permanent answer). A forward call done before
// its undo is undone as usual.
func TestUndoCancelsALaterForwardCall(t *testing.T) {
	t.Parallel()
	t.Run("undo first, then the late call", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, remotesim.Config{Seed: 1})
		undo := h.mustCall(t, "/refunds", "o-late:1:undo", payment("o-late", 42))
		require.Equal(t, http.StatusCreated, undo.status)

		late := h.mustCall(t, "/payments", "o-late:1", payment("o-late", 42))
		assert.Equal(t, http.StatusConflict, late.status, "body %s", late.body)
		assert.Equal(t, "cancelled", late.errorType(t))
		assert.Empty(t, late.header.Get("Retry-After"), "a cancelled key is not busy: no Retry-After")
		assert.Zero(t, h.sim.EffectCount("o-late:1"))

		again := h.mustCall(t, "/payments", "o-late:1", payment("o-late", 42))
		assert.Equal(t, http.StatusConflict, again.status)
		assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"), "the refusal is stored")
		assert.Zero(t, h.sim.EffectCount("o-late:1"))
		assert.EqualValues(t, 1, h.sim.Stats().Cancelled)

		// Another step's key, and the same step of another generation, are
		// not cancelled.
		assert.Equal(t, http.StatusCreated, h.mustCall(t, "/payments", "o-late:2", payment("o-late", 42)).status)
		assert.Equal(t, http.StatusCreated, h.mustCall(t, "/payments", "o-late:1:g1", payment("o-late", 42)).status)
	})
	t.Run("the forward call in flight when the undo lands", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, remotesim.Config{Faults: remotesim.Faults{
			Paths: map[string]remotesim.Profile{"/payments": {LatencyBase: 500 * time.Millisecond}},
		}})
		done := make(chan reply, 1)
		go func() {
			r, err := h.call(context.Background(), "/payments", "o-race:0", payment("o-race", 1))
			assert.NoError(t, err)
			done <- r
		}()
		eventually(t, func() bool {
			keys := h.sim.Ledger().Keys
			return len(keys) == 1 && keys[0].State == "inFlight"
		}, "the forward call holds its key")
		require.Equal(t, http.StatusCreated, h.mustCall(t, "/refunds", "o-race:0:undo", payment("o-race", 1)).status)
		assert.Equal(t, http.StatusConflict, (<-done).status)
		assert.Zero(t, h.sim.EffectCount("o-race:0"))
	})
	t.Run("done, then undone", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, remotesim.Config{Seed: 1})
		require.Equal(t, http.StatusCreated, h.mustCall(t, "/payments", "o-ok:0", payment("o-ok", 1)).status)
		require.Equal(t, http.StatusCreated, h.mustCall(t, "/refunds", "o-ok:0:undo", payment("o-ok", 1)).status)
		replay := h.mustCall(t, "/payments", "o-ok:0", payment("o-ok", 1))
		assert.Equal(t, http.StatusCreated, replay.status, "a call done before its undo replays as before")
		assert.Equal(t, 1, h.sim.EffectCount("o-ok:0"))
	})
}
