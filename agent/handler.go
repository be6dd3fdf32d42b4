package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/agentqueue"
	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsqueue"
)

// The environment variables FromEnv and Start read.
const (
	// EnvSchedulerQueueURL is the scheduler's queue, where replies go.
	// Required.
	EnvSchedulerQueueURL = "SAS_SCHEDULER_QUEUE_URL"
	// EnvQueueURL is the agent's own request queue. Optional: with it, a
	// request left without an outcome comes back after a short backoff
	// rather than after the queue's visibility timeout.
	EnvQueueURL = "SAS_AGENT_QUEUE_URL"
	// EnvPriorityQueueURL is the agent's priority lane, a second request
	// queue its function polls (docs/agents.md, "Priority lanes").
	// Optional.
	EnvPriorityQueueURL = "SAS_AGENT_PRIORITY_QUEUE_URL"
)

// Clock tells the time. The handler reads the time only through it, so a
// test can pass a fake. A Clock that also has a method
// Sleep(ctx context.Context, d time.Duration) error waits through it too
// (the waits between in-process retries), so a fake clock drives those.
type Clock interface {
	Now() time.Time
}

// systemClock reads the wall clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// HandlerConfig configures a Handler. Agents, SchedulerQueueURL and SQS are
// required.
type HandlerConfig struct {
	// Agents are the agents this function serves, each under its name.
	Agents []*Agent
	// SchedulerQueueURL is where replies go (SAS_SCHEDULER_QUEUE_URL).
	SchedulerQueueURL string
	// QueueURL is the agent's own request queue (SAS_AGENT_QUEUE_URL), and
	// PriorityQueueURL its priority lane (SAS_AGENT_PRIORITY_QUEUE_URL).
	// Both optional: a request left without an outcome has its visibility
	// set, on the queue it came from, to a short backoff (or the wait a
	// RetryAfter asked for), so it comes back in seconds rather than after
	// the queue's visibility timeout.
	QueueURL         string
	PriorityQueueURL string
	// SQS is the client replies are sent with (sqs.NewFromConfig).
	// Required.
	SQS *sqs.Client
	// Clock is the only source of the time. Default: the wall clock.
	Clock Clock
	// Logger receives a line per request. Default slog.Default().
	Logger *slog.Logger
	// Concurrency bounds the requests of one batch run at once. Default 10,
	// the event source's batch size.
	Concurrency int
	// MaxDeliveries: the delivery that is this many without an outcome is
	// handed back to the scheduler instead of being left for redelivery.
	// Default 3; keep it below the queue's maxReceiveCount.
	MaxDeliveries int
	// ReplyLinger is how long a ready reply waits for others to share a
	// SendMessageBatch. Default 50ms.
	ReplyLinger time.Duration
	// Middleware, when set, wraps the Func of each request (the step's, or
	// its undo's): every run of it, in-process retries included, goes
	// through the Func it returns, whose result and error are the step's,
	// classified as usual. For instrumentation and test kits (package
	// sastest injects failures and records calls with it).
	Middleware func(Func) Func
	// Metrics receives one CloudWatch Embedded Metric Format line per
	// request run: its queue wait, execution time and outcome
	// (docs/observability.md). nil publishes none; FromEnv sets stdout,
	// which Lambda ships to CloudWatch Logs.
	Metrics io.Writer

	// queue replaces SQS with one of this module's queues (its in-memory
	// queue, its local runs' wrapped SQS adapter), set through
	// internal/agentqueue: the port is internal, so no public field names
	// it.
	queue sas.Queue
}

func init() {
	agentqueue.Register(func(cfg any, q sas.Queue) { cfg.(*HandlerConfig).queue = q })
}

// Handler is the typed Lambda handler of an agent function: it takes the
// SQS events of the agent's queues, runs each request through its agent's
// step, and replies to the scheduler. It is safe for concurrent use.
type Handler struct {
	svc *agenthost.Service
	// What Poll needs: the queue the requests are received from, the
	// agent's queues, and the logger.
	queue                 sas.Queue
	queueURL, priorityURL string
	log                   *slog.Logger
}

