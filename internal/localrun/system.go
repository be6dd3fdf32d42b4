package localrun

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	sdk "github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/awscount"
	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/remotesim"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/supervisor"
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
	MaxReceiveCount int           // before a message goes to its DLQ; default 5
	// WaitLimit is how long past its deadline a held step may wait while
	// the queues are busy before the supervisor counts a failure; default 2m.
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
	Breaker sdk.BreakerOptions
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
	// Metrics receives the supervisor's EMF lines; default discard.
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
		o.MaxFailures = 3
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
		o.MaxReceiveCount = 5
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
	if o.Metrics == nil {
		o.Metrics = io.Discard
	}
}

// System is the whole pipeline in one process against the emulators (or
// whatever the AWS endpoint variables point at).
type System struct {
	Opts   Options
	Config config.Config
	AWS    aws.Config
	Store  *dynamostore.Store
	Queue  *sqsqueue.Queue
	Sim    *remotesim.Sim
	SimURL string
	// Alerts records every operator alert (besides logging it).
	Alerts *alerts.Recorder
	// StatusQueueURL is a replyTo the deployment allows, for submitters.
	StatusQueueURL string
	DLQs           map[string]string // queue name → its DLQ URL

	Schedulers  []*scheduler.Handler
	Agents      []*sdk.Handler
	Supervisors []*supervisor.Supervisor
	Pollers     []*Poller
	// Injected records the faults the harness itself injected, per order
	// (kills, kills before a send, duplicate deliveries).
	Injected *InjectedLog
	// Registry is the workflows the actors run.
	Registry sas.Registry

	inflight []*inflight // per poller
	// The harness's own reads (statuses, progress, the final views) go
	// through these, uncounted, so requests per order count the system only.
	observer      sas.Queue
	observerStore *dynamostore.Store

	actors    actors
	simServer *http.Server
	killed    atomic.Int64
	mu        sync.Mutex
	reports   []supervisor.Report
}

