package httpcall

import (
	"sync"
	"time"
)

// BreakerConfig sets the circuit breaker each endpoint gets.
//
// The breaker counts the tries to the endpoint across every Call of one
// Caller over a sliding window (Window, in ten buckets), and opens when the
// unhealthy ones are both at least FailureThreshold and at least FailureRate
// of the window's tries (defaults: 5, 80%, 10s). A rate, not a count of failures in a row: an agent
// makes hundreds of concurrent calls, and at that volume a service that
// fails one try in four has runs of five failures every few seconds, while
// it still serves three tries in four; opening on those runs would turn a
// partial fault into an outage (docs/protocol.md, "Agent"). Unhealthy means
// a transient outcome (network error, a try's timeout, 408, 429, 5xx) or a
// try cut short by the step's deadline, since a service that hangs must open
// the breaker too. Any other answer, a permanent 4xx included, shows the
// service is up and counts as healthy.
type BreakerConfig struct {
	// FailureThreshold is the fewest unhealthy tries in the window that
	// open the breaker. Default 5.
	FailureThreshold int
	// FailureRate is the share of the window's tries that must be unhealthy
	// for the breaker to open, in (0, 1]; above 1 it never opens. Default
	// 0.8: a breaker protects a service that is down, and costs every call
	// its open period, so it must not open on one that is degraded but
	// still serves most calls (measured: at 0.5, a service failing 45% of
	// tries opened it again and again, and 3,000 orders made 9 in 100 s
	// against 1,338 with no breaker).
	FailureRate float64
	// Window is how far back tries are counted. Default 10s.
	Window time.Duration
	// OpenFor is how long an open breaker rejects tries before it lets one
	// probe through (half-open). Default 10s.
	OpenFor time.Duration
}

// BreakerState is the state of one endpoint's breaker.
type BreakerState int

const (
	// BreakerClosed lets every try through and counts failures.
	BreakerClosed BreakerState = iota
	// BreakerOpen rejects every try until its open period ends.
	BreakerOpen
	// BreakerHalfOpen lets one probe through; its outcome closes or reopens.
	BreakerHalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "unknown"
}

// health is what one try says about the endpoint.
type health int

const (
	// neutral: the try says nothing (the caller's own context ended).
	neutral health = iota
	healthy
	unhealthy
)

// unhealthyRun is unhealthy, under a name Report's parameter does not hide.
const unhealthyRun = unhealthy

// breaker is one endpoint's breaker. Every state change bumps gen, and a
// report carries the gen its try was admitted under: a slow try admitted while
// closed must not close a breaker that has opened since, nor reopen one that a
// probe has just closed.
type breaker struct {
	cfg BreakerConfig

	mu        sync.Mutex
	state     BreakerState
	gen       uint64
	window    [windowBuckets]bucket // tries while closed, by time
	openUntil time.Time             // while open
	probing   bool                  // while half-open: the probe is out
	probeAt   time.Time             // when it went out
}

// windowBuckets is how many buckets the window is cut into: the window slides
// by a tenth of its length.
const windowBuckets = 10

// bucket counts the tries reported in one slice of the window.
type bucket struct {
	slice          int64 // which slice of time (now / (Window/windowBuckets))
	total, failing int
}

// note counts one try at now and returns the window's totals.
func (b *breaker) note(now time.Time, h health) (total, failing int) {
	width := max(b.cfg.Window/windowBuckets, time.Nanosecond)
	slice := now.UnixNano() / int64(width)
	cur := &b.window[slice%windowBuckets]
	if cur.slice != slice {
		*cur = bucket{slice: slice}
	}
	cur.total++
	if h == unhealthy {
		cur.failing++
	}
	for _, bk := range b.window {
		if bk.slice > slice-windowBuckets && bk.slice <= slice {
			total += bk.total
			failing += bk.failing
		}
	}
	return total, failing
}

// ticket admits one try.
type ticket struct {
	gen uint64
}

