package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/httpcall"
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
// It is the HTTP client's breaker (one implementation), fed with runs
// instead of HTTP tries; the same type configures both (HTTPConfig.Breaker),
// but an HTTP client's breaker cannot be turned off.
//
// A run is unhealthy when its Func fails transiently (any error but a
// Permanent one, which shows the service answered) or its context ends
// while it runs. A run the breaker refuses is a failed try of its request,
// not a wait: the request's attempt ends at once with a transient outcome
// (error "CircuitOpen"), and the scheduler's retry policy decides when the
// step is tried again (docs/agents.md, "Circuit breaker"). The same rule as
// the HTTP client's breaker (a rate, not a run of failures; see
// HTTPConfig.Breaker), for calls the SDK cannot see into.
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

// Breaker defaults, the HTTP client's.
const (
	DefaultBreakerThreshold = httpcall.DefaultFailureThreshold
	DefaultBreakerRate      = httpcall.DefaultFailureRate
	DefaultBreakerWindow    = httpcall.DefaultBreakerWindow
	DefaultBreakerOpenFor   = httpcall.DefaultOpenFor
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

// breakerFor is the breaker of a dependency ("" is the agent's own), or nil
// when breakers are off.
func (a *Agent) breakerFor(dependency string) *httpcall.Breaker {
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
			a.breakers = map[string]*httpcall.Breaker{}
		}
		c := a.breakerCfg
		b = httpcall.NewBreaker(httpcall.BreakerConfig{FailureThreshold: c.FailureThreshold, FailureRate: c.FailureRate, Window: c.Window, OpenFor: c.OpenFor})
		a.breakers[dependency] = b
	}
	return b
}
