package localrun

import (
	"io"
	"log/slog"
	"time"

	sdk "github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
	"github.com/sas-go/sas/internal/testkit/awscount"
)

// Options shape a local system. Zero values get defaults suited to a laptop:
// short deadlines so that rescues happen in seconds, not minutes.
type Options struct {
	Name          string // resource name prefix; default "sas-<random>"
	StepTimeout   time.Duration
	PickupTimeout time.Duration
	MaxFailures   int
	Shards        int
	// Instances is how many scheduler and agent "Lambda instances" poll
	// each queue, each with its own owner id; default 2.
	Instances int
	// Supervisors run at once on the schedule; default 1.
	Supervisors     int
	SupervisorEvery time.Duration // default 1s
	BaseBackoff     time.Duration // supervisor's first retry delay; default 1s
	MaxReceiveCount int           // before a message goes to its DLQ; default sizing.MaxReceiveCount (10)
	// WaitLimit is passed on as SAS_WAIT_LIMIT would be, and no longer used
	// (docs/protocol.md, "Deadlines start at pick-up"); default 2m.
	WaitLimit  time.Duration
	Visibility time.Duration // of the work queues; default 10s
	BatchSize  int           // per poll; default 10
	Faults     remotesim.Faults
	Seed       uint64
	// AttemptTimeout bounds one HTTP try of an agent; default StepTimeout/3,
	// so a hung call costs one try, not the step. Tests of the supervisor set
	// it to StepTimeout so that one hung call uses up the whole attempt.
	AttemptTimeout time.Duration
	// Breaker configures each agent's circuit breaker; zero fields take
	// the HTTP client's defaults (at least 5 unhealthy tries, and at least
	// 80% of the tries of the last 10s, open it for 10s).
	// Tests sharing one system across fault scenarios raise the threshold
	// so one scenario's hangs do not stall the others' calls.
	Breaker sdk.BreakerConfig
	// KillEvery, when set, kills a random scheduler or agent instance that
	// often: its poller's context is cancelled mid-batch (the batch is
	// abandoned undeleted, as when a Lambda instance dies) and it comes back
	// a moment later, as the platform would restart it.
	KillEvery time.Duration
	// PollerWorkers is how many invocations each poller runs at once (a
	// Lambda's concurrency per event source); default 1.
	PollerWorkers int
	// AgentWorkers is how many invocations each agent poller runs at once;
	// default PollerWorkers. The deployed agent's event source runs up to 20
	// batches at once (infra/), so a harness that mirrors it runs
	// Instances × AgentWorkers = 20.
	AgentWorkers int
	// Workflows are the workflows the actors run; default the reference
	// ones (registry.Default with StepTimeout). Deploy changes them.
	Workflows sas.Registry
	// PriorityWorkers, when positive, gives the agent a priority lane
	// (docs/agents.md, "Priority lanes"): a second queue for orders of
	// sas.HighPriority and up, polled by each instance with this many
	// invocations at once, beside the agent queue's AgentWorkers.
	PriorityWorkers int
	// DuplicateRate is the chance that a message any actor sends is sent
	// twice (chaos: at-least-once delivery).
	DuplicateRate float64
	// KillBeforeSendRate is the chance that a scheduler instance, about to
	// send an agent request, is killed instead (chaos; needs Run: a hand-
	// driven handler has no instance to kill).
	KillBeforeSendRate float64
	// ClockSkew spreads the supervisors' clocks over [-ClockSkew, +ClockSkew].
	ClockSkew time.Duration
	// Counter, when set, counts every AWS request the system makes.
	Counter *awscount.Counter
	Logger  *slog.Logger // default: discard
	// Metrics receives the actors' EMF lines; nil: none.
	Metrics io.Writer
}

func (o *Options) defaults() {
	if o.Name == "" {
		o.Name = "sas-" + sas.RandomID(4)
	}
	if o.StepTimeout == 0 {
		o.StepTimeout = 5 * time.Second
	}
	if o.PickupTimeout == 0 {
		o.PickupTimeout = 10 * time.Second
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = o.StepTimeout / 3
	}
	if o.PollerWorkers == 0 {
		o.PollerWorkers = 1
	}
	if o.AgentWorkers == 0 {
		o.AgentWorkers = o.PollerWorkers
	}
	if o.MaxFailures == 0 {
		o.MaxFailures = sizing.DefaultMaxAttempts
	}
	if o.Shards == 0 {
		o.Shards = 4
	}
	if o.Instances == 0 {
		o.Instances = 2
	}
	if o.Supervisors == 0 {
		o.Supervisors = 1
	}
	if o.SupervisorEvery == 0 {
		o.SupervisorEvery = time.Second
	}
	if o.BaseBackoff == 0 {
		o.BaseBackoff = time.Second
	}
	if o.MaxReceiveCount == 0 {
		o.MaxReceiveCount = sizing.MaxReceiveCount
	}
	if o.Visibility == 0 {
		o.Visibility = 10 * time.Second
	}
	if o.WaitLimit == 0 {
		o.WaitLimit = 2 * time.Minute
	}
	if o.BatchSize == 0 {
		o.BatchSize = 10
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}
