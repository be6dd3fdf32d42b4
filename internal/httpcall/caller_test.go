package httpcall_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

func TestCallOutcomes(t *testing.T) {
	t.Parallel()

	// With Rand fixed at 0.5 and BaseBackoff 100ms the jittered waits are
	// 50ms, 100ms, 200ms, ... (half of min(2s, 100ms·2^n)).
	tests := []struct {
		name         string
		replies      []reply
		maxAttempts  int
		want         error // outcome class; nil for success
		wantAttempts int
		wantStatus   int
		wantSleeps   []time.Duration
		wantBody     string
		wantExcerpt  string // of the *StatusError in the chain, when one is expected
	}{
		{
			name:         "success first try",
			replies:      []reply{{Status: 200, Body: `{"charge":"ch_1"}`}},
			wantAttempts: 1, wantStatus: 200, wantBody: `{"charge":"ch_1"}`,
		},
		{
			name:         "201 is a success",
			replies:      []reply{{Status: 201, Body: "created"}},
			wantAttempts: 1, wantStatus: 201, wantBody: "created",
		},
		{
			name:         "503 twice then 200",
			replies:      []reply{{Status: 503}, {Status: 503}, {Status: 200, Body: "ok"}},
			wantAttempts: 3, wantStatus: 200, wantBody: "ok",
			wantSleeps: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		},
		{
			name:         "429 with Retry-After seconds is a floor",
			replies:      []reply{{Status: 429, Header: map[string]string{"Retry-After": "2"}}, {Status: 200}},
			wantAttempts: 2, wantStatus: 200,
			wantSleeps: []time.Duration{2 * time.Second},
		},
		{
			name: "503 with Retry-After HTTP-date",
			replies: []reply{
				{Status: 503, Header: map[string]string{"Retry-After": clocktest.T0.Add(3 * time.Second).Format(http.TimeFormat)}},
				{Status: 200},
			},
			wantAttempts: 2, wantStatus: 200,
			wantSleeps: []time.Duration{3 * time.Second},
		},
		{
			name: "Retry-After date in the past leaves the jitter",
			replies: []reply{
				{Status: 503, Header: map[string]string{"Retry-After": clocktest.T0.Add(-time.Hour).Format(http.TimeFormat)}},
				{Status: 200},
			},
			wantAttempts: 2, wantStatus: 200,
			wantSleeps: []time.Duration{50 * time.Millisecond},
		},
		{
			name:         "Retry-After below the jitter does not lower it",
			replies:      []reply{{Status: 429, Header: map[string]string{"Retry-After": "0"}}, {Status: 200}},
			wantAttempts: 2, wantStatus: 200,
			wantSleeps: []time.Duration{50 * time.Millisecond},
		},
		{
			name:         "unreadable Retry-After is ignored",
			replies:      []reply{{Status: 503, Header: map[string]string{"Retry-After": "soon"}}, {Status: 200}},
			wantAttempts: 2, wantStatus: 200,
			wantSleeps: []time.Duration{50 * time.Millisecond},
		},
		{
			name:         "Retry-After past the deadline stops at once",
			replies:      []reply{{Status: 503, Header: map[string]string{"Retry-After": "120"}}, {Status: 200}},
			want:         httpcall.ErrDeadline,
			wantAttempts: 1, wantStatus: 503,
		},
		{
			name:         "408 is transient",
			replies:      []reply{{Status: 408}, {Status: 200}},
			wantAttempts: 2, wantStatus: 200,
			wantSleeps: []time.Duration{50 * time.Millisecond},
		},
		{
			name:         "500 502 504 are transient",
			replies:      []reply{{Status: 500}, {Status: 502}, {Status: 504}, {Status: 200}},
			wantAttempts: 4, wantStatus: 200,
			wantSleeps: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
		},
		{
			name:         "always 503 runs out of attempts",
			replies:      []reply{{Status: 503, Body: "overloaded"}},
			maxAttempts:  3,
			want:         httpcall.ErrTransient,
			wantAttempts: 3, wantStatus: 503, wantBody: "overloaded", wantExcerpt: "overloaded",
			wantSleeps: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		},
		{
			name:         "402 is permanent after exactly one attempt",
			replies:      []reply{{Status: 402, Body: "{\"error\":\n  \"card declined\"}"}, {Status: 200}},
			want:         httpcall.ErrPermanent,
			wantAttempts: 1, wantStatus: 402, wantExcerpt: `{"error": "card declined"}`,
		},
		{name: "400 is permanent", replies: []reply{{Status: 400}, {Status: 200}}, want: httpcall.ErrPermanent, wantAttempts: 1, wantStatus: 400},
		{name: "401 is permanent", replies: []reply{{Status: 401}, {Status: 200}}, want: httpcall.ErrPermanent, wantAttempts: 1, wantStatus: 401},
		{name: "403 is permanent", replies: []reply{{Status: 403}, {Status: 200}}, want: httpcall.ErrPermanent, wantAttempts: 1, wantStatus: 403},
		{name: "404 is permanent", replies: []reply{{Status: 404}, {Status: 200}}, want: httpcall.ErrPermanent, wantAttempts: 1, wantStatus: 404},
		{name: "409 is permanent", replies: []reply{{Status: 409}, {Status: 200}}, want: httpcall.ErrPermanent, wantAttempts: 1, wantStatus: 409},
		{
			name:         "409 with Retry-After is a busy idempotency key: asked again",
			replies:      []reply{{Status: 409, Header: map[string]string{"Retry-After": "1"}}, {Status: 200}},
			wantAttempts: 2, wantStatus: 200,
			wantSleeps: []time.Duration{time.Second},
		},
		{name: "422 is permanent", replies: []reply{{Status: 422}, {Status: 200}}, want: httpcall.ErrPermanent, wantAttempts: 1, wantStatus: 422},
		{name: "501 is permanent", replies: []reply{{Status: 501}, {Status: 200}}, want: httpcall.ErrPermanent, wantAttempts: 1, wantStatus: 501},
		{
			name:         "a redirect is not followed and is permanent",
			replies:      []reply{{Status: 302, Header: map[string]string{"Location": "/elsewhere"}}, {Status: 200}},
			want:         httpcall.ErrPermanent,
			wantAttempts: 1, wantStatus: 302,
		},
		{
			name:         "transient then permanent stops at the permanent",
			replies:      []reply{{Status: 503}, {Status: 409, Body: "already charged differently"}, {Status: 200}},
			want:         httpcall.ErrPermanent,
			wantAttempts: 2, wantStatus: 409, wantExcerpt: "already charged differently",
			wantSleeps: []time.Duration{50 * time.Millisecond},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, tc.replies...)
			clock := newFakeClock()
			cfg := testConfig(clock)
			if tc.maxAttempts != 0 {
				cfg.MaxTries = tc.maxAttempts
			}
			c := newCaller(t, cfg)
			req := newRequest(svc.URL(), clock)

			res, err := c.Call(context.Background(), req)

			require.Equal(t, tc.want, classOf(t, err), "error: %v", err)
			assert.Equal(t, tc.wantAttempts, res.Tries)
			assert.Equal(t, tc.wantStatus, res.Status)
			if tc.wantBody != "" {
				assert.Equal(t, tc.wantBody, string(res.Body))
			}
			assert.Equal(t, tc.wantSleeps, nilIfEmpty(clock.Sleeps()))
			if tc.wantExcerpt != "" {
				var se *httpcall.StatusError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tc.wantStatus, se.Status)
				assert.Equal(t, tc.wantExcerpt, se.Excerpt)
				assert.Contains(t, err.Error(), tc.wantExcerpt)
			}

			// Every try is the same request: same key, same body, same target.
			got := svc.Requests()
			require.Len(t, got, tc.wantAttempts)
			for i, s := range got {
				assert.Equal(t, http.MethodPost, s.Method, "try %d", i)
				assert.Equal(t, "/charges", s.URI, "try %d", i)
				assert.Equal(t, testKey, s.Key, "try %d", i)
				assert.Equal(t, string(req.Body), s.Body, "try %d", i)
			}
		})
	}
}