// Start creates the tables and queues, starts the simulator and builds the
// three actors. It does not start polling: call Run, or drive the pollers
// and supervisors by hand (PollOnce, RunOnce) in tests.
func Start(ctx context.Context, opts Options) (*System, error) {
	opts.defaults()
	s := &System{Opts: opts, Alerts: alerts.NewRecorder(), DLQs: map[string]string{}, Injected: newInjectedLog()}
	var err error
	if s.AWS, err = awsenv.Load(ctx); err != nil {
		return nil, err
	}
	if opts.Counter != nil {
		opts.Counter.Attach(&s.AWS)
	}
	db := dynamodb.NewFromConfig(s.AWS, awsenv.DynamoDBOptions)
	s.Queue = sqsqueue.New(sqs.NewFromConfig(s.AWS))

	cfg := config.Config{
		OrdersTable: opts.Name + "-orders", StateTable: opts.Name + "-state", IndexShards: opts.Shards,
		MaxFailures: opts.MaxFailures, StepTimeout: opts.StepTimeout, PickupTimeout: opts.PickupTimeout,
	}
	dcfg := dynamostore.Config{OrdersTable: cfg.OrdersTable, StateTable: cfg.StateTable, Shards: cfg.IndexShards}
	if err := dynamostore.CreateTables(ctx, db, dcfg); err != nil {
		return nil, err
	}
	if s.Store, err = dynamostore.New(db, dcfg); err != nil {
		return nil, err
	}
	s.observer, s.observerStore = s.Queue, s.Store
	if opts.Counter != nil {
		plain, err := awsenv.Load(ctx)
		if err != nil {
			return nil, fmt.Errorf("loading the harness's uncounted AWS config: %w", err)
		}
		s.observer = sqsqueue.New(sqs.NewFromConfig(plain))
		if s.observerStore, err = dynamostore.New(dynamodb.NewFromConfig(plain, awsenv.DynamoDBOptions), dcfg); err != nil {
			return nil, fmt.Errorf("building the harness's store: %w", err)
		}
	}
	vis := fmt.Sprint(int(opts.Visibility.Seconds()))
	for _, q := range []struct {
		name string
		url  *string
	}{{"intake", &cfg.IntakeQueueURL}, {"scheduler", &cfg.SchedulerQueueURL}, {"control", &cfg.ControlQueueURL}, {"agent", &cfg.AgentQueueURL}} {
		created, err := s.Queue.CreateQueue(ctx, sqsqueue.CreateQueueParams{
			Name: opts.Name + "-" + q.name, Attributes: map[string]string{"VisibilityTimeout": vis}, MaxReceiveCount: opts.MaxReceiveCount,
		})
		if err != nil {
			return nil, err
		}
		*q.url = created.URL
		s.DLQs[q.name] = created.DLQURL
	}
	cfg.AgentQueues = sas.AgentQueues{Default: cfg.AgentQueueURL}
	// One key per run, shared by the run's schedulers (docs/trust.md).
	cfg.SigningKey = base64.StdEncoding.EncodeToString(sas.NewSigningKey())
	if opts.PriorityWorkers > 0 {
		lane, err := s.Queue.CreateQueue(ctx, sqsqueue.CreateQueueParams{
			Name: opts.Name + "-agent-priority", Attributes: map[string]string{"VisibilityTimeout": vis}, MaxReceiveCount: opts.MaxReceiveCount,
		})
		if err != nil {
			return nil, err
		}
		cfg.AgentPriorityQueueURL = lane.URL
		s.DLQs["agent-priority"] = lane.DLQURL
		cfg.AgentQueues.ByAgent = map[string]sas.AgentQueue{
			registry.PaymentsAgent: {URL: cfg.AgentQueueURL, PriorityURL: lane.URL},
		}
	}
	status, err := s.Queue.CreateQueue(ctx, sqsqueue.CreateQueueParams{Name: opts.Name + "-status"})
	if err != nil {
		return nil, err
	}
	s.StatusQueueURL = status.URL
	cfg.AllowedReplyQueues = []string{status.URL}

	if s.Sim, err = remotesim.New(remotesim.Config{Seed: opts.Seed, Faults: opts.Faults}); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the simulator: %w", err)
	}
	s.SimURL = "http://" + ln.Addr().String()
	cfg.PaymentsURL = s.SimURL
	s.simServer = &http.Server{Handler: s.Sim, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.simServer.Serve(ln) }()
	s.Config = cfg

	reg := opts.Workflows
	if reg == nil {
		if reg, err = registry.Default(cfg.StepTimeout); err != nil {
			return nil, err
		}
	}
	s.Registry = reg
	coin := newChance(opts.Seed)
	// Every actor's sends may be duplicated; a scheduler's may kill it.
	var actorQueue sas.Queue = s.Queue
	if opts.DuplicateRate > 0 {
		actorQueue = &dupQueue{Queue: s.Queue, rate: opts.DuplicateRate, coin: coin, log: s.Injected}
	}
	schedQueue := actorQueue
	if opts.KillBeforeSendRate > 0 {
		schedQueue = &killBeforeSendQueue{Queue: actorQueue, agentQueueURLs: cfg.AgentQueues.All(), rate: opts.KillBeforeSendRate, coin: coin, log: s.Injected}
	}
	alerter := alerts.NewMulti(alerts.NewLog(opts.Logger), s.Alerts)
	s.actors = actors{schedQueue: schedQueue, actorQueue: actorQueue, alerter: alerter}
	if s.Schedulers, s.Agents, err = s.buildActors(reg); err != nil {
		return nil, err
	}
	limits, err := reg.Limits()
	if err != nil {
		return nil, err
	}
	for i := 0; i < opts.Supervisors; i++ {
		sup, err := supervisor.New(supervisor.Config{
			BacklogQueueURLs: append(cfg.AgentQueues.All(), cfg.SchedulerQueueURL), WaitLimit: opts.WaitLimit, Steps: limits, Workflows: reg,
			Pauses: s.Store, StepAgents: reg.StepAgents(),
			Store: s.Store, Queue: actorQueue, Alerter: alerter, ControlQueueURL: cfg.ControlQueueURL,
			Clock:       skewedClock{offset: skewFor(i, opts.Supervisors, opts.ClockSkew)},
			MaxFailures: cfg.MaxFailures, PickupTimeout: cfg.PickupTimeout, BaseBackoff: opts.BaseBackoff, MaxBackoff: 4 * opts.BaseBackoff,
			Actor: fmt.Sprintf("supervisor-%d", i), Logger: opts.Logger, Metrics: opts.Metrics,
		})
		if err != nil {
			return nil, err
		}
		s.Supervisors = append(s.Supervisors, sup)
	}
	arn := func(url string) string { return sas.LocalQueueARN("us-east-1", url) }
	for i := 0; i < opts.Instances; i++ {
		sch := SQSHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			return s.scheduler(i).Handle(ctx, ev)
		})
		ag := SQSHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			return s.agent(i).Handle(ctx, ev)
		})
		s.Pollers = append(s.Pollers,
			&Poller{Name: fmt.Sprintf("intake-%d", i), Queue: s.Queue, QueueURL: cfg.IntakeQueueURL, QueueARN: arn(cfg.IntakeQueueURL), BatchSize: opts.BatchSize, Workers: opts.PollerWorkers, Handler: sch, Logger: opts.Logger},
			&Poller{Name: fmt.Sprintf("scheduler-%d", i), Queue: s.Queue, QueueURL: cfg.SchedulerQueueURL, QueueARN: arn(cfg.SchedulerQueueURL), BatchSize: opts.BatchSize, Workers: opts.PollerWorkers, Handler: sch, Logger: opts.Logger},
			&Poller{Name: fmt.Sprintf("control-%d", i), Queue: s.Queue, QueueURL: cfg.ControlQueueURL, QueueARN: arn(cfg.ControlQueueURL), BatchSize: opts.BatchSize, Workers: opts.PollerWorkers, Handler: sch, Logger: opts.Logger},
			&Poller{Name: fmt.Sprintf("agent-%d", i), Queue: s.Queue, QueueURL: cfg.AgentQueueURL, QueueARN: arn(cfg.AgentQueueURL), BatchSize: opts.BatchSize, Workers: opts.AgentWorkers, Handler: ag, Logger: opts.Logger},
		)
		if lane := cfg.AgentPriorityQueueURL; lane != "" {
			s.Pollers = append(s.Pollers,
				&Poller{Name: fmt.Sprintf("agent-priority-%d", i), Queue: s.Queue, QueueURL: lane, QueueARN: arn(lane), BatchSize: opts.BatchSize, Workers: opts.PriorityWorkers, Handler: ag, Logger: opts.Logger})
		}
	}
	// An operator's pause of an agent stops the pollers of the agent queue
	// (docs/console.md, "Pausing an agent"). Here every agent shares that
	// queue, so pausing any of them stops it for all.
	agentNames := agentsOf(reg)
	for _, p := range s.Pollers {
		if strings.HasPrefix(p.Name, "agent-") {
			p.Paused = PausedBy(s.observerStore, agentNames...) // the platform's, not the system's: uncounted
		}
	}
	for _, p := range s.Pollers {
		f := &inflight{}
		p.Handler = f.wrap(p.Handler)
		s.inflight = append(s.inflight, f)
	}
	return s, nil
}

