package httpcall_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// breakerConfig opens after 3 failures for 30s; each Call makes at most 3
// tries, so one failing Call opens the breaker.
func breakerConfig(clock *fakeClock) httpcall.Config {
	cfg := testConfig(clock)
	cfg.MaxTries = 3
	cfg.Breaker = httpcall.BreakerConfig{FailureThreshold: 3, OpenFor: 30 * time.Second}
	return cfg
}

// openBreaker makes one Call that fails three times against svc.
func openBreaker(t *testing.T, c *httpcall.Caller, svc *service, clock *fakeClock) {
	t.Helper()
	svc.SetScript(reply{Status: 503})
	before := len(svc.Requests())
	res, err := c.Call(context.Background(), newRequest(svc.URL(), clock))
	require.ErrorIs(t, err, httpcall.ErrTransient)
	require.Equal(t, 3, res.Tries)
	require.Len(t, svc.Requests(), before+3)
	require.Equal(t, httpcall.BreakerOpen, c.BreakerState(svc.URL()))
}

func TestBreakerLifecycle(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	clock := newFakeClock()
	c := newCaller(t, breakerConfig(clock))

	require.Equal(t, httpcall.BreakerClosed, c.BreakerState(svc.URL()))
	openBreaker(t, c, svc, clock)
	openedAt := clock.Now()
	sent := len(svc.Requests())

	// Open: rejected at once, nothing sent, no wait (a failed try).
	svc.SetScript(reply{Status: 200})
	sleepsBefore := len(clock.Sleeps())
	req := newRequest(svc.URL(), clock)
	req.Deadline = clock.Now().Add(10 * time.Second)
	res, err := c.Call(context.Background(), req)
	require.ErrorIs(t, err, httpcall.ErrCircuitOpen)
	assert.Equal(t, httpcall.ErrTransient, classOf(t, err))
	assert.Zero(t, res.Tries)
	assert.Len(t, svc.Requests(), sent)
	assert.Len(t, clock.Sleeps(), sleepsBefore)

	// Still open just before the cool-down ends.
	clock.Advance(openedAt.Add(30*time.Second - time.Nanosecond).Sub(clock.Now()))
	assert.Equal(t, httpcall.BreakerOpen, c.BreakerState(svc.URL()))

	// Half-open at the end of the cool-down; a failed probe reopens it.
	clock.Advance(time.Nanosecond)
	assert.Equal(t, httpcall.BreakerHalfOpen, c.BreakerState(svc.URL()))
	svc.SetScript(reply{Status: 503})
	req = newRequest(svc.URL(), clock)
	req.Deadline = clock.Now().Add(10 * time.Second)
	res, err = c.Call(context.Background(), req)
	require.ErrorIs(t, err, httpcall.ErrCircuitOpen, "after the probe failed the next try was rejected")
	assert.Equal(t, httpcall.ErrTransient, classOf(t, err))
	assert.Equal(t, 1, res.Tries, "exactly one probe")
	assert.Equal(t, 503, res.Status)
	assert.Equal(t, httpcall.BreakerOpen, c.BreakerState(svc.URL()))

	// A successful probe closes it.
	clock.Advance(30 * time.Second)
	svc.SetScript(reply{Status: 200, Body: "ok"})
	res, err = c.Call(context.Background(), newRequest(svc.URL(), clock))
	require.NoError(t, err)
	assert.Equal(t, 1, res.Tries)
	assert.Equal(t, httpcall.BreakerClosed, c.BreakerState(svc.URL()))

	// Closed again: failures are counted from zero.
	svc.SetScript(reply{Status: 503}, reply{Status: 503}, reply{Status: 200})
	res, err = c.Call(context.Background(), newRequest(svc.URL(), clock))
	require.NoError(t, err)
	assert.Equal(t, 3, res.Tries)
	assert.Equal(t, httpcall.BreakerClosed, c.BreakerState(svc.URL()))
}

func TestBreakerRejectsWithoutRequestWhenOutOfTries(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{Status: 503})
	clock := newFakeClock()
	cfg := breakerConfig(clock)
	cfg.MaxTries = 1
	c := newCaller(t, cfg)
	for range 3 {
		_, err := c.Call(context.Background(), newRequest(svc.URL(), clock))
		require.ErrorIs(t, err, httpcall.ErrTransient)
	}
	require.Equal(t, httpcall.BreakerOpen, c.BreakerState(svc.URL()))

	// With one try allowed, the rejection is the last cause of an ErrTransient.
	res, err := c.Call(context.Background(), newRequest(svc.URL(), clock))

	require.ErrorIs(t, err, httpcall.ErrCircuitOpen)
	assert.Equal(t, httpcall.ErrTransient, classOf(t, err))
	assert.Zero(t, res.Tries)
	assert.Len(t, svc.Requests(), 3)
	assert.Empty(t, clock.Sleeps())
}