func nilIfEmpty(d []time.Duration) []time.Duration {
	if len(d) == 0 {
		return nil
	}
	return d
}

func TestDeadlineTooCloseMakesNoRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		deadline time.Duration // from now
	}{
		{name: "inside the safety margin", deadline: 999 * time.Millisecond},
		{name: "exactly at the safety margin", deadline: time.Second},
		{name: "deadline is now", deadline: 0},
		{name: "deadline passed", deadline: -time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t)
			clock := newFakeClock()
			c := newCaller(t, testConfig(clock)) // SafetyMargin 1s
			req := newRequest(svc.URL(), clock)
			req.Deadline = clock.Now().Add(tc.deadline)

			res, err := c.Call(context.Background(), req)

			require.ErrorIs(t, err, httpcall.ErrDeadline)
			classOf(t, err)
			assert.Zero(t, res.Tries)
			assert.Empty(t, svc.Requests())
			assert.Empty(t, clock.Sleeps())
		})
	}
}

// hangingService blocks every request until the client gives up.
func hangingService(t *testing.T) *service {
	svc := newService(t)
	svc.SetHandler(func(w http.ResponseWriter, r *http.Request, _ int) { <-r.Context().Done() })
	return svc
}

// The hang tests need real time: only a real timer can interrupt a blocked
// network read. They use sas.SystemClock and the default Sleep, and their
// upper bounds leave room for a loaded test machine.
func TestHangStopsAtDeadlineLessMargin(t *testing.T) {
	t.Parallel()
	svc := hangingService(t)
	c := newCaller(t, httpcall.Config{SafetyMargin: 200 * time.Millisecond})
	start := time.Now()
	req := newRequest(svc.URL(), sas.SystemClock{})
	req.Deadline = start.Add(500 * time.Millisecond)
	stop := req.Deadline.Add(-200 * time.Millisecond)

	res, err := c.Call(context.Background(), req)
	ended := time.Now()

	require.ErrorIs(t, err, httpcall.ErrDeadline)
	classOf(t, err)
	assert.Equal(t, 1, res.Tries, "one try, cut at the deadline")
	assert.Len(t, svc.Requests(), 1)
	assert.False(t, ended.Before(stop), "returned %s before Deadline-margin", stop.Sub(ended))
	assert.Less(t, ended.Sub(stop), 3*time.Second, "returned long after Deadline-margin")
}

