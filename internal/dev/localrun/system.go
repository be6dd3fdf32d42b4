package localrun

import (
	"github.com/sas-go/sas/internal/dev/judge"

	"github.com/sas-go/sas/internal/dev/poller"

	"context"
	"fmt"
	mathrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	sdk "github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/assembly"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/registry"
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
	Pollers     []*poller.Poller
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
	// definitions gives the views read through observerStore their
	// definition (sas.Definitions.Attach), so that Settled knows which
	// steps still owe an undo.
	definitions *sas.Definitions

	// assembly is the system the actors are built from (assemble), and
	// schedQueue the schedulers' queue: its own, decorated with the chaos
	// the options ask for.
	assembly   assembly.System
	schedQueue sas.Queue
	simServer  *http.Server
	killed     atomic.Int64
	agentsHeld atomic.Bool // HoldAgents
	mu         sync.Mutex
	reports    []supervisor.Report
}

// Start provisions the tables, queues and simulator (provision), assembles
// the actors on them as every deployment does (assemble), and feeds them
// with pollers. It does not start polling: call Run, or drive the pollers
// and supervisors by hand (PollOnce, RunOnce) in tests.
func Start(ctx context.Context, opts Options) (*System, error) {
	opts.defaults()
	s := &System{Opts: opts, Alerts: alerts.NewRecorder(), DLQs: map[string]string{}, Injected: newInjectedLog()}
	if err := s.provision(ctx); err != nil {
		return nil, err
	}
	if err := s.assemble(); err != nil {
		return nil, err
	}
	s.addPollers()
	return s, nil
}

// assemble builds the schedulers, agents and supervisors through the
// assembly (internal/assembly), as the Lambda functions, the dev server and
// the test kit build them, on the parts provision made. What is local run's
// own decorates those parts: every actor's sends may be duplicated, a
// scheduler's may kill it (chaos.go), and each supervisor's clock may be
// skewed.
func (s *System) assemble() error {
	opts := s.Opts
	reg := opts.Workflows
	if reg == nil {
		var err error
		if reg, err = registry.Default(s.Config.StepTimeout); err != nil {
			return err
		}
	}
	s.Registry = reg
	coin := newChance(opts.Seed)
	var actorQueue sas.Queue = s.Queue
	if opts.DuplicateRate > 0 {
		actorQueue = &dupQueue{Queue: s.Queue, rate: opts.DuplicateRate, coin: coin, log: s.Injected}
	}
	s.schedQueue = actorQueue
	if opts.KillBeforeSendRate > 0 {
		s.schedQueue = &killBeforeSendQueue{Queue: actorQueue, agentQueueURLs: s.Config.AgentQueues.All(), rate: opts.KillBeforeSendRate, coin: coin, log: s.Injected}
	}
	s.assembly = assembly.System{
		Config: s.Config,
		Parts: assembly.Parts{
			Store: s.Store, Queue: actorQueue, Alerter: alerts.NewMulti(alerts.NewLog(opts.Logger), s.Alerts),
			Workflows: reg, Logger: opts.Logger, Metrics: opts.Metrics,
		},
		// Short, so that rescues happen in seconds.
		BaseBackoff: opts.BaseBackoff, MaxBackoff: 4 * opts.BaseBackoff,
	}
	var err error
	if s.Schedulers, s.Agents, err = s.buildActors(reg); err != nil {
		return err
	}
	for i := 0; i < opts.Supervisors; i++ {
		sys := s.assembly
		sys.Clock = skewedClock{offset: skewFor(i, opts.Supervisors, opts.ClockSkew)}
		sup, err := sys.Supervisor(fmt.Sprintf("supervisor-%d", i))
		if err != nil {
			return err
		}
		s.Supervisors = append(s.Supervisors, sup)
	}
	return nil
}

