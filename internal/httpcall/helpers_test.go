package httpcall_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// fakeClock is the Clock and the Sleep: sleeping advances it, instantly,
// and is recorded.
type fakeClock struct {
	*clocktest.Clock
	mu     sync.Mutex
	sleeps []sleepRecord
}

type sleepRecord struct {
	At time.Time
	D  time.Duration
}

func newFakeClock() *fakeClock { return &fakeClock{Clock: clocktest.New(clocktest.T0)} }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, sleepRecord{At: c.Now(), D: d})
	c.Advance(d)
	return nil
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Duration, 0, len(c.sleeps))
	for _, s := range c.sleeps {
		out = append(out, s.D)
	}
	return out
}

func (c *fakeClock) SleepRecords() []sleepRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sleepRecord(nil), c.sleeps...)
}

// reply is one scripted answer.
type reply struct {
	Status int
	Header map[string]string
	Body   string
}

// seen is one request as the service received it.
type seen struct {
	Method, URI, Key string
	Body             string
}

// service is a scripted remote service on 127.0.0.1. It answers the replies
// in order and repeats the last one; handle, when set, replaces the script.
type service struct {
	srv *httptest.Server

	mu     sync.Mutex
	script []reply
	base   int // the script starts at this request number
	seen   []seen
	handle func(w http.ResponseWriter, r *http.Request, n int) // n: 0-based request number
}

func newService(t *testing.T, replies ...reply) *service {
	t.Helper()
	s := &service{script: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *service) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.seen)
	s.seen = append(s.seen, seen{Method: r.Method, URI: r.RequestURI, Key: r.Header.Get("Idempotency-Key"), Body: string(body)})
	handle := s.handle
	var rep reply
	switch i := n - s.base; {
	case len(s.script) == 0:
		rep = reply{Status: http.StatusOK, Body: "ok"}
	case i < len(s.script):
		rep = s.script[i]
	default:
		rep = s.script[len(s.script)-1]
	}
	s.mu.Unlock()

	if handle != nil {
		handle(w, r, n)
		return
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rep.Status)
	_, _ = io.WriteString(w, rep.Body)
}

func (s *service) URL() string { return s.srv.URL }

func (s *service) Requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.seen...)
}

// SetScript replaces the script and restarts it at the next request.
func (s *service) SetScript(replies ...reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script, s.base = replies, len(s.seen)
}

func (s *service) SetHandler(h func(w http.ResponseWriter, r *http.Request, n int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handle = h
}

// testConfig is deterministic: fake time, a jitter of exactly half the
// ceiling, and a breaker that stays out of the way unless a test tunes it.
func testConfig(clock *fakeClock) httpcall.Config {
	return httpcall.Config{
		MaxTries:     5,
		BaseBackoff:  100 * time.Millisecond,
		MaxBackoff:   2 * time.Second,
		SafetyMargin: time.Second,
		Breaker:      httpcall.BreakerConfig{FailureThreshold: 1000, OpenFor: 30 * time.Second},
		Clock:        clock,
		Sleep:        clock.Sleep,
		Rand:         func() float64 { return 0.5 },
	}
}

func newCaller(t *testing.T, cfg httpcall.Config) *httpcall.Caller {
	t.Helper()
	c, err := httpcall.New(cfg)
	require.NoError(t, err)
	return c
}

const testKey = "order-42/step-1"

func newRequest(endpoint string, clock sas.Clock) httpcall.Request {
	return httpcall.Request{
		Endpoint:       endpoint,
		Method:         http.MethodPost,
		Path:           "/charges",
		Body:           []byte(`{"amount":500}`),
		IdempotencyKey: testKey,
		Deadline:       clock.Now().Add(time.Minute),
		Header:         http.Header{"Content-Type": {"application/json"}},
	}
}

// classOf names the one outcome class err belongs to, and fails the test if
// it belongs to none or to several.
func classOf(t *testing.T, err error) error {
	t.Helper()
	if err == nil {
		return nil
	}
	var found []error
	for _, c := range []error{httpcall.ErrPermanent, httpcall.ErrTransient, httpcall.ErrDeadline, sas.ErrInvalid} {
		if errors.Is(err, c) {
			found = append(found, c)
		}
	}
	require.Len(t, found, 1, "error %q must match exactly one outcome class", err)
	return found[0]
}