// A try that hangs ends at its AttemptTimeout and is retried, until the
// step's deadline less the margin. It runs in a synctest bubble against a
// transport that hangs until its try's context ends, so the times are the
// bubble's and exact: tries end at 300ms (timeout), 600ms (timeout) and
// 750ms (the deadline less the margin), however busy the machine.
func TestHangWithAttemptTimeoutRetriesUntilDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var sent atomic.Int64
		hang := roundTripper(func(r *http.Request) (*http.Response, error) {
			sent.Add(1)
			<-r.Context().Done()
			return nil, r.Context().Err()
		})
		c := newCaller(t, httpcall.Config{
			SafetyMargin:   100 * time.Millisecond,
			AttemptTimeout: 300 * time.Millisecond,
			BaseBackoff:    time.Millisecond,
			MaxBackoff:     time.Millisecond,
			Rand:           func() float64 { return 0 }, // no wait between tries
			Client:         &http.Client{Transport: hang},
		})
		start := time.Now()
		req := newRequest("http://remote.test", sas.SystemClock{})
		req.Deadline = start.Add(850 * time.Millisecond)

		res, err := c.Call(context.Background(), req)
		require.ErrorIs(t, err, httpcall.ErrDeadline)
		classOf(t, err)
		require.Equal(t, 3, res.Tries, "two tries timed out and were retried; the third ran into the deadline")
		require.EqualValues(t, 3, sent.Load())
		require.Equal(t, 750*time.Millisecond, time.Since(start), "the deadline less the margin")
	})
}

// roundTripper is an http.RoundTripper of one function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The caller's context ending (a Lambda about to time out) is transient while
// the step still has time, and ErrDeadline once the step's time is up too.
func TestCallerContextEnding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		advance time.Duration // fake time that passes while the try is out
		want    error
	}{
		{name: "before the step deadline", advance: 0, want: httpcall.ErrTransient},
		{name: "after the step deadline", advance: time.Minute, want: httpcall.ErrDeadline},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock()
			svc := newService(t)
			arrived := make(chan struct{})
			svc.SetHandler(func(w http.ResponseWriter, r *http.Request, _ int) {
				clock.Advance(tc.advance)
				close(arrived) // one request only
				<-r.Context().Done()
			})
			c := newCaller(t, testConfig(clock))
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				<-arrived
				cancel()
			}()

			res, err := c.Call(ctx, newRequest(svc.URL(), clock))

			require.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, tc.want, classOf(t, err))
			assert.Equal(t, 1, res.Tries)
			assert.Equal(t, httpcall.BreakerClosed, c.BreakerState(svc.URL()), "says nothing about the service")
		})
	}
	t.Run("while waiting to retry", func(t *testing.T) {
		t.Parallel()
		clock := newFakeClock()
		svc := newService(t, reply{Status: 503})
		cfg := testConfig(clock)
		ctx, cancel := context.WithCancel(context.Background())
		cfg.Sleep = func(context.Context, time.Duration) error {
			cancel()
			return context.Canceled
		}
		c := newCaller(t, cfg)

		res, err := c.Call(ctx, newRequest(svc.URL(), clock))

		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, httpcall.ErrTransient, classOf(t, err))
		var se *httpcall.StatusError
		require.ErrorAs(t, err, &se, "the last failure is kept")
		assert.Equal(t, 503, se.Status)
		assert.Equal(t, 1, res.Tries)
	})
}

