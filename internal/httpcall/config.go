package httpcall

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Defaults for zero Config fields.
const (
	DefaultMaxTries         = 5
	DefaultBaseBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff       = 5 * time.Second
	DefaultSafetyMargin     = time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultFailureThreshold = 5
	DefaultFailureRate      = 0.8
	DefaultBreakerWindow    = 10 * time.Second
	DefaultOpenFor          = 10 * time.Second
)

// Config configures a Caller. Zero fields take the defaults above; New
// rejects negative or inconsistent values.
type Config struct {
	// MaxTries bounds the tries of one Call. A try an open breaker
	// rejects ends the Call at once (ErrTransient, ErrCircuitOpen).
	MaxTries int
	// BaseBackoff and MaxBackoff shape the wait before retry n (n from 0):
	// uniform in [0, min(MaxBackoff, BaseBackoff·2^n)).
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// AttemptTimeout bounds one try, so a hung connection costs one try rather
	// than the whole step; its expiry is a transient failure. 0: a try may use
	// all the time left.
	AttemptTimeout time.Duration
	// SafetyMargin is kept back from the step's deadline (Request.Deadline):
	// the agent still has to send its reply before that deadline.
	SafetyMargin time.Duration
	// MaxResponseBytes bounds how much of a 2xx body is kept. A larger one is
	// still a success (the service did the work; failing it would have the
	// step undone): Result.Body holds the first MaxResponseBytes and
	// Result.Truncated says so.
	MaxResponseBytes int64
	Breaker          BreakerConfig
	// Client sends the requests. Default: a client of its own transport
	// (so nobody else's CloseIdleConnections cuts its tries), with no overall
	// timeout (the deadline bounds each try), that does not follow redirects
	// because a redirected POST turns into a GET without its body. A 3xx is
	// then ErrPermanent: the endpoint is misconfigured.
	Client *http.Client
	// Clock is the only source of "now". Default sas.SystemClock.
	Clock sas.Clock
	// Sleep waits d or until ctx ends. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a number in [0, 1) and must be safe for concurrent use.
	// Default math/rand/v2.Float64.
	Rand func() float64
}

// withDefaults fills in the zero fields.
func (c Config) withDefaults() Config {
	c.MaxTries = cmp.Or(c.MaxTries, DefaultMaxTries)
	c.BaseBackoff = cmp.Or(c.BaseBackoff, DefaultBaseBackoff)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, max(DefaultMaxBackoff, c.BaseBackoff))
	c.SafetyMargin = cmp.Or(c.SafetyMargin, DefaultSafetyMargin)
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, DefaultMaxResponseBytes)
	c.Breaker.FailureThreshold = cmp.Or(c.Breaker.FailureThreshold, DefaultFailureThreshold)
	c.Breaker.OpenFor = cmp.Or(c.Breaker.OpenFor, DefaultOpenFor)
	c.Breaker.FailureRate = cmp.Or(c.Breaker.FailureRate, DefaultFailureRate)
	c.Breaker.Window = cmp.Or(c.Breaker.Window, DefaultBreakerWindow)
	if c.Client == nil {
		var rt http.RoundTripper = http.DefaultTransport
		if t, ok := rt.(*http.Transport); ok {
			rt = t.Clone()
		}
		c.Client = &http.Client{
			Transport:     rt,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if c.Clock == nil {
		c.Clock = sas.SystemClock{}
	}
	if c.Sleep == nil {
		c.Sleep = Sleep
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return c
}

// validate names the first problem of a configuration with its defaults in
// (a zero field took its default; a negative one is a mistake).
func (c Config) validate() error {
	invalid := func(field, reason string) error { return &sas.ValidationError{Field: field, Reason: reason} }
	for _, f := range []struct {
		name     string
		negative bool
	}{
		{"MaxTries", c.MaxTries < 0},
		{"BaseBackoff", c.BaseBackoff < 0},
		{"MaxBackoff", c.MaxBackoff < 0},
		{"AttemptTimeout", c.AttemptTimeout < 0},
		{"SafetyMargin", c.SafetyMargin < 0},
		{"MaxResponseBytes", c.MaxResponseBytes < 0},
		{"Breaker.FailureThreshold", c.Breaker.FailureThreshold < 0},
		{"Breaker.OpenFor", c.Breaker.OpenFor < 0},
		{"Breaker.FailureRate", c.Breaker.FailureRate < 0},
		{"Breaker.Window", c.Breaker.Window < 0},
	} {
		if f.negative {
			return invalid(f.name, "must not be negative")
		}
	}
	if c.MaxBackoff < c.BaseBackoff {
		return invalid("MaxBackoff", fmt.Sprintf("%s is below BaseBackoff %s", c.MaxBackoff, c.BaseBackoff))
	}
	return nil
}