// Issue 19: an open breaker is a failed try, not a wait. With a budget
// far longer than the open period, a Call to an endpoint that is down ends
// at once, having sent nothing and slept nothing, and says why; the agent
// then reports the attempt failed and the step's retry policy decides when
// to run it again.
func TestBreakerOpenFailsTheCallAtOnce(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	clock := newFakeClock()
	c := newCaller(t, breakerConfig(clock))
	openBreaker(t, c, svc, clock)
	sent := len(svc.Requests())
	sleepsBefore := len(clock.Sleeps())
	start := clock.Now()

	req := newRequest(svc.URL(), clock)
	req.Deadline = start.Add(time.Hour) // the open period (30s) fits many times
	res, err := c.Call(context.Background(), req)

	require.ErrorIs(t, err, httpcall.ErrCircuitOpen)
	assert.Equal(t, httpcall.ErrTransient, classOf(t, err))
	assert.Zero(t, res.Tries)
	assert.Len(t, svc.Requests(), sent, "nothing sent")
	assert.Len(t, clock.Sleeps(), sleepsBefore, "no wait for the breaker to half-open")
	assert.Equal(t, start, clock.Now())
	assert.Equal(t, httpcall.BreakerOpen, c.BreakerState(svc.URL()))
}

// A Call whose tries open the breaker ends on the refusal of its next try:
// the tries it made, then the refusal, with no wait for the open period.
func TestBreakerOpeningMidCallEndsIt(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{Status: 503})
	clock := newFakeClock()
	cfg := breakerConfig(clock)
	cfg.MaxTries = 10
	c := newCaller(t, cfg)
	start := clock.Now()

	res, err := c.Call(context.Background(), newRequest(svc.URL(), clock))

	require.ErrorIs(t, err, httpcall.ErrCircuitOpen)
	assert.Equal(t, httpcall.ErrTransient, classOf(t, err))
	assert.ErrorContains(t, err, "after 3 tries")
	assert.ErrorContains(t, err, "HTTP 503", "the last failure is kept")
	assert.Equal(t, 3, res.Tries, "the threshold's tries, then the refusal")
	assert.Len(t, svc.Requests(), 3)
	// Two backoffs between the three tries (50ms, 100ms), none after.
	assert.Equal(t, []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}, clock.Sleeps())
	assert.Less(t, clock.Now().Sub(start), time.Second)
}

func TestBreakerIsPerEndpoint(t *testing.T) {
	t.Parallel()
	bad := newService(t)
	good := newService(t, reply{Status: 200, Body: "fine"})
	clock := newFakeClock()
	c := newCaller(t, breakerConfig(clock))
	openBreaker(t, c, bad, clock)

	res, err := c.Call(context.Background(), newRequest(good.URL(), clock))

	require.NoError(t, err)
	assert.Equal(t, 1, res.Tries)
	assert.Equal(t, httpcall.BreakerClosed, c.BreakerState(good.URL()))
	assert.Equal(t, httpcall.BreakerOpen, c.BreakerState(bad.URL()))
	assert.Equal(t, httpcall.BreakerOpen, c.BreakerState(bad.URL()+"/"), "a trailing slash names the same endpoint")
}

func TestBreakerPermanentAnswersKeepItClosed(t *testing.T) {
	t.Parallel()
	svc := newService(t, reply{Status: 422})
	clock := newFakeClock()
	c := newCaller(t, breakerConfig(clock))

	for range 10 {
		_, err := c.Call(context.Background(), newRequest(svc.URL(), clock))
		require.ErrorIs(t, err, httpcall.ErrPermanent)
	}
	assert.Equal(t, httpcall.BreakerClosed, c.BreakerState(svc.URL()))
	assert.Len(t, svc.Requests(), 10)
}

func TestBreakerHalfOpenAdmitsOneProbe(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	clock := newFakeClock()
	c := newCaller(t, breakerConfig(clock))
	openBreaker(t, c, svc, clock)
	clock.Advance(30 * time.Second)

	arrived := make(chan struct{})
	release := make(chan struct{})
	svc.SetHandler(func(w http.ResponseWriter, r *http.Request, _ int) {
		close(arrived) // only one request may arrive
		<-release
		_, _ = w.Write([]byte("probe ok"))
	})
	sent := len(svc.Requests())

	type result struct {
		res httpcall.Result
		err error
	}
	probe := make(chan result, 1)
	go func() {
		res, err := c.Call(context.Background(), newRequest(svc.URL(), clock))
		probe <- result{res, err}
	}()
	<-arrived

	// While the probe is out every try is rejected: this Call ends at once.
	res, err := c.Call(context.Background(), newRequest(svc.URL(), clock))
	require.ErrorIs(t, err, httpcall.ErrCircuitOpen)
	assert.Equal(t, httpcall.ErrTransient, classOf(t, err))
	assert.Zero(t, res.Tries)
	assert.Equal(t, httpcall.BreakerHalfOpen, c.BreakerState(svc.URL()))

	close(release)
	p := <-probe
	require.NoError(t, p.err)
	assert.Equal(t, 1, p.res.Tries)
	assert.Len(t, svc.Requests(), sent+1)
	assert.Equal(t, httpcall.BreakerClosed, c.BreakerState(svc.URL()))
}