func TestNetworkErrorsAreTransient(t *testing.T) {
	t.Parallel()
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		svc := newService(t)
		url := svc.URL()
		svc.srv.Close()
		clock := newFakeClock()
		cfg := testConfig(clock)
		cfg.MaxTries = 3
		c := newCaller(t, cfg)

		res, err := c.Call(context.Background(), newRequest(url, clock))

		assert.Equal(t, httpcall.ErrTransient, classOf(t, err))
		assert.Equal(t, 3, res.Tries)
		assert.Zero(t, res.Status)
		assert.Len(t, clock.Sleeps(), 2)
	})
	t.Run("connection dropped mid-request then success", func(t *testing.T) {
		t.Parallel()
		svc := newService(t)
		svc.SetHandler(func(w http.ResponseWriter, r *http.Request, n int) {
			if n == 0 {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = conn.Close()
				}
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		clock := newFakeClock()
		c := newCaller(t, testConfig(clock))

		res, err := c.Call(context.Background(), newRequest(svc.URL(), clock))

		require.NoError(t, err)
		assert.Equal(t, 2, res.Tries)
		assert.Equal(t, "ok", string(res.Body))
		for _, s := range svc.Requests() {
			assert.Equal(t, testKey, s.Key)
		}
	})
}

// A 2xx is the service saying the work is done, whatever the size of its
// answer: a body over the limit is still a success, cut to the limit and
// marked Truncated (a permanent failure here once reported a charge that
// happened as failed, and compensation then undid it).
func TestResponseLargerThanLimitIsATruncatedSuccess(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{Status: 201, Body: strings.Repeat("x", 101)})
	clock := newFakeClock()
	cfg := testConfig(clock)
	cfg.MaxResponseBytes = 100
	c := newCaller(t, cfg)

	res, err := c.Call(context.Background(), newRequest(svc.URL(), clock))

	require.NoError(t, err)
	assert.Equal(t, 1, res.Tries)
	assert.Equal(t, 201, res.Status)
	assert.Len(t, res.Body, 100)
	assert.True(t, res.Truncated)

	svc = newService(t, reply{Status: 200, Body: strings.Repeat("x", 100)})
	res, err = c.Call(context.Background(), newRequest(svc.URL(), clock))
	require.NoError(t, err)
	assert.Len(t, res.Body, 100)
	assert.False(t, res.Truncated, "exactly the limit is whole")
}

func TestEndpointAndPathJoin(t *testing.T) {
	t.Parallel()
	tests := []struct{ endpointPath, path, wantURI string }{
		{"", "/charges", "/charges"},
		{"/", "charges", "/charges"},
		{"/api/v1", "/charges?expand=all", "/api/v1/charges?expand=all"},
		{"/api/v1/", "charges", "/api/v1/charges"},
		{"/api", "", "/api"},
	}
	for _, tc := range tests {
		t.Run(tc.endpointPath+"+"+tc.path, func(t *testing.T) {
			t.Parallel()
			svc := newService(t)
			clock := newFakeClock()
			c := newCaller(t, testConfig(clock))
			req := newRequest(svc.URL()+tc.endpointPath, clock)
			req.Path = tc.path

			_, err := c.Call(context.Background(), req)

			require.NoError(t, err)
			require.Len(t, svc.Requests(), 1)
			assert.Equal(t, tc.wantURI, svc.Requests()[0].URI)
		})
	}
}

func TestInvalidRequestsSendNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		edit  func(r *httpcall.Request)
		field string
	}{
		{"empty idempotency key", func(r *httpcall.Request) { r.IdempotencyKey = "" }, "IdempotencyKey"},
		{"idempotency key with newline", func(r *httpcall.Request) { r.IdempotencyKey = "a\r\nX-Evil: 1" }, "IdempotencyKey"},
		{"conflicting Idempotency-Key header", func(r *httpcall.Request) { r.Header.Set("Idempotency-Key", "other") }, "Header"},
		{"header value with newline", func(r *httpcall.Request) { r.Header.Set("X-Trace", "a\nb") }, "Header"},
		{"header name with space", func(r *httpcall.Request) { r.Header["Bad Name"] = []string{"v"} }, "Header"},
		{"zero deadline", func(r *httpcall.Request) { r.Deadline = time.Time{} }, "Deadline"},
		{"empty method", func(r *httpcall.Request) { r.Method = "" }, "Method"},
		{"relative endpoint", func(r *httpcall.Request) { r.Endpoint = "/charges" }, "Endpoint"},
		{"ftp endpoint", func(r *httpcall.Request) { r.Endpoint = "ftp://127.0.0.1" }, "Endpoint"},
		{"endpoint with query", func(r *httpcall.Request) { r.Endpoint += "?a=b" }, "Endpoint"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t)
			clock := newFakeClock()
			c := newCaller(t, testConfig(clock))
			req := newRequest(svc.URL(), clock)
			tc.edit(&req)

			res, err := c.Call(context.Background(), req)

			assert.Equal(t, sas.ErrInvalid, classOf(t, err))
			var ve *sas.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tc.field, ve.Field)
			assert.Zero(t, res.Tries)
			assert.Empty(t, svc.Requests())
		})
	}
}

func TestMatchingIdempotencyKeyHeaderIsAccepted(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	clock := newFakeClock()
	c := newCaller(t, testConfig(clock))
	req := newRequest(svc.URL(), clock)
	req.Header.Set("Idempotency-Key", testKey)

	_, err := c.Call(context.Background(), req)

	require.NoError(t, err)
	assert.Equal(t, testKey, svc.Requests()[0].Key)
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   httpcall.Config
		field string
	}{
		{"negative attempts", httpcall.Config{MaxTries: -1}, "MaxTries"},
		{"negative base", httpcall.Config{BaseBackoff: -1}, "BaseBackoff"},
		{"negative max", httpcall.Config{MaxBackoff: -1}, "MaxBackoff"},
		{"max below base", httpcall.Config{BaseBackoff: time.Second, MaxBackoff: time.Millisecond}, "MaxBackoff"},
		{"negative attempt timeout", httpcall.Config{AttemptTimeout: -1}, "AttemptTimeout"},
		{"negative margin", httpcall.Config{SafetyMargin: -1}, "SafetyMargin"},
		{"negative response limit", httpcall.Config{MaxResponseBytes: -1}, "MaxResponseBytes"},
		{"negative threshold", httpcall.Config{Breaker: httpcall.BreakerConfig{FailureThreshold: -1}}, "Breaker.FailureThreshold"},
		{"negative open period", httpcall.Config{Breaker: httpcall.BreakerConfig{OpenFor: -1}}, "Breaker.OpenFor"},
		{"negative failure rate", httpcall.Config{Breaker: httpcall.BreakerConfig{FailureRate: -0.5}}, "Breaker.FailureRate"},
		{"negative window", httpcall.Config{Breaker: httpcall.BreakerConfig{Window: -1}}, "Breaker.Window"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := httpcall.New(tc.cfg)
			require.ErrorIs(t, err, sas.ErrInvalid)
			var ve *sas.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tc.field, ve.Field)
			assert.Nil(t, c)
		})
	}
	t.Run("zero config takes defaults", func(t *testing.T) {
		t.Parallel()
		c, err := httpcall.New(httpcall.Config{})
		require.NoError(t, err)
		assert.NotNil(t, c)
	})
	t.Run("large base without max", func(t *testing.T) {
		t.Parallel()
		_, err := httpcall.New(httpcall.Config{BaseBackoff: time.Minute})
		require.NoError(t, err, "the default max must not fall below a given base")
	})
}