// NewHandler checks cfg and the agents' definitions and returns a Handler.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	var errs []error
	invalid := func(field, reason string) {
		errs = append(errs, &sas.ValidationError{Field: field, Reason: reason})
	}
	q := cfg.queue
	switch {
	case cfg.SQS != nil && q != nil:
		invalid("SQS", "set SQS or the module's own queue, not both")
	case cfg.SQS != nil:
		q = sqsqueue.New(cfg.SQS)
	case q == nil:
		invalid("SQS", "required")
	}
	if len(cfg.Agents) == 0 {
		invalid("Agents", "at least one agent")
	}
	clock := cfg.Clock
	if clock == nil {
		clock = systemClock{}
	}
	sleep := httpcall.Sleep
	if s, ok := clock.(interface {
		Sleep(context.Context, time.Duration) error
	}); ok {
		sleep = s.Sleep
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	runners := map[string]agenthost.Runner{}
	for i, a := range cfg.Agents {
		if a == nil {
			invalid("Agents", fmt.Sprintf("agent %d is nil", i))
			continue
		}
		if err := a.Err(); err != nil {
			errs = append(errs, err)
		}
		if _, dup := runners[a.name]; dup {
			invalid("Agents", fmt.Sprintf("agent %q given twice", a.name))
		}
		runners[a.name] = &runner{a: a, clock: clock, sleep: sleep, log: log, wrap: cfg.Middleware}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("configuring the agent handler: %w", errors.Join(errs...))
	}
	svc, err := agenthost.New(agenthost.Config{
		Queue: q, ReplyQueueURL: cfg.SchedulerQueueURL, RequestQueueURL: cfg.QueueURL, PriorityQueueURL: cfg.PriorityQueueURL,
		Agents: runners, Clock: clock, Logger: log, Concurrency: cfg.Concurrency, MaxDeliveries: cfg.MaxDeliveries,
		ReplyLinger: cfg.ReplyLinger, Metrics: cfg.Metrics,
	})
	if err != nil {
		return nil, err
	}
	return &Handler{svc: svc, queue: q, queueURL: cfg.QueueURL, priorityURL: cfg.PriorityQueueURL, log: log}, nil
}

// Handle handles one SQS event (up to ten requests) and never fails it as
// a whole: the response lists the messages to redeliver (requests left
// without an outcome, replies that could not be sent), and is an empty
// list, never null, when there are none. A malformed message is logged and
// acknowledged alone; the batch's other requests go on.
func (h *Handler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	return h.svc.Handle(ctx, ev)
}

// FromEnv builds the Handler a Lambda function runs, from the environment
// read with getenv (os.Getenv when nil): the queues (EnvSchedulerQueueURL,
// required; EnvQueueURL and EnvPriorityQueueURL, optional), an SQS client
// configured the usual way of the AWS SDK (region, credentials, and
// AWS_ENDPOINT_URL for an emulator), and JSON logs on stderr.
func FromEnv(ctx context.Context, getenv func(string) string, agents ...*Agent) (*Handler, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if getenv(EnvSchedulerQueueURL) == "" {
		return nil, fmt.Errorf("configuring the agent handler: missing %s (the scheduler's queue, where replies go)", EnvSchedulerQueueURL)
	}
	awsCfg, err := awsenv.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("configuring the agent handler: %w", err)
	}
	return NewHandler(HandlerConfig{
		Agents:            agents,
		SchedulerQueueURL: strings.TrimSpace(getenv(EnvSchedulerQueueURL)),
		QueueURL:          strings.TrimSpace(getenv(EnvQueueURL)),
		PriorityQueueURL:  strings.TrimSpace(getenv(EnvPriorityQueueURL)),
		SQS:               sqs.NewFromConfig(awsCfg),
		Logger:            slog.New(slog.NewJSONHandler(os.Stderr, nil)),
		Metrics:           os.Stdout,
	})
}

// Start runs agents as a Lambda function: FromEnv with os.Getenv, then
// lambda.Start with the handler. It returns only with a configuration
// error (lambda.Start does not return), for main to log and exit:
//
//	func main() {
//		log.Fatal(agent.Start(flights))
//	}
//
// The function's event source mappings (one per queue it polls) must
// report batch item failures (FunctionResponseTypes ReportBatchItemFailures).
//
// Outside Lambda (AWS_LAMBDA_RUNTIME_API unset: a local run, a container)
// the same program polls its queues itself (Handler.Poll), which then needs
// SAS_AGENT_QUEUE_URL, until SIGINT or SIGTERM; it then lets the batches in
// hand finish and exits the process with status 0. The AWS SDK's usual
// variables (AWS_ENDPOINT_URL, AWS_REGION, credentials) point it at an
// emulator or an account.
func Start(agents ...*Agent) error {
	h, err := FromEnv(context.Background(), os.Getenv, agents...)
	if err != nil {
		return err
	}
	if !inLambda(os.Getenv) {
		return startLocal(h)
	}
	lambda.Start(h.Handle)
	return nil
}
