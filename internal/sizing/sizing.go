// Package sizing holds the rules of a deployment that more than one place
// applies: the deployment's defaults (shards, maximum attempts, step and
// pick-up timeouts, wait limit, maximum receives), the functions' timeouts
// and the settings of the queues they consume, and the few limits of what a deployment declares (a payload's
// size, a schedule's name and overlap policy) that the construct checks at
// synth time and the scheduler at run time. The CDK construct (infra/sascdk) deploys with them, and the test
// kit (sastest), the dev server (cmd/sasdev) and the simulator
// (internal/dev/sim) create their queues with them, so a change to a formula is
// made here, once.
//
// The defaults are written here and nowhere else: the configuration, both
// stores, the scheduler, the supervisor, sasctl, the construct, the agent
// runtime and the local runs take them from here, and
// TestDefaultsHaveOneHome (internal/testkit/publicapi) fails on one of their
// values written again as a literal.
//
// It imports nothing but the standard library: the infra module imports it.
package sizing

import (
	"regexp"
	"time"
)

// The deployment's defaults: what a deployment runs with when it sets
// nothing (docs/state-store.md, "Configuration (the same names locally and
// in Lambda)"; docs/deploy.md, "Configuration (CDK context)").
const (
	// DefaultIndexShards is the write shards of the state-due index and the
	// orders list (SAS_INDEX_SHARDS).
	DefaultIndexShards = 8
	// DefaultMaxAttempts is a step's attempts, the first included, when its
	// retry policy sets none (SAS_MAX_FAILURES; docs/workflows.md,
	// "Retries: one word per idea").
	DefaultMaxAttempts = 3
	// DefaultStepTimeout is a step's time limit when its definition sets none
	// (SAS_STEP_TIMEOUT).
	DefaultStepTimeout = 30 * time.Second
	// DefaultPickupTimeout is how long a request may wait to be picked up
	// before its deadline starts anyway (SAS_PICKUP_TIMEOUT; docs/protocol.md,
	// "Deadlines start at pick-up").
	DefaultPickupTimeout = time.Minute
	// DefaultWaitLimit is how long, beyond its deadline, a held step may wait
	// for a busy agent queue when its step sets none (SAS_WAIT_LIMIT, read
	// and no longer used: docs/protocol.md, "Deadlines start at pick-up").
	DefaultWaitLimit = 10 * time.Minute
)

const (
	// SchedulerTimeout is the scheduler function's timeout. It does a
	// handful of DynamoDB and SQS calls per message: a generous ceiling,
	// not a target.
	SchedulerTimeout = 30 * time.Second
	// SupervisorTimeout is the supervisor function's timeout: a sweep
	// stops taking new work at its budget (supervisor.DefaultBudget) and
	// has the rest to finish.
	SupervisorTimeout = 60 * time.Second
	// AgentMargin is how long an agent's function outlives its longest
	// step: the agent stops at the step's deadline and returns after it.
	AgentMargin = 15 * time.Second
	// MaxFunctionTimeout is Lambda's limit on a function's timeout.
	MaxFunctionTimeout = 15 * time.Minute
	// MaxReceiveCount is how often a message may be received before it
	// goes to its dead-letter queue. AWS advises at least 5 for Lambda
	// sources; it is 10 here so that a good message has eight receives
	// (RenewFromReceive to MaxReceiveCount) on which a handler can renew it
	// or hand it back, not three: a receive that dies, or never reaches a
	// handler (a throttled or dying invocation), is counted all the same
	// (docs/decisions.md, "Ten receives before a dead letter").
	MaxReceiveCount = 10
	// RenewFromReceive is the first receive on which the scheduler renews
	// a message of its queues (a fresh copy, the old one deleted) instead
	// of handling it: a message is handled on its first two receives, then
	// renewed on any later one that reaches a handler (docs/protocol.md,
	// "Dead letters"). The agents hand a request back from their
	// MaxDeliveries-th delivery on (agenthost.DefaultMaxDeliveries).
	RenewFromReceive = 3
	// LambdaVisibilityFactor is Lambda's advice for a queue an event source
	// mapping consumes: a visibility timeout of at least six times the
	// function's timeout, so that a message is not handed out again while
	// throttled retries of its batch may still run.
	LambdaVisibilityFactor = 6
	// QueueRetention is the message retention of the queues the functions
	// consume (SQS's default). For an agent's queue it is a request's
	// delivery horizon: a request not picked up by then can no longer be,
	// and only then does the supervisor re-drive a step whose pick-up was
	// never reported (docs/protocol.md, "Deadlines start at pick-up").
	QueueRetention = 4 * 24 * time.Hour
)

// AgentTimeout is how long an agent's run of a request may go on, and the
// timeout of its function: its longest step plus AgentMargin, in whole
// seconds (Lambda's unit) rounded up, and within MaxFunctionTimeout.
func AgentTimeout(longestStep time.Duration) time.Duration {
	t := (longestStep + AgentMargin + time.Second - 1).Truncate(time.Second)
	return min(t, MaxFunctionTimeout)
}

// LambdaVisibility is the visibility timeout of a queue whose consumer, a
// Lambda function of the given timeout, is fed by an event source mapping
// (LambdaVisibilityFactor).
func LambdaVisibility(functionTimeout time.Duration) time.Duration {
	return LambdaVisibilityFactor * functionTimeout
}

// SchedulerVisibility is the visibility timeout of the queues the scheduler
// function consumes: the intake, scheduler and control queues
// (LambdaVisibility of SchedulerTimeout).
const SchedulerVisibility = LambdaVisibilityFactor * SchedulerTimeout

// MaxPayloadBytes bounds an order's payload as it appears in the intake
// message (docs/intake.md): the scheduler refuses a larger one, and the
// construct a schedule whose payload is larger.
const MaxPayloadBytes = 64 << 10

// A schedule's overlap policies (docs/schedules.md): what a run does that
// falls due while the schedule's previous run is still in flight.
const (
	OverlapAllow = "allow" // start every run (the default)
	OverlapSkip  = "skip"  // skip a run while the previous one has not settled
)

var scheduleNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidScheduleName reports whether name is a legal schedule name: 1–64
// characters of A-Z a-z 0-9 _ -, which is also a legal EventBridge Scheduler
// schedule name, and leaves a run's order id under 128 characters.
func ValidScheduleName(name string) bool { return scheduleNamePattern.MatchString(name) }

// TenantSeparator ends a tenant's name at the start of each of its order
// ids (acme:o-1; docs/trust.md, "Tenants").
const TenantSeparator = ":"

var tenantNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// ValidTenantName reports whether name may name a tenant: 1-32 characters
// of a-z 0-9 and -, not starting with -. The scheduler's configuration
// (sas.Tenants) and the CDK construct both check it.
func ValidTenantName(name string) bool { return tenantNamePattern.MatchString(name) }