// TestBackoffNeverCrossesDeadline drives calls against an always-failing
// service over many random configurations and checks that no wait ends at or
// past Deadline-margin, the Call never outlives it, and the attempts stay
// within bounds.
func TestBackoffNeverCrossesDeadline(t *testing.T) {
	t.Parallel()
	// One service for every seed; each request says which Retry-After it wants.
	svc := newService(t)
	svc.SetHandler(func(w http.ResponseWriter, r *http.Request, _ int) {
		if ra := r.Header.Get("X-Want-Retry-After"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})

	sent := 0
	for seed := range uint64(400) {
		rng := rand.New(rand.NewPCG(seed, 0x5a5))
		base := time.Duration(1+rng.IntN(1000)) * time.Millisecond
		clock := newFakeClock()
		cfg := testConfig(clock)
		cfg.BaseBackoff = base
		cfg.MaxBackoff = base * time.Duration(1+rng.IntN(64))
		cfg.SafetyMargin = time.Duration(1+rng.IntN(3000)) * time.Millisecond
		cfg.MaxTries = 1 + rng.IntN(15)
		cfg.Rand = rng.Float64
		c := newCaller(t, cfg)

		req := newRequest(svc.URL(), clock)
		req.Deadline = clock.Now().Add(time.Duration(rng.IntN(30_000)) * time.Millisecond)
		var floor time.Duration
		if rng.IntN(3) == 0 {
			floor = time.Duration(rng.IntN(5)) * time.Second
			req.Header.Set("X-Want-Retry-After", strconv.Itoa(int(floor/time.Second)))
		}
		stop := req.Deadline.Add(-cfg.SafetyMargin)

		res, err := c.Call(context.Background(), req)

		msg := fmt.Sprintf("seed %d: base %s max %s margin %s attempts %d budget %s retry-after %s: %v",
			seed, cfg.BaseBackoff, cfg.MaxBackoff, cfg.SafetyMargin, cfg.MaxTries, req.Deadline.Sub(clocktest.T0), floor, err)

		class := classOf(t, err)
		require.Contains(t, []error{httpcall.ErrDeadline, httpcall.ErrTransient}, class, msg)
		require.LessOrEqual(t, res.Tries, cfg.MaxTries, msg)
		if class == httpcall.ErrTransient {
			require.Equal(t, cfg.MaxTries, res.Tries, msg)
		}
		if !clocktest.T0.Before(stop) {
			require.Zero(t, res.Tries, msg)
		}
		for i, s := range clock.SleepRecords() {
			require.True(t, s.At.Add(s.D).Before(stop), "sleep %d of %s at %s crosses %s; %s", i, s.D, s.At, stop, msg)
			require.Less(t, s.D, max(cfg.MaxBackoff, floor+time.Nanosecond), "sleep %d; %s", i, msg)
			require.GreaterOrEqual(t, s.D, floor, "sleep %d below Retry-After; %s", i, msg)
		}
		require.True(t, clock.Now().Before(stop) || res.Tries == 0, msg)
		// A try near the deadline gets a real timer as short as the fake time
		// left, so under load it may be cut before it reaches the service.
		sent += res.Tries
		require.LessOrEqual(t, len(svc.Requests()), sent, "more requests than tries; %s", msg)
	}
}

// Only a 409 with Retry-After is a key in progress (ErrKeyInUse, asked
// again); a bare 409 is a genuine conflict: permanent, asked once.
func TestConflictKinds(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		reply      reply
		want       error
		inUse      bool
		wantTries  int
		wantInBody string
	}{
		"bare 409":             {reply{Status: 409, Body: "order already refunded"}, httpcall.ErrPermanent, false, 1, "order already refunded"},
		"409 with Retry-After": {reply{Status: 409, Header: map[string]string{"Retry-After": "1"}, Body: "in progress"}, httpcall.ErrTransient, true, 3, "in progress"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			svc := newService(t, tc.reply)
			clock := newFakeClock()
			cfg := testConfig(clock)
			cfg.MaxTries = 3
			c := newCaller(t, cfg)
			res, err := c.Call(context.Background(), newRequest(svc.URL(), clock))
			require.Equal(t, tc.want, classOf(t, err), "error: %v", err)
			assert.Equal(t, tc.inUse, errors.Is(err, httpcall.ErrKeyInUse), "error: %v", err)
			assert.Equal(t, tc.wantTries, res.Tries)
			assert.Contains(t, err.Error(), tc.wantInBody)
		})
	}
}