// actors is what building the schedulers and agents needs besides the
// configuration (buildActors).
type actors struct {
	schedQueue, actorQueue sas.Queue
	alerter                sas.Alerter
}

// buildActors builds one scheduler and one agent per instance, running reg.
func (s *System) buildActors(reg sas.Registry) (schedulers []*scheduler.Handler, agents []*sdk.Handler, err error) {
	key, err := sas.ParseSigningKey(s.Config.SigningKey)
	if err != nil {
		return nil, nil, err
	}
	for i := 0; i < s.Opts.Instances; i++ {
		svc, err := scheduler.New(scheduler.Config{
			Store: s.Store, Queue: s.actors.schedQueue, Alerter: s.actors.alerter, Workflows: reg,
			Owner: fmt.Sprintf("scheduler-%d-%s", i, sas.RandomID(4)), AgentQueues: s.Config.AgentQueues, IntakeQueueURL: s.Config.IntakeQueueURL,
			ControlQueueURL: s.Config.ControlQueueURL, SigningKey: key, SchedulerQueueURL: s.Config.SchedulerQueueURL,
			StepTimeout: s.Config.StepTimeout, PickupTimeout: s.Config.PickupTimeout, ReplyToAllowed: s.Config.ReplyToAllowed, Logger: s.Opts.Logger,
			// The supervisors' threshold and backoff.
			Retry: sas.RetryPolicy{MaxAttempts: s.Config.MaxFailures, InitialInterval: s.Opts.BaseBackoff, MaxInterval: 4 * s.Opts.BaseBackoff},
		})
		if err != nil {
			return nil, nil, err
		}
		// As a warm instance would have: the definitions are stored once
		// per process, so requests per order count the orders alone.
		if err := svc.StoreDefinitions(context.Background()); err != nil {
			return nil, nil, err
		}
		schedulers = append(schedulers, scheduler.NewHandler(svc))
		// By default a try may take at most a third of the step's time, so a
		// hung call leaves room to retry within the deadline.
		client, err := sdk.NewHTTPClient(sdk.HTTPOptions{AttemptTimeout: s.Opts.AttemptTimeout, MaxResponseBytes: agenthost.MaxResponseBytes, Backoff: 50 * time.Millisecond, MaxBackoff: time.Second, SafetyMargin: 200 * time.Millisecond, Breaker: s.Opts.Breaker})
		if err != nil {
			return nil, nil, err
		}
		ag, err := builtinagent.FromConfig(s.Config, builtinagent.Deps{Queue: s.actors.actorQueue, Client: client, Logger: s.Opts.Logger, Registry: reg,
			AllowHTTP: true}) // a local run: its remote service is local
		if err != nil {
			return nil, nil, err
		}
		agents = append(agents, ag)
	}
	return schedulers, agents, nil
}

