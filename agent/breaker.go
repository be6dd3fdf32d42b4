package agent

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// BreakerConfig sets the circuit breaker of an agent's steps (Breaker). A
// breaker guards one dependency: by default every step of the agent shares
// the agent's, and steps that name a dependency (DependsOn) share that
// dependency's. It counts the runs of the steps' Funcs over the last Window,
// across every request the agent serves in its process (an instance), and
// opens when the unhealthy runs are at least FailureThreshold and at least
// FailureRate of the runs. Open, it refuses runs for OpenFor, then lets one
// probe through: a healthy probe closes it, an unhealthy one opens it again.
//
// A run is unhealthy when its Func fails transiently (any error but a
// Permanent one, which shows the service answered) or its context ends
// while it runs. A run the breaker refuses is a failed try of its request,
// not a wait: the request's attempt ends at once with a transient outcome
// (error "CircuitOpen"), and the scheduler's retry policy decides when the
// step is tried again (docs/agents.md, "Circuit breaker"). The same rule as
// the HTTP client's breaker (a rate, not a run of failures; see
// HTTPOptions.Breaker), for calls the SDK cannot see into.
type BreakerConfig struct {
	// FailureThreshold is the fewest unhealthy runs in the window that
	// open the breaker. Default 5. Negative: no breaker.
	FailureThreshold int
	// FailureRate is the share of the window's runs that must be
	// unhealthy, in (0, 1]. Default 0.8.
	FailureRate float64
	// Window is how far back runs are counted. Default 10s.
	Window time.Duration
	// OpenFor is how long an open breaker refuses runs before a probe.
	// Default 10s.
	OpenFor time.Duration
}

// Breaker defaults.
const (
	DefaultBreakerThreshold = 5
	DefaultBreakerRate      = 0.8
	DefaultBreakerWindow    = 10 * time.Second
	DefaultBreakerOpenFor   = 10 * time.Second
)

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.FailureThreshold == 0 {
		c.FailureThreshold = DefaultBreakerThreshold
	}
	if c.FailureRate <= 0 {
		c.FailureRate = DefaultBreakerRate
	}
	if c.Window <= 0 {
		c.Window = DefaultBreakerWindow
	}
	if c.OpenFor <= 0 {
		c.OpenFor = DefaultBreakerOpenFor
	}
	return c
}

// Breaker sets the agent's circuit breakers (one per dependency). Without
// it the defaults above apply; a negative FailureThreshold turns them off.
func Breaker(c BreakerConfig) Option {
	return func(a *Agent) {
		if c.FailureRate > 1 {
			a.fail("Breaker", fmt.Sprintf("FailureRate %v: at most 1", c.FailureRate))
		}
		a.breakerCfg = c.withDefaults()
	}
}

// StepOption tunes one step (Agent.Step).
type StepOption func(*step)

// DependsOn names the dependency a step calls (a service, a database): the
// steps of the agent that name the same one share its circuit breaker. A
// step that names none shares the agent's.
func DependsOn(dependency string) StepOption {
	return func(s *step) { s.dependency = dependency }
}

// ErrCircuitOpen is what a run refused by an open breaker fails with.
var ErrCircuitOpen = errors.New("circuit open")

// circuitOpenError is a refused run: its name is the retry policy's
// "CircuitOpen".
type circuitOpenError struct{ dependency string }

func (e *circuitOpenError) Error() string {
	return fmt.Sprintf("dependency %s: circuit open: its recent calls failed; not called", e.dependency)
}
func (e *circuitOpenError) Unwrap() error     { return ErrCircuitOpen }
func (e *circuitOpenError) ErrorType() string { return sas.ErrorCircuitOpen }

// stepBreaker is one dependency's breaker.
type stepBreaker struct {
	cfg BreakerConfig

	mu        sync.Mutex
	open      bool
	openUntil time.Time
	probing   bool      // half-open: a probe is out
	probeAt   time.Time // when it went out (a probe that never reports, a panic, is replaced after OpenFor)
	gen       uint64    // bumped on every state change: a report of an older run is stale
	runs      []run     // while closed, within the window
}

type run struct {
	at        time.Time
	unhealthy bool
}

// allow admits a run at now, or refuses it.
func (b *stepBreaker) allow(now time.Time) (gen uint64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return b.gen, true
	}
	if now.Before(b.openUntil) || (b.probing && now.Before(b.probeAt.Add(b.cfg.OpenFor))) {
		return 0, false
	}
	b.probing, b.probeAt = true, now // half-open: this run is the probe
	return b.gen, true
}

// report records the health of a run admitted under gen.
func (b *stepBreaker) report(gen uint64, unhealthy bool, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if gen != b.gen {
		return
	}
	if b.open { // the probe's answer
		b.probing = false
		if unhealthy {
			b.trip(now)
		} else {
			b.open, b.runs = false, nil
			b.gen++
		}
		return
	}
	cut := 0
	for cut < len(b.runs) && !b.runs[cut].at.After(now.Add(-b.cfg.Window)) {
		cut++
	}
	b.runs = append(b.runs[cut:], run{at: now, unhealthy: unhealthy})
	failing := 0
	for _, r := range b.runs {
		if r.unhealthy {
			failing++
		}
	}
	if unhealthy && failing >= b.cfg.FailureThreshold && float64(failing) >= b.cfg.FailureRate*float64(len(b.runs)) {
		b.trip(now)
	}
}

func (b *stepBreaker) trip(now time.Time) {
	b.open, b.openUntil, b.probing, b.runs = true, now.Add(b.cfg.OpenFor), false, nil
	b.gen++
}

// breakerFor is the breaker of a dependency ("" is the agent's own), or nil
// when breakers are off.
func (a *Agent) breakerFor(dependency string) *stepBreaker {
	if a.breakerCfg.FailureThreshold < 0 {
		return nil
	}
	if dependency == "" {
		dependency = "agent:" + a.name
	}
	a.breakerMu.Lock()
	defer a.breakerMu.Unlock()
	b, ok := a.breakers[dependency]
	if !ok {
		if a.breakers == nil {
			a.breakers = map[string]*stepBreaker{}
		}
		b = &stepBreaker{cfg: a.breakerCfg}
		a.breakers[dependency] = b
	}
	return b
}