// allow admits a try or rejects it. On rejection, retryAt is when the open
// period ends, or zero when a half-open probe is already out (nobody can know
// when it will come back).
func (b *breaker) allow(now time.Time) (t ticket, retryAt time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerClosed:
		return ticket{gen: b.gen}, time.Time{}, true
	case BreakerOpen:
		if now.Before(b.openUntil) {
			return ticket{}, b.openUntil, false
		}
		b.setState(BreakerHalfOpen)
	}
	// Half-open. A probe that has not reported within OpenFor (its run
	// panicked, or hangs past any deadline) is given up for another.
	if b.probing && now.Before(b.probeAt.Add(b.cfg.OpenFor)) {
		return ticket{}, time.Time{}, false
	}
	b.probing, b.probeAt = true, now
	return ticket{gen: b.gen}, time.Time{}, true
}

// report records the outcome of an admitted try.
func (b *breaker) report(t ticket, h health, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.gen != b.gen {
		return // admitted before the last state change: stale news
	}
	switch b.state {
	case BreakerClosed:
		if h == neutral {
			return
		}
		total, failing := b.note(now, h)
		if h == unhealthy && failing >= b.cfg.FailureThreshold && float64(failing) >= b.cfg.FailureRate*float64(total) {
			b.open(now)
		}
	case BreakerHalfOpen:
		// Only the probe holds a ticket of this generation.
		b.probing = false
		switch h {
		case healthy:
			b.setState(BreakerClosed)
		case unhealthy:
			b.open(now)
		}
		// neutral: stay half-open so the next try probes instead.
	}
}

func (b *breaker) open(now time.Time) {
	b.setState(BreakerOpen)
	b.openUntil = now.Add(b.cfg.OpenFor)
}

func (b *breaker) setState(s BreakerState) {
	b.state = s
	b.gen++
	b.window = [windowBuckets]bucket{}
	b.probing = false
}

// current reports the state as a try at now would find it.
func (b *breaker) current(now time.Time) BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerOpen && !now.Before(b.openUntil) {
		return BreakerHalfOpen
	}
	return b.state
}

// Breaker is one dependency's circuit breaker: the one a Caller keeps per
// endpoint, for code that calls through something else (the agent SDK's
// breakers, one per dependency of its steps). Safe for concurrent use.
type Breaker struct{ b breaker }

// NewBreaker returns a closed breaker; cfg's zero fields take the defaults
// (DefaultFailureThreshold, DefaultFailureRate, DefaultBreakerWindow,
// DefaultOpenFor).
func NewBreaker(cfg BreakerConfig) *Breaker {
	return &Breaker{b: breaker{cfg: Config{Breaker: cfg}.withDefaults().Breaker}}
}

// Ticket admits one run through a Breaker; its outcome is reported with it.
type Ticket struct{ t ticket }

// Allow admits a run at now, or refuses it (open, or half-open with its
// probe out).
func (b *Breaker) Allow(now time.Time) (Ticket, bool) {
	t, _, ok := b.b.allow(now)
	return Ticket{t}, ok
}

// Report records the outcome of a run Allow admitted: unhealthy when the
// dependency failed it (not a refusal that shows the service answered).
func (b *Breaker) Report(t Ticket, unhealthy bool, now time.Time) {
	h := healthy
	if unhealthy {
		h = unhealthyRun
	}
	b.b.report(t.t, h, now)
}

// State is the breaker's state as a run at now would find it.
func (b *Breaker) State(now time.Time) BreakerState { return b.b.current(now) }

// breakers holds one breaker per endpoint, created on first use. The map
// grows with the number of distinct endpoints, which an agent takes from its
// configuration: a handful.
type breakers struct {
	cfg BreakerConfig
	mu  sync.Mutex
	m   map[string]*breaker
}

func (bs *breakers) get(endpoint string) *breaker {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b, ok := bs.m[endpoint]
	if !ok {
		if bs.m == nil {
			bs.m = make(map[string]*breaker)
		}
		b = &breaker{cfg: bs.cfg}
		bs.m[endpoint] = b
	}
	return b
}