// Deploy replaces every scheduler and agent with ones running reg, as a
// deploy of a changed workflow would, while the system runs: messages
// already being handled finish on the old ones. Orders submitted before
// keep the version they were submitted with (docs/workflows.md,
// "Versions").
func (s *System) Deploy(reg sas.Registry) error {
	schedulers, agents, err := s.buildActors(reg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Schedulers, s.Agents, s.Registry = schedulers, agents, reg
	return nil
}

// scheduler and agent are instance i's current actors (Deploy swaps them).
func (s *System) scheduler(i int) *scheduler.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Schedulers[i]
}

func (s *System) agent(i int) *sdk.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Agents[i]
}

// Run polls every queue and runs the supervisors on their schedule until ctx
// is done.
func (s *System) Run(ctx context.Context) {
	var wg sync.WaitGroup
	kills := make([]chan struct{}, len(s.Pollers))
	for i, p := range s.Pollers {
		kills[i] = make(chan struct{}, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				life, die := context.WithCancel(ctx)
				var once sync.Once
				kill := func() {
					once.Do(func() {
						// What the instance held is abandoned: blame those orders.
						now := time.Now()
						for _, b := range s.inflight[i].bodies() {
							s.Injected.note(FaultKilled, b, now)
						}
						s.killed.Add(1)
						die()
					})
				}
				life = context.WithValue(life, killKey{}, kill)
				go func() {
					select {
					case <-kills[i]:
						kill()
					case <-life.Done():
					}
				}()
				_ = p.Run(life)
				die()
				select { // restarted by the platform after a moment
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
	}
	if s.Opts.KillEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			Ticker(ctx, s.Opts.KillEvery, func(context.Context) {
				select {
				case kills[mathrand.IntN(len(kills))] <- struct{}{}:
				default:
				}
			})
		}()
	}
	for _, sup := range s.Supervisors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			Ticker(ctx, s.Opts.SupervisorEvery, func(ctx context.Context) { s.Sweep(ctx, sup) })
		}()
	}
	wg.Wait()
}

// Killed is how many instances Run has killed (Options.KillEvery).
func (s *System) Killed() int { return int(s.killed.Load()) }

// Sweep runs one supervisor pass and keeps its report.
func (s *System) Sweep(ctx context.Context, sup *supervisor.Supervisor) supervisor.Report {
	r, err := sup.RunOnce(ctx)
	if err != nil && ctx.Err() == nil {
		s.Opts.Logger.Warn("supervisor run failed", "err", err)
	}
	s.mu.Lock()
	s.reports = append(s.reports, r)
	s.mu.Unlock()
	return r
}

// Reports returns the supervisors' reports so far.
func (s *System) Reports() []supervisor.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]supervisor.Report(nil), s.reports...)
}

// Totals adds up the supervisors' reports so far.
func (s *System) Totals() (rescued, gaveUp, lostRaces int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reports {
		rescued += r.Rescued
		gaveUp += r.GaveUp
		lostRaces += r.LostRaces
	}
	return
}

// Submit sends intake messages in batches of ten, as an application would.
func (s *System) Submit(ctx context.Context, intakes ...sas.Intake) error {
	msgs := make([]sas.OutboundMessage, len(intakes))
	for i, in := range intakes {
		msgs[i] = sas.OutboundMessage{ID: fmt.Sprintf("m%d", i), Body: sas.Encode(in)}
	}
	return s.SendRaw(ctx, s.Config.IntakeQueueURL, msgs...)
}

