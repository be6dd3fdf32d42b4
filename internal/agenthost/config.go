package agenthost

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
)

// Runner runs one attempt of one step for one agent. It returns the result
// to report, an error wrapping ErrPermanent for a failure to report, or any
// other error for "no outcome" (the Service then sends nothing and leaves the
// request for redelivery; a *RedeliveryError in the chain says after how
// long). The context's deadline is the agent's for the
// request (Deadline), or the invocation's end less the reply reserve if that
// comes first.
type Runner interface {
	Run(ctx context.Context, req sas.AgentRequest) (result json.RawMessage, err error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, req sas.AgentRequest) (json.RawMessage, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, req sas.AgentRequest) (json.RawMessage, error) {
	return f(ctx, req)
}

// Defaults for zero Config fields.
const (
	// DefaultConcurrency matches the event source's batch size, so a whole
	// batch runs at once and no request waits behind another's deadline.
	DefaultConcurrency = 10
	// DefaultReplyReserve is kept back from the invocation's own deadline
	// (the Lambda timeout), so a call still running then is cut off in time
	// for the others' replies to be sent and the batch to be answered.
	DefaultReplyReserve = 2 * time.Second
	// DefaultReplyLinger is how long a ready reply waits for others of its
	// invocation to share its SendMessageBatch (SQS bills a batch of up to
	// ten small messages as one request). It is short so that a slow or
	// hanging call never holds back the replies of the fast ones, whose
	// deadlines run meanwhile.
	DefaultReplyLinger = 50 * time.Millisecond
	// DefaultMaxDeliveries: a request that ends without an outcome this
	// many deliveries in a row is handed back to the scheduler (a
	// retry{requeue}: it sends the request again while its attempt is
	// current) and its message acknowledged (requeue). Keep it below the
	// queue's maxReceiveCount (10 in infra/), so the DLQ holds only messages
	// nothing can serve.
	DefaultMaxDeliveries = 3
	// DefaultMaxReceives is the agent queues' maxReceiveCount in the CDK
	// construct.
	DefaultMaxReceives = sizing.MaxReceiveCount
)

// Config configures a Service.
type Config struct {
	// Queue sends the replies. Required.
	Queue sas.Queue
	// ReplyQueueURL is the scheduler's queue (SAS_SCHEDULER_QUEUE_URL). Required.
	ReplyQueueURL string
	// RequestQueueURL is the agent's own request queue (SAS_AGENT_QUEUE_URL).
	// Optional: when set, a request left for redelivery without an outcome
	// has its visibility shortened to a backoff (RedeliveryBackoff), so it
	// comes back in seconds rather than after the queue's visibility timeout.
	RequestQueueURL string
	// PriorityQueueURL is the agent's priority lane
	// (SAS_AGENT_PRIORITY_QUEUE_URL), a second queue the same function
	// polls. Optional. A message's visibility is changed on the queue it
	// came from (see queueOf), so both lanes get the backoff.
	PriorityQueueURL string
	// Agents maps an agent name (AgentRequest.Agent) to its Runner. At least one.
	Agents map[string]Runner
	// Clock is the only source of "now". Default sas.SystemClock.
	Clock sas.Clock
	// Logger receives one line per request. Default slog.Default().
	Logger *slog.Logger
	// Concurrency bounds the requests of one batch run at once. Default 10.
	Concurrency int
	// ReplyReserve: see DefaultReplyReserve. Default 2s.
	ReplyReserve time.Duration
	// ReplyLinger: see DefaultReplyLinger. Default 50ms. A ready reply waits
	// only while another request of its batch still runs: when the last one
	// ends, or ten replies are ready, they are sent at once.
	ReplyLinger time.Duration
	// MaxDeliveries: see DefaultMaxDeliveries. Default 3.
	MaxDeliveries int
	// MaxReceives is the request queues' maxReceiveCount (default
	// DefaultMaxReceives, the construct's): a request whose hand-back to the
	// scheduler fails on that receive, the last before the dead-letter
	// queue, is dropped rather than dead-lettered (requeue).
	MaxReceives int
	// Metrics receives one CloudWatch Embedded Metric Format line per
	// request run (internal/metrics): its queue wait, execution time and
	// outcome. nil publishes none.
	Metrics io.Writer
}

// Service hosts named agents. It is safe for concurrent use.
type Service struct {
	queue    sas.Queue
	replyURL string
	// requestURLs are the agent's own queues: its queue and its priority
	// lane, those that are set.
	requestURLs []string
	agents      map[string]Runner
	clock       sas.Clock
	log         *slog.Logger
	concurrency int
	reserve     time.Duration
	linger      time.Duration
	// maxDeliveries, maxReceives: see Config.
	maxDeliveries, maxReceives int
	metrics                    *metrics.Emitter
}

// New checks cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	invalid := func(field, reason string) (*Service, error) {
		return nil, fmt.Errorf("configuring agent service: %w", &sas.ValidationError{Field: field, Reason: reason})
	}
	switch {
	case cfg.Queue == nil:
		return invalid("Queue", "required")
	case cfg.ReplyQueueURL == "":
		return invalid("ReplyQueueURL", "required (SAS_SCHEDULER_QUEUE_URL)")
	case len(cfg.Agents) == 0:
		return invalid("Agents", "at least one agent")
	case cfg.Concurrency < 0:
		return invalid("Concurrency", "must not be negative")
	case cfg.ReplyReserve < 0:
		return invalid("ReplyReserve", "must not be negative")
	case cfg.MaxDeliveries < 0:
		return invalid("MaxDeliveries", "must not be negative")
	case cfg.ReplyLinger < 0:
		return invalid("ReplyLinger", "must not be negative")
	}
	for name, r := range cfg.Agents {
		if name == "" || r == nil {
			return invalid("Agents", fmt.Sprintf("agent %q: a name and a runner", name))
		}
	}
	s := &Service{
		queue: cfg.Queue, replyURL: cfg.ReplyQueueURL, agents: cfg.Agents,
		clock: cfg.Clock, log: cfg.Logger, concurrency: cfg.Concurrency, reserve: cfg.ReplyReserve,
		linger: cfg.ReplyLinger, maxDeliveries: cfg.MaxDeliveries, maxReceives: cfg.MaxReceives,
		metrics: metrics.NewEmitter(cfg.Metrics),
	}
	for _, u := range []string{cfg.RequestQueueURL, cfg.PriorityQueueURL} {
		if u != "" && !slices.Contains(s.requestURLs, u) {
			s.requestURLs = append(s.requestURLs, u)
		}
	}
	if s.clock == nil {
		s.clock = sas.SystemClock{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.concurrency == 0 {
		s.concurrency = DefaultConcurrency
	}
	if s.reserve == 0 {
		s.reserve = DefaultReplyReserve
	}
	if s.linger == 0 {
		s.linger = DefaultReplyLinger
	}
	if s.maxReceives <= 0 {
		s.maxReceives = DefaultMaxReceives
	}
	if s.maxDeliveries == 0 {
		s.maxDeliveries = DefaultMaxDeliveries
	}
	return s, nil
}
