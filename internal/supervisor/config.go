package supervisor

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
	"github.com/sas-go/sas/internal/sqslimits"
)

// Defaults and limits of Config.
const (
	DefaultMaxFailures   = sas.DefaultMaxAttempts // one default, written once (docs/workflows.md, "Retries: one word per idea")
	DefaultPickupTimeout = sizing.DefaultPickupTimeout
	DefaultBaseBackoff   = 5 * time.Second
	DefaultMaxBackoff    = MaxDelay
	DefaultPageSize      = 100
	MaxPageSize          = 1000
	// DefaultBudget leaves a 60-second Lambda ample room to finish the page
	// in hand, send its messages and flush its logs after the budget ends.
	DefaultBudget = 20 * time.Second
	DefaultActor  = "supervisor"
	// DefaultWaitLimit is how long, beyond its deadline, a held step may wait
	// for a busy agent queue when its step sets no WaitLimit.
	DefaultWaitLimit = sizing.DefaultWaitLimit
	// DefaultOwedRetry: a give-up's effects not sent by the run that gave
	// up are re-sent by the first sweep at least this long after it.
	DefaultOwedRetry = 30 * time.Second
	// DefaultCompensateRecheck: a give-up's compensate request, once sent,
	// stays owed until the compensation it asks for starts; if it has not
	// by then, it is sent again this long after. It is the longest the
	// request can live in the control queue before its dead-letter queue
	// without a renewal (the scheduler renews it, so usually longer).
	DefaultCompensateRecheck = sizing.SchedulerVisibility * sizing.MaxReceiveCount

	// MaxDelay is the longest SQS message delay: the backoff cannot be longer,
	// because the backoff is the retry message's delay.
	MaxDelay = sqslimits.MaxDelay
)

// Config configures a Supervisor. Zero values take the defaults above; New
// checks the result.
type Config struct {
	Store sas.StateStore // required
	Queue sas.Queue      // required
	// Alerter tells operators about given-up steps. Required: a supervisor
	// that gives up silently is worse than one that does not start.
	Alerter sas.Alerter
	// ControlQueueURL receives retry and compensate messages: the
	// scheduler's control queue, which only the supervisor and operators
	// may send to (docs/trust.md). Required.
	ControlQueueURL string
	Clock           sas.Clock // default sas.SystemClock

	// MaxFailures is the failure count at which a step is given up (to
	// Error or CompensationFailed); 1 gives up at the first stall.
	MaxFailures int
	// PickupTimeout is how long a handed-back step may wait, after its retry
	// message becomes visible, before a later sweep re-drives it.
	PickupTimeout time.Duration
	// BaseBackoff is the retry delay after the first failure, doubled per
	// failure up to MaxBackoff (at most MaxDelay); whole seconds, as SQS.
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// UndoRetry is the retry policy of an undo whose step sets none (default
	// sas.DefaultUndoRetry; docs/workflows.md, "Undo retry policy"); its
	// intervals are SQS delays: whole seconds, at most MaxDelay.
	UndoRetry sas.RetryPolicy

	// PageSize bounds the records one page acts on (and FindDue's per-shard
	// limit): the unit between budget checks and of one batch of sends.
	PageSize int
	// Budget bounds one RunOnce by the Clock: no new page or record is
	// started after it. Keep it well inside the Lambda timeout.
	Budget time.Duration

	// OwedRetry is how long after a give-up a later sweep re-sends its alert
	// and compensate request if they did not get out; then every sweep does.
	OwedRetry time.Duration
	// CompensateRecheck is how long after a give-up's compensate request
	// went out it is sent again if the compensation it asks for has not
	// started (docs/decisions.md, "A give-up's effects are owed until
	// sent").
	CompensateRecheck time.Duration

	// BacklogQueueURLs are the agent and scheduler queues, whose depth a
	// run reads once, when a held step is due, for its report (Backlog).
	// No decision reads it: SQS's depths are approximate, and a step whose
	// pick-up was not reported waits whatever they say (docs/protocol.md,
	// "Deadlines start at pick-up").
	BacklogQueueURLs []string
	// WaitLimit is no longer read (the wait limit gave way to the delivery
	// horizon, docs/decisions.md): kept so that a configuration that sets
	// it still loads.
	WaitLimit time.Duration
	// DeliveryHorizon is how long after an unstarted attempt's first
	// passed deadline its request may still be delivered: the agent
	// queues' message retention (default sizing.QueueRetention, which the
	// construct deploys). Past it the step is re-driven as lost.
	DeliveryHorizon time.Duration
	// Workflows are the deployed workflows; a due step's limits come from its
	// order's own version (docs/workflows.md, "Versions"), Steps being the
	// fallback when that cannot be read.
	Workflows sas.Registry
	// Steps are the time limits by step name (sas.Registry.Limits), for a
	// step whose definition Workflows does not find.
	Steps map[string]sas.StepLimits

	// Pauses are the operators' pauses of agents, read once per run: a paused
	// agent's steps (StepAgents) are left alone, and the time paused does not
	// count (docs/console.md, "Pausing an agent").
	Pauses     sas.PauseReader
	StepAgents map[string][]string

	// Actor names this supervisor in the records' history.
	Actor  string
	Logger *slog.Logger // default slog.Default()
	// Metrics receives one CloudWatch Embedded Metric Format line per run
	// (default os.Stdout, which Lambda ships to CloudWatch Logs; io.Discard
	// turns it off).
	Metrics io.Writer
}