// SendRaw sends bodies as they are (for malformed input tests).
func (s *System) SendRaw(ctx context.Context, url string, msgs ...sas.OutboundMessage) error {
	res, err := s.Queue.Send(ctx, sas.SendParams{QueueURL: url, Messages: msgs})
	if err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return fmt.Errorf("sending %d messages: %d failed, first: %s %s", len(msgs), len(res.Failed), res.Failed[0].Code, res.Failed[0].Message)
	}
	return nil
}

// Statuses drains the status queue.
func (s *System) Statuses(ctx context.Context) ([]sas.Status, error) {
	var out []sas.Status
	for {
		msgs, err := s.observer.Receive(ctx, sas.ReceiveParams{QueueURL: s.StatusQueueURL, Max: 10, Wait: 0})
		if err != nil {
			return out, err
		}
		if len(msgs) == 0 {
			return out, nil
		}
		var receipts []string
		for _, m := range msgs {
			var st sas.Status
			if err := json.Unmarshal([]byte(m.Body), &st); err != nil {
				return out, fmt.Errorf("a status message that is not a status: %w", err)
			}
			out = append(out, st)
			receipts = append(receipts, m.Receipt)
		}
		if _, err := s.observer.Delete(ctx, sas.DeleteParams{QueueURL: s.StatusQueueURL, Receipts: receipts}); err != nil {
			return out, err
		}
	}
}

// WaitTerminal polls the store until every order is terminal (every step
// Processed, or the order settled in Error/Compensated/CompensationFailed
// with nothing in flight) or ctx ends. It returns the final views.
func (s *System) WaitTerminal(ctx context.Context, ids []string, every time.Duration) (map[string]sas.OrderView, error) {
	views := map[string]sas.OrderView{}
	pending := append([]string(nil), ids...)
	for {
		var still []string
		for _, id := range pending {
			v, err := s.observerStore.GetOrder(ctx, id)
			if err != nil && !errors.Is(err, sas.ErrNotFound) {
				return views, err
			}
			if err == nil {
				views[id] = v
				if Settled(v) {
					continue
				}
			}
			still = append(still, id)
		}
		if pending = still; len(pending) == 0 {
			return views, nil
		}
		select {
		case <-ctx.Done():
			return views, fmt.Errorf("%d orders not settled (first %s): %w", len(pending), pending[0], ctx.Err())
		case <-time.After(every):
		}
	}
}

// Settled reports whether nothing will move an order on its own any more.
func Settled(v sas.OrderView) bool {
	if len(v.Steps) == 0 {
		return false
	}
	for _, r := range v.Steps {
		switch r.ProcessState {
		case sas.Processing, sas.Compensating:
			return false
		case sas.Pending:
			if !r.DueAt.IsZero() {
				return false // ready: somebody will claim it
			}
		}
	}
	// A Pending step waiting on a Processed predecessor is not settled (its
	// claim is on its way); nor is a failed order with completed steps (their
	// undo is on its way).
	failed := false
	for i, r := range v.Steps {
		if r.ProcessState == sas.Pending && i > 0 && v.Steps[i-1].ProcessState == sas.Processed {
			return false
		}
		if r.ProcessState == sas.Error {
			failed = true
		}
	}
	if failed {
		for _, r := range v.Steps {
			// A failed undo stops the compensation where it is: the
			// Processed steps below it wait for an operator, not for an
			// undo on its way (without this, WaitTerminal never returned
			// for such an order and the demo counted it as never settled).
			if r.ProcessState == sas.CompensationFailed {
				return true
			}
		}
		for _, r := range v.Steps {
			if r.ProcessState == sas.Processed {
				return false
			}
		}
	}
	return true
}

// Close stops the simulator. Tables and queues are left for inspection;
// the emulators are in-memory and go away with them.
func (s *System) Close() {
	s.Sim.Close()
	_ = s.simServer.Close()
}

// Invoke runs a handler on a hand-built event (for tests of duplicate
// deliveries).
func Invoke(ctx context.Context, h SQSHandler, bodies ...string) (events.SQSEventResponse, error) {
	ev := events.SQSEvent{}
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("hand-%d", i), Body: b, EventSource: "aws:sqs"})
	}
	return h(ctx, ev)
}

