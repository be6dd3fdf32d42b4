package scheduler

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
)

// Defaults for zero Config fields.
const (
	DefaultStepTimeout   = sizing.DefaultStepTimeout
	DefaultPickupTimeout = sizing.DefaultPickupTimeout
	DefaultOwedRetry     = 30 * time.Second
)

// Config configures a Service. New fills in the defaults and checks the rest.
type Config struct {
	Store     sas.StateStore // required
	Queue     sas.Queue      // required
	Clock     sas.Clock      // default sas.SystemClock
	Alerter   sas.Alerter    // default alerts.Log on Logger: an alert is never silent
	Workflows sas.Registry   // required, at least one workflow
	// Owner is this instance's id, written as LockedBy on every claim;
	// unique per process (Lambda: a random id per cold start). Required.
	Owner string
	// AgentQueues routes each step's request to its agent's queue or
	// priority lane (docs/agents.md); every agent of Workflows needs one.
	AgentQueues sas.AgentQueues
	// IntakeQueueURL marks the intake queue, whose records are read as
	// intakes whatever kind they claim (docs/trust.md).
	IntakeQueueURL string
	// SchedulerQueueURL is the scheduler's own queue; its messages, with the
	// intake's, are renewed on their last receive (renew.go).
	SchedulerQueueURL string
	// MaxReceives is the queues' maxReceiveCount (default DefaultMaxReceives).
	MaxReceives int
	// ControlQueueURL marks the control queue, the only one retries and
	// compensations are taken from (docs/trust.md).
	ControlQueueURL string
	// SigningKey signs every agent request and checks the replies' echo;
	// at least sas.MinSigningKeyBytes, shared by the deployment's schedulers.
	SigningKey []byte
	// Signer, when set, is used instead of SigningKey: a deployment's,
	// which holds the keys still accepted after a rotation and reads them
	// again when they are older than its maximum age (sas.NewSourcedSigner;
	// docs/trust.md, "The signing key").
	Signer *sas.Signer
	// RequireSignedReplies drops unsigned replies; unset, an unsigned reply's
	// echo is ignored and the order read (docs/trust.md).
	RequireSignedReplies bool
	// StepTimeout is a step's time limit when its StepDef has none.
	StepTimeout time.Duration
	// PickupTimeout is how long a new order's first step may stay unclaimed
	// before the supervisor re-drives it.
	PickupTimeout time.Duration
	// Retry is the deployment's retry policy for steps that set none, applied
	// to transient outcomes (transient.go); the supervisor's too.
	Retry sas.RetryPolicy
	// UndoRetry is the deployment's retry policy for undos that set none
	// (default sas.DefaultUndoRetry); the supervisor's too.
	UndoRetry sas.RetryPolicy
	// OwedRetry is when the supervisor re-sends what a scheduler's give-up
	// owes, should the scheduler not get it out (default DefaultOwedRetry).
	OwedRetry time.Duration
	// Schedules are the deployment's schedules by name, whose runs the
	// intake takes (schedule.go, docs/schedules.md). An intake naming a
	// schedule not listed is rejected, and so is an intake without one
	// whose order id is a listed schedule's run's.
	Schedules map[string]sas.ScheduleConfig
	// ReplyToAllowed tells the queues a submitter may name as replyTo; nil
	// allows none.
	ReplyToAllowed func(url string) bool
	// Tenants are the deployment's tenants (docs/trust.md, "Tenants"): a
	// tenant's submitter uses its own order ids only, any other submitter
	// none of them.
	Tenants sas.Tenants
	// SubmitterReplyTo tells the queues one submitter may name as replyTo
	// (config.Config.SubmitterReplyTo: a tenant's its own); nil is
	// ReplyToAllowed for every submitter. The deployment's own queues are
	// refused whatever it says.
	SubmitterReplyTo func(submitter, url string) bool
	Logger           *slog.Logger // default slog.Default()
	// Metrics receives the scheduler's EMF lines (internal/metrics); nil
	// publishes none, since tests and the simulator build schedulers by the
	// hundred.
	Metrics io.Writer
}