// withDefaults fills in the zero fields.
func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = sas.SystemClock{}
	}
	c.MaxFailures = cmp.Or(c.MaxFailures, DefaultMaxFailures)
	c.PickupTimeout = cmp.Or(c.PickupTimeout, DefaultPickupTimeout)
	c.BaseBackoff = cmp.Or(c.BaseBackoff, DefaultBaseBackoff)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, DefaultMaxBackoff)
	c.UndoRetry = c.UndoRetry.Or(sas.DefaultUndoRetry)
	c.PageSize = cmp.Or(c.PageSize, DefaultPageSize)
	c.Budget = cmp.Or(c.Budget, DefaultBudget)
	c.Actor = cmp.Or(c.Actor, DefaultActor)
	c.OwedRetry = cmp.Or(c.OwedRetry, DefaultOwedRetry)
	c.CompensateRecheck = cmp.Or(c.CompensateRecheck, DefaultCompensateRecheck)
	c.WaitLimit = cmp.Or(c.WaitLimit, DefaultWaitLimit)
	c.DeliveryHorizon = cmp.Or(c.DeliveryHorizon, sizing.QueueRetention)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = os.Stdout
	}
	return c
}

// validate names every problem of a configuration with its defaults in.
func (c Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &sas.ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	if c.Store == nil {
		bad("Store", "required")
	}
	if c.Queue == nil {
		bad("Queue", "required")
	}
	if c.Alerter == nil {
		bad("Alerter", "required: given-up steps must reach an operator")
	}
	if c.ControlQueueURL == "" {
		bad("ControlQueueURL", "required")
	}
	if c.MaxFailures < 1 {
		bad("MaxFailures", "%d: want at least 1", c.MaxFailures)
	}
	if c.PickupTimeout < time.Second {
		bad("PickupTimeout", "%s: want at least 1s", c.PickupTimeout)
	}
	if c.BaseBackoff < 0 {
		bad("BaseBackoff", "%s is negative", c.BaseBackoff)
	}
	if c.MaxBackoff < 0 || c.MaxBackoff > MaxDelay {
		bad("MaxBackoff", "%s is outside 0..%s (the SQS delay limit)", c.MaxBackoff, MaxDelay)
	}
	if c.BaseBackoff%time.Second != 0 || c.MaxBackoff%time.Second != 0 {
		bad("BaseBackoff", "%s and MaxBackoff %s: want whole seconds (the unit of an SQS delay)", c.BaseBackoff, c.MaxBackoff)
	}
	if c.BaseBackoff > c.MaxBackoff {
		bad("BaseBackoff", "%s is more than MaxBackoff %s", c.BaseBackoff, c.MaxBackoff)
	}
	if u := c.UndoRetry; u.InitialInterval > u.MaxInterval || u.MaxInterval > MaxDelay || u.Coefficient < 1 ||
		u.InitialInterval%time.Second != 0 || u.MaxInterval%time.Second != 0 {
		bad("UndoRetry", "%+v: want whole-second intervals, the initial at most the maximum, the maximum at most %s, a coefficient of at least 1", u, MaxDelay)
	}
	if c.PageSize < 1 || c.PageSize > MaxPageSize {
		bad("PageSize", "%d is outside 1..%d", c.PageSize, MaxPageSize)
	}
	if c.CompensateRecheck < 0 {
		bad("CompensateRecheck", "%s is negative", c.CompensateRecheck)
	}
	if c.OwedRetry < 0 {
		bad("OwedRetry", "%s is negative", c.OwedRetry)
	}
	if c.Budget < 0 {
		bad("Budget", "%s is negative", c.Budget)
	}
	if c.WaitLimit < 0 {
		bad("WaitLimit", "%s is negative", c.WaitLimit)
	}
	if len(c.BacklogQueueURLs) > 0 {
		if _, ok := c.Queue.(sas.DepthReader); !ok && c.Queue != nil {
			bad("BacklogQueueURLs", "the Queue (%T) cannot read a queue's depth (sas.DepthReader)", c.Queue)
		}
	}
	for name, l := range c.Steps {
		if l.Timeout <= 0 || l.WaitLimit < 0 || l.TotalLimit < 0 {
			bad("Steps", "step %q: want a positive Timeout and no negative limit, got %+v", name, l)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("configuring the supervisor: %w", err)
	}
	return nil
}