// InFlight counts the step records the index holds as Pending (ready),
// Processing or Compensating: while any is left the run is not over. It pages
// through the sparse index, so it costs what is in flight, not the table.
func (s *System) InFlight(ctx context.Context) (int, error) {
	n := 0
	for _, st := range []sas.ProcessState{sas.Pending, sas.Processing, sas.Compensating} {
		cursor := ""
		for {
			page, err := s.observerStore.ListByState(ctx, sas.ListByStateParams{State: st, Cursor: cursor, Limit: 500})
			if err != nil {
				return n, fmt.Errorf("listing %s records: %w", st, err)
			}
			n += len(page.Records)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
	}
	return n, nil
}

// Views reads the orders from the store with a few readers at once; an id
// that is not in the store is absent from the map.
func (s *System) Views(ctx context.Context, ids []string) (map[string]sas.OrderView, error) {
	const readers = 8
	views := make(map[string]sas.OrderView, len(ids))
	var mu sync.Mutex
	var firstErr error
	next := make(chan string)
	var wg sync.WaitGroup
	for range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				v, err := s.observerStore.GetOrder(ctx, id)
				mu.Lock()
				switch {
				case err == nil:
					views[id] = v
				case !errors.Is(err, sas.ErrNotFound) && firstErr == nil:
					firstErr = fmt.Errorf("reading order %s: %w", id, err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		select {
		case next <- id:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return views, firstErr
}

// WaitSettled waits until every order is terminal, cheaply at scale: it
// watches the index until nothing is in flight, then reads every order, and
// keeps watching the ones not yet settled. onTick, when set, runs between
// checks (progress lines).
func (s *System) WaitSettled(ctx context.Context, ids []string, every time.Duration, onTick func(inFlight int)) (map[string]sas.OrderView, error) {
	views := map[string]sas.OrderView{}
	pending := ids
	for {
		n, err := s.InFlight(ctx)
		if err != nil && ctx.Err() == nil {
			return views, err
		}
		if onTick != nil {
			onTick(n)
		}
		if n == 0 && ctx.Err() == nil {
			got, err := s.Views(ctx, pending)
			if err != nil {
				return views, err
			}
			var still []string
			for _, id := range pending {
				v, ok := got[id]
				if ok {
					views[id] = v
				}
				if !ok || !Settled(v) {
					still = append(still, id)
				}
			}
			if pending = still; len(pending) == 0 {
				return views, nil
			}
		}
		select {
		case <-ctx.Done():
			return views, fmt.Errorf("%d orders not settled: %w", len(pending), ctx.Err())
		case <-time.After(every):
		}
	}
}

// Evidence gathers what Judge reads, for the orders given and their final
// views.
func (s *System) Evidence(ids []string, views map[string]sas.OrderView) Evidence {
	s.mu.Lock()
	reg := s.Registry
	s.mu.Unlock()
	// An order submitted before a Deploy runs on its own version, which
	// the store keeps.
	defs := map[string]sas.Workflow{}
	for _, v := range views {
		o := v.Order
		key := o.Workflow + "#" + o.Version
		if w, ok := reg[o.Workflow]; o.Version == "" || (ok && w.Version() == o.Version) {
			continue
		}
		if _, done := defs[key]; done {
			continue
		}
		if w, err := s.observerStore.GetDefinition(context.Background(), o.Workflow, o.Version); err == nil {
			defs[key] = w
		}
	}
	return Evidence{
		IDs: ids, Views: views, Registry: reg, Definitions: defs,
		Calls: s.Sim.CallsByKey(), Effects: s.Sim.Effects(),
		Harness: s.Injected.Of, Alerts: s.Alerts.Alerts(),
	}
}

// ByKind wraps a scheduler's handler for messages handed to it directly
// (Invoke) rather than received by a poller: each record without a source
// is given the queue its kind belongs to (an intake the intake queue, a
// retry or compensation the control queue, anything else the scheduler
// queue), as if it had arrived there (docs/trust.md).
func (s *System) ByKind(h SQSHandler) SQSHandler {
	arn := func(url string) string { return sas.LocalQueueARN("us-east-1", url) }
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		for i, r := range ev.Records {
			if r.EventSourceARN != "" {
				continue
			}
			h, _ := sas.DecodeHeader([]byte(r.Body))
			switch h.Kind {
			case "", sas.KindIntake:
				ev.Records[i].EventSourceARN = arn(s.Config.IntakeQueueURL)
			case sas.KindRetry, sas.KindCompensate:
				ev.Records[i].EventSourceARN = arn(s.Config.ControlQueueURL)
			default:
				ev.Records[i].EventSourceARN = arn(s.Config.SchedulerQueueURL)
			}
		}
		return h(ctx, ev)
	}
}

// agentsOf names the agents of a registry's workflows.
func agentsOf(reg sas.Registry) []string {
	var out []string
	for _, as := range reg.StepAgents() {
		for _, a := range as {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return out
}