// addPollers feeds each instance's scheduler and agent from their queues,
// as Lambda's event source mappings would.
func (s *System) addPollers() {
	opts, cfg := s.Opts, s.Config
	arn := func(url string) string { return sas.LocalQueueARN("us-east-1", url) }
	for i := 0; i < opts.Instances; i++ {
		sch := poller.SQSHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			return s.scheduler(i).Handle(ctx, ev)
		})
		ag := poller.SQSHandler(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			return s.agent(i).Handle(ctx, ev)
		})
		s.Pollers = append(s.Pollers,
			&poller.Poller{Name: fmt.Sprintf("intake-%d", i), Queue: s.Queue, QueueURL: cfg.IntakeQueueURL, QueueARN: arn(cfg.IntakeQueueURL), BatchSize: opts.BatchSize, Workers: opts.PollerWorkers, Handler: sch, Logger: opts.Logger},
			&poller.Poller{Name: fmt.Sprintf("scheduler-%d", i), Queue: s.Queue, QueueURL: cfg.SchedulerQueueURL, QueueARN: arn(cfg.SchedulerQueueURL), BatchSize: opts.BatchSize, Workers: opts.PollerWorkers, Handler: sch, Logger: opts.Logger},
			&poller.Poller{Name: fmt.Sprintf("control-%d", i), Queue: s.Queue, QueueURL: cfg.ControlQueueURL, QueueARN: arn(cfg.ControlQueueURL), BatchSize: opts.BatchSize, Workers: opts.PollerWorkers, Handler: sch, Logger: opts.Logger},
			&poller.Poller{Name: fmt.Sprintf("agent-%d", i), Queue: s.Queue, QueueURL: cfg.AgentQueueURL, QueueARN: arn(cfg.AgentQueueURL), BatchSize: opts.BatchSize, Workers: opts.AgentWorkers, Handler: ag, Logger: opts.Logger},
		)
		if lane := cfg.AgentPriorityQueueURL; lane != "" {
			s.Pollers = append(s.Pollers,
				&poller.Poller{Name: fmt.Sprintf("agent-priority-%d", i), Queue: s.Queue, QueueURL: lane, QueueARN: arn(lane), BatchSize: opts.BatchSize, Workers: opts.PriorityWorkers, Handler: ag, Logger: opts.Logger})
		}
	}
	// An operator's pause of an agent stops the pollers of the agent queue
	// (docs/console.md, "Pausing an agent"). Here every agent shares that
	// queue, so pausing any of them stops it for all.
	agentNames := agentsOf(s.Registry)
	for _, p := range s.Pollers {
		if strings.HasPrefix(p.Name, "agent-") {
			paused := poller.PausedBy(s.observerStore, agentNames...) // the platform's, not the system's: uncounted
			p.Paused = func(ctx context.Context) bool { return s.agentsHeld.Load() || paused(ctx) }
		}
	}
	for _, p := range s.Pollers {
		f := &inflight{}
		p.Handler = f.wrap(p.Handler)
		s.inflight = append(s.inflight, f)
		// A batch received for an instance killed meanwhile was held by
		// it, as what its handler held: blame those orders too.
		p.Abandoned = func(msgs []sas.InboundMessage) {
			now := time.Now()
			for _, m := range msgs {
				s.Injected.note(judge.FaultKilled, m.Body, now)
			}
		}
	}
}

// buildActors builds one scheduler and one agent per instance, running reg.
func (s *System) buildActors(reg sas.Registry) (schedulers []*scheduler.Handler, agents []*sdk.Handler, err error) {
	key, err := sas.ParseSigningKey(s.Config.SigningKey)
	if err != nil {
		return nil, nil, err
	}
	sys := s.assembly
	sys.Workflows = reg
	sched := sys
	sched.Queue = s.schedQueue // a scheduler's sends may kill it
	for i := 0; i < s.Opts.Instances; i++ {
		svc, err := sched.Scheduler(fmt.Sprintf("scheduler-%d-%s", i, sas.RandomID(4)), key)
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
		client, err := sdk.NewHTTPClient(sdk.HTTPConfig{AttemptTimeout: s.Opts.AttemptTimeout, MaxResponseBytes: agenthost.MaxResponseBytes, Backoff: 50 * time.Millisecond, MaxBackoff: time.Second, SafetyMargin: 200 * time.Millisecond, Breaker: s.Opts.Breaker})
		if err != nil {
			return nil, nil, err
		}
		ag, err := sys.BuiltinAgent(builtinagent.Deps{Client: client,
			AllowHTTP: true}, assembly.Hosting{}) // a local run: its remote service is local
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
							s.Injected.note(judge.FaultKilled, b, now)
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
			poller.Ticker(ctx, s.Opts.KillEvery, func(context.Context) {
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
			poller.Ticker(ctx, s.Opts.SupervisorEvery, func(ctx context.Context) { s.Sweep(ctx, sup) })
		}()
	}
	wg.Wait()
}

// HoldAgents stops (true) or restarts (false) every agent poller's
// receives, as a saturated or throttled agent would: the requests wait in
// the agent queue, and nothing records a pause, so the supervisor judges
// their steps as it judges any backlog's. A test makes an overload of a
// known depth with it, whatever the speed of the machine.
func (s *System) HoldAgents(hold bool) { s.agentsHeld.Store(hold) }

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
