package localrun

import (
	"context"
	"encoding/base64"
	"fmt"
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

// Close stops the simulator. Tables and queues are left for inspection;
// the emulators are in-memory and go away with them.
func (s *System) Close() {
	s.Sim.Close()
	_ = s.simServer.Close()
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