// withDefaults fills in the zero fields.
func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = sas.SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Alerter == nil {
		c.Alerter = alerts.NewLog(c.Logger)
	}
	c.StepTimeout = cmp.Or(c.StepTimeout, DefaultStepTimeout)
	c.PickupTimeout = cmp.Or(c.PickupTimeout, DefaultPickupTimeout)
	c.OwedRetry = cmp.Or(c.OwedRetry, DefaultOwedRetry)
	c.MaxReceives = cmp.Or(c.MaxReceives, DefaultMaxReceives)
	c.Retry = c.Retry.WithDefaults()
	c.UndoRetry = c.UndoRetry.Or(sas.DefaultUndoRetry).WithDefaults()
	if c.ReplyToAllowed == nil {
		c.ReplyToAllowed = func(string) bool { return false }
	}
	if c.SubmitterReplyTo == nil {
		allowed := c.ReplyToAllowed
		c.SubmitterReplyTo = func(_, url string) bool { return allowed(url) }
	}
	return c
}

// validate names every problem of a configuration with its defaults in.
func (c Config) validate() error {
	var problems []string
	if c.Store == nil {
		problems = append(problems, "a state store is required")
	}
	if c.Queue == nil {
		problems = append(problems, "a queue is required")
	}
	if c.Owner == "" {
		problems = append(problems, "an owner (instance id) is required")
	}
	if c.AgentQueues.Empty() {
		problems = append(problems, "an agent queue is required (SAS_AGENT_QUEUES or SAS_AGENT_QUEUE_URL)")
	} else if err := c.AgentQueues.Check(c.Workflows); err != nil {
		problems = append(problems, err.Error())
	}
	if c.Signer == nil {
		if _, err := sas.NewSigner(c.SigningKey); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if q := c.accountWideReplyTo(); q != "" {
		problems = append(problems, fmt.Sprintf("ReplyToAllowed allows every queue of the account of %s (a name no allow-list entry would give): name queues, or a name prefix", q))
	}
	if c.StepTimeout < 0 || c.PickupTimeout < 0 {
		problems = append(problems, "timeouts must be positive")
	}
	if len(c.Workflows) == 0 {
		problems = append(problems, "at least one workflow is required")
	}
	for name, w := range c.Workflows {
		if name != w.Name || len(w.Steps) == 0 {
			problems = append(problems, fmt.Sprintf("workflow %q: registered under its own name with at least one step", name))
			continue
		}
		for _, d := range w.Steps {
			if d.Name == "" || (d.Agent == "" && !d.Agentless()) || d.Timeout < 0 {
				problems = append(problems, fmt.Sprintf("workflow %q: every step needs a name, an agent (or a callback or a wait) and no negative timeout", name))
				break
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems) // map order would make the message differ run to run
	return fmt.Errorf("configuring the scheduler: %w",
		&sas.ValidationError{Field: "config", Reason: strings.Join(problems, "; ")})
}

// ownQueues are the deployment's own queues, which no replyTo may name:
// statuses posted there would reach the scheduler or an agent as if from
// a sender it trusts (docs/trust.md).
func (c Config) ownQueues() []string {
	var own []string
	for _, q := range append([]string{c.IntakeQueueURL, c.SchedulerQueueURL, c.ControlQueueURL}, c.AgentQueues.All()...) {
		if q != "" {
			own = append(own, q)
		}
	}
	return own
}

// replyToProbes are two legal queue names no allow-list entry but an
// account-wide one matches both of: a prefix that allows one cannot allow
// the other.
var replyToProbes = [...]string{"-sas-replyto-probe", "_sas-replyto-probe"}

// accountWideReplyTo returns one of the deployment's own queues whose
// account ReplyToAllowed opens whole, or "". The rule is config.Load's
// (an account-wide wildcard is refused), checked here too on what the
// function answers, since a Config built in code is not loaded.
func (c Config) accountWideReplyTo() string {
	for _, q := range c.ownQueues() {
		dir := q[:strings.LastIndex(q, "/")+1]
		if dir == "" {
			continue
		}
		if c.ReplyToAllowed(dir+replyToProbes[0]) && c.ReplyToAllowed(dir+replyToProbes[1]) {
			return q
		}
	}
	return ""
}

// replyToAllowed is ReplyToAllowed without the deployment's own queues,
// whatever the function says: the rule holds where it is used.
func replyToAllowed(allowed func(string) bool, own []string) func(string) bool {
	names := map[string]bool{}
	for _, q := range own {
		names[sas.QueueName(q)] = true
	}
	return func(url string) bool { return !names[sas.QueueName(url)] && allowed(url) }
}

// submitterReplyTo is SubmitterReplyTo within ReplyToAllowed (already
// without the deployment's own queues): what no submitter may name, none
// may.
func submitterReplyTo(allowed func(string, string) bool, anyone func(string) bool) func(string, string) bool {
	return func(submitter, url string) bool { return anyone(url) && allowed(submitter, url) }
}