func TestBreakerOpensOnHangs(t *testing.T) {
	t.Parallel()
	svc := hangingService(t)
	c := newCaller(t, httpcall.Config{
		SafetyMargin: 10 * time.Millisecond,
		Breaker:      httpcall.BreakerConfig{FailureThreshold: 2, OpenFor: time.Hour},
	})
	for range 2 {
		req := newRequest(svc.URL(), sas.SystemClock{})
		req.Deadline = time.Now().Add(300 * time.Millisecond)
		_, err := c.Call(context.Background(), req)
		require.ErrorIs(t, err, httpcall.ErrDeadline)
	}
	assert.Equal(t, httpcall.BreakerOpen, c.BreakerState(svc.URL()))
}

// TestConcurrentCallsShareOneCaller runs many Calls at once through one
// Caller (run with -race). Each order's first try fails; every Call must
// succeed on its second try with its own key, never another's.
func TestConcurrentCallsShareOneCaller(t *testing.T) {
	t.Parallel()
	const calls = 64
	svc := newService(t)
	var mu sync.Mutex
	perKey := map[string]int{}
	svc.SetHandler(func(w http.ResponseWriter, r *http.Request, _ int) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		perKey[key]++
		n := perKey[key]
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprint(w, key)
	})
	clock := newFakeClock()
	cfg := testConfig(clock)
	cfg.Rand = nil // the default, safe for concurrent use
	c := newCaller(t, cfg)

	var wg sync.WaitGroup
	errs := make([]error, calls)
	results := make([]httpcall.Result, calls)
	for i := range calls {
		wg.Go(func() {
			req := newRequest(svc.URL(), clock)
			req.IdempotencyKey = fmt.Sprintf("order-%d/step-0", i)
			results[i], errs[i] = c.Call(context.Background(), req)
		})
	}
	wg.Wait()

	for i := range calls {
		key := fmt.Sprintf("order-%d/step-0", i)
		require.NoError(t, errs[i], key)
		assert.Equal(t, 2, results[i].Tries, key)
		assert.Equal(t, key, string(results[i].Body))
		assert.Equal(t, 2, perKey[key], key)
	}
	assert.Len(t, perKey, calls)
	assert.Equal(t, httpcall.BreakerClosed, c.BreakerState(svc.URL()))
}

// TestConcurrentCallsOpenTheBreaker hammers a failing endpoint from many
// goroutines: the breaker must open, and once open it sends nothing more.
func TestConcurrentCallsOpenTheBreaker(t *testing.T) {
	t.Parallel()
	const calls = 32
	svc := newService(t, reply{Status: 503})
	clock := newFakeClock()
	cfg := breakerConfig(clock)
	cfg.Rand = nil
	c := newCaller(t, cfg)

	var wg sync.WaitGroup
	var attempts atomic.Int64
	for range calls {
		wg.Go(func() {
			req := newRequest(svc.URL(), clock)
			req.Deadline = clock.Now().Add(10 * time.Second) // shorter than OpenFor
			res, err := c.Call(context.Background(), req)
			attempts.Add(int64(res.Tries))
			if !errors.Is(err, httpcall.ErrTransient) && !errors.Is(err, httpcall.ErrDeadline) {
				t.Errorf("unexpected outcome: %v", err)
			}
		})
	}
	wg.Wait()

	assert.Equal(t, httpcall.BreakerOpen, c.BreakerState(svc.URL()))
	assert.Equal(t, int(attempts.Load()), len(svc.Requests()))
	assert.LessOrEqual(t, len(svc.Requests()), calls*3)

	sent := len(svc.Requests())
	req := newRequest(svc.URL(), clock)
	req.Deadline = clock.Now().Add(10 * time.Second)
	_, err := c.Call(context.Background(), req)
	require.ErrorIs(t, err, httpcall.ErrCircuitOpen)
	assert.Len(t, svc.Requests(), sent)
}

// The Breaker on its own, as the agent SDK uses it for its steps: it opens
// at the threshold and rate, refuses while open, admits one probe after
// OpenFor, and gives up a probe that never reports (its run panicked) for
// another after OpenFor, rather than refusing for good.
func TestBreakerAloneReplacesAProbeThatNeverReports(t *testing.T) {
	t.Parallel()
	const openFor = time.Minute
	b := httpcall.NewBreaker(httpcall.BreakerConfig{FailureThreshold: 3, FailureRate: 0.5, Window: time.Hour, OpenFor: openFor})
	now := clocktest.T0
	for range 3 {
		tk, ok := b.Allow(now)
		require.True(t, ok)
		b.Report(tk, true, now)
	}
	require.Equal(t, httpcall.BreakerOpen, b.State(now))
	_, ok := b.Allow(now.Add(openFor - time.Second))
	require.False(t, ok, "open: refused")

	now = now.Add(openFor)
	_, ok = b.Allow(now)
	require.True(t, ok, "half-open: the probe")
	_, ok = b.Allow(now.Add(openFor - time.Second))
	require.False(t, ok, "one probe at a time")
	probe, ok := b.Allow(now.Add(openFor))
	require.True(t, ok, "the silent probe is given up for another")
	b.Report(probe, false, now.Add(openFor))
	require.Equal(t, httpcall.BreakerClosed, b.State(now.Add(openFor)), "a healthy probe closes it")
}
