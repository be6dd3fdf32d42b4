package sas

import (
	"fmt"
	"hash/fnv"
	"math"
	"time"

	"github.com/sas-go/sas/internal/sizing"
)

// Defaults of a RetryPolicy (docs/workflows.md, "Retry policy"). The
// deployment may change the first three (SAS_MAX_FAILURES, and the
// supervisor's backoff); a step's definition may change all of them.
const (
	DefaultMaxAttempts        = sizing.DefaultMaxAttempts
	DefaultInitialInterval    = 5 * time.Second
	DefaultMaxInterval        = 15 * time.Minute // SQS's longest delay: the wait is a message's delay
	DefaultBackoffCoefficient = 2.0
)

// Defaults of an undo's RetryPolicy (docs/workflows.md, "Undo retry
// policy"): an undo rides out an outage instead of failing fast. An order
// being compensated has already failed and its submitter been told; an undo
// that gives up leaves its effect for an operator to undo by hand
// (CompensationFailed), which is worse than waiting. Twenty attempts, the
// wait doubling from 10s to at most 5m, ride out an outage of 38 to 75
// minutes (the jitter draws each wait from its upper half), and once the
// dependency is back the undo runs within 5 minutes.
const (
	DefaultUndoMaxAttempts     = 20
	DefaultUndoInitialInterval = 10 * time.Second
	DefaultUndoMaxInterval     = 5 * time.Minute
)

// DefaultUndoRetry is the retry policy of an undo whose step sets none.
var DefaultUndoRetry = RetryPolicy{MaxAttempts: DefaultUndoMaxAttempts, InitialInterval: DefaultUndoInitialInterval,
	Coefficient: DefaultBackoffCoefficient, MaxInterval: DefaultUndoMaxInterval}

// RetryPolicy is how a step that failed is tried again, in the terms of
// Step Functions' Retry and Temporal's RetryPolicy. An attempt is one claim
// of the step and one request to its agent, which makes up to its tries
// (AgentRequest.Tries) of the call within the step's timeout. An attempt
// fails when its agent reports a transient outcome (it ran the request and
// every try failed, its tries were refused by an open breaker, or its
// timeout passed), or when the supervisor finds it past its deadline with
// nothing left in the queues for it. The failure numbered MaxAttempts gives
// the step up: Error, an operator alert, and the order's compensation.
// Before each other attempt the step waits Interval(failures).
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, the first included: 1 never
	// retries. The workflow file's maximumAttempts, formerly
	// failureThreshold.
	MaxAttempts int
	// InitialInterval is the wait after the first failure.
	InitialInterval time.Duration
	// Coefficient multiplies the wait after each further failure (at
	// least 1; 1 is a constant wait).
	Coefficient float64
	// MaxInterval caps the wait (and SQS caps it at 15 minutes).
	MaxInterval time.Duration
}

// Or fills in p's zero fields from d.
func (p RetryPolicy) Or(d RetryPolicy) RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.InitialInterval <= 0 {
		p.InitialInterval = d.InitialInterval
	}
	if p.Coefficient <= 0 {
		p.Coefficient = d.Coefficient
	}
	if p.MaxInterval <= 0 {
		p.MaxInterval = d.MaxInterval
	}
	return p
}

// WithDefaults fills in the zero fields.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.InitialInterval <= 0 {
		p.InitialInterval = DefaultInitialInterval
	}
	if p.Coefficient < 1 {
		p.Coefficient = DefaultBackoffCoefficient
	}
	if p.MaxInterval <= 0 {
		p.MaxInterval = DefaultMaxInterval
	}
	p.MaxInterval = min(max(p.MaxInterval, p.InitialInterval), DefaultMaxInterval)
	return p
}

// Backoff is the wait after the failures-th failure (from 1), without
// jitter: InitialInterval · Coefficient^(failures-1), at most MaxInterval.
func (p RetryPolicy) Backoff(failures int) time.Duration {
	p = p.WithDefaults()
	d := float64(p.InitialInterval)
	for i := 1; i < failures && d < float64(p.MaxInterval); i++ {
		d *= p.Coefficient
	}
	return min(time.Duration(math.Min(d, float64(p.MaxInterval))), p.MaxInterval)
}

// Interval is the wait after the failures-th failure with jitter: drawn
// from [Backoff/2, Backoff] ("equal jitter"), so that the orders an outage
// failed together do not come back together, and rounded up to a whole
// second, the unit of an SQS delay. The draw is a hash of seed (the step's
// key and attempt): the same attempt always waits the same, so a replay
// (the simulator's, a redelivered reply) decides the same.
func (p RetryPolicy) Interval(failures int, seed string) time.Duration {
	b := p.Backoff(failures)
	h := fnv.New64a()
	h.Write([]byte(seed))
	frac := float64(h.Sum64()>>11) / float64(1<<53) // [0, 1)
	d := b/2 + time.Duration(frac*float64(b-b/2))
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return min(d, DefaultMaxInterval)
}

// JitterSeed is the seed of Interval for the failure of attempt of the step
// at k: the scheduler (counting an agent's transient outcome) and the
// supervisor (rescuing a stalled attempt) draw the same wait for the same
// failure, and a replay draws it again.
func JitterSeed(k StepKey, attempt int) string {
	return fmt.Sprintf("%s/%d", k, attempt)
}
