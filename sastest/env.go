package sastest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/assembly"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/memstore"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/sizing"
	"github.com/sas-go/sas/internal/supervisor"
	"github.com/sas-go/sas/internal/testkit/clocktest"
	"github.com/sas-go/sas/internal/testkit/logtest"
	"github.com/sas-go/sas/workflow"
)

// Defaults of Options: the deployment's (SAS_MAX_FAILURES,
// SAS_PICKUP_TIMEOUT, SAS_WAIT_LIMIT, the supervisor's schedule).
const (
	DefaultMaxFailures     = supervisor.DefaultMaxFailures
	DefaultPickupTimeout   = scheduler.DefaultPickupTimeout
	DefaultWaitLimit       = supervisor.DefaultWaitLimit
	DefaultSupervisorEvery = time.Minute
	// DefaultTimeout bounds the virtual time one Run may take.
	DefaultTimeout = 24 * time.Hour
)

// Options are the deployment's settings the kit runs with. Zero values take
// the defaults above.
type Options struct {
	// MaxFailures is the failure at which the supervisor gives a step up,
	// for steps whose retry policy sets none (SAS_MAX_FAILURES).
	MaxFailures int
	// PickupTimeout is how long a step handed back for a retry may wait
	// to be claimed before the supervisor re-drives it, and a claim's
	// allowance for its request's pick-up (SAS_PICKUP_TIMEOUT).
	PickupTimeout time.Duration
	// WaitLimit is passed to the supervisor as SAS_WAIT_LIMIT would be,
	// and no longer used by it: a step whose request was never picked up
	// waits until it can no longer be delivered (docs/protocol.md,
	// "Deadlines start at pick-up").
	WaitLimit time.Duration
	// SupervisorEvery is how often the supervisor sweeps, in virtual time.
	SupervisorEvery time.Duration
	// Timeout bounds the virtual time of one Run: an order not settled by
	// then fails the test. The timeouts of the workflow's callback steps
	// are added to it.
	Timeout time.Duration
	// Schedules are the deployment's schedules, fired by FireSchedule.
	Schedules []Schedule
	// Logs receives the scheduler's, supervisor's and agents' logs. Nil:
	// they are kept, and written to the test's log if the test fails.
	Logs io.Writer
}

func (o Options) withDefaults() Options {
	if o.MaxFailures == 0 {
		o.MaxFailures = DefaultMaxFailures
	}
	if o.PickupTimeout == 0 {
		o.PickupTimeout = DefaultPickupTimeout
	}
	if o.WaitLimit == 0 {
		o.WaitLimit = DefaultWaitLimit
	}
	if o.SupervisorEvery == 0 {
		o.SupervisorEvery = DefaultSupervisorEvery
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// Queue names. Their settings are the CDK construct's (internal/sizing).
const (
	intakeQueue    = "intake"
	schedulerQueue = "scheduler"
	controlQueue   = "control"
	statusQueue    = "status"
)

// Env is one deployment in the test process: the workflows and agents
// given to New, a fake clock, an in-memory store and queues. Build it with
// New or NewWith, inject failures with Fail and FailUndo, and run orders
// with Run, one after the other. An Env is for one test; it is not safe for
// concurrent use.
type Env struct {
	t     testing.TB
	ctx   context.Context
	opts  Options
	defs  []workflow.Workflow
	reg   sas.Registry
	clock *clocktest.Clock
	store *memstore.Store
	queue *memqueue.Queue
	alert *alerts.Recorder
	logs  *logtest.Buffer // nil when Options.Logs is set

	definitions *sas.Definitions // the definition each order runs on (its view's Def)

	intakeURL, schedulerURL, controlURL, statusURL string
	sched                                          actor   // the scheduler, on the intake, scheduler and control queues
	agents                                         []actor // one per agent, on its queue
	sup                                            *supervisor.Supervisor
	nextSweep                                      time.Time
	ran                                            map[string]bool // order ids run

	mu       sync.Mutex // the agents' Middleware writes what follows
	faults   map[fault]error
	aimed    map[aimedFault]error // FailOrder's (cancel.go)
	cancels  map[attemptKey]bool  // CancelWhen's, until sent (cancel.go)
	attempts map[attemptKey][]int // the scheduler attempts seen, in order
	calls    []call
	// sent, when set (by this package's tests), sees every message sent
	// and may fail it.
	sent func(queueURL string, m sas.OutboundMessage) *sas.SendFailure

	// The callback steps' answers (callback.go): by step name, the waiting
	// steps seen, and the scheduler's key, whose tokens the answers carry.
	answers map[string]Answer
	waiting map[sas.StepKey]*waiter
	signer  *sas.Signer

	// schedules are Options.Schedules by name (schedule.go).
	schedules map[string]Schedule
}

// actor is a handler and the queues it takes, as an event source mapping
// would feed it.
type actor struct {
	name   string
	queues []string
	batch  int
	handle handler
}

// fault is where an injected failure fires: a step, or its undo, at an
// attempt counted from 1; for FailElement, one element of a fan-out step
// (element is its index + 1; 0 for any request of the step).
type fault struct {
	step    string
	undo    bool
	attempt int
	element int
}

// attemptKey is one order's step, or its undo; for a fan-out, one element
// (element is its index + 1), whose attempts are counted apart.
type attemptKey struct {
	order, step string
	undo        bool
	element     int
}

// elementOf is the element field of fault and attemptKey for req.
func elementOf(req agent.Request) int {
	if req.Item == nil {
		return 0
	}
	return req.Index + 1
}

// call is a Call of some order.
type call struct {
	order string
	Call
}

// New returns an Env running workflows with agents, on the deployment's
// defaults. Every agent a step names must be among agents. A mistake in
// either fails the test.
func New(t testing.TB, workflows []workflow.Workflow, agents ...*agent.Agent) *Env {
	t.Helper()
	return NewWith(t, Options{}, workflows, agents...)
}

// NewWith is New with options.
func NewWith(t testing.TB, opts Options, defs []workflow.Workflow, agents ...*agent.Agent) *Env {
	t.Helper()
	opts = opts.withDefaults()
	reg, err := registry.FromDefinitions(defs)
	if err != nil {
		t.Fatalf("sastest: the workflows are not valid: %v", err)
	}
	start := time.Now().Truncate(time.Millisecond)
	e := &Env{
		t: t, ctx: context.Background(), opts: opts, defs: defs, reg: reg,
		clock: clocktest.New(start), store: memstore.New(memstore.Config{}), alert: alerts.NewRecorder(),
		nextSweep: start.Add(opts.SupervisorEvery), ran: map[string]bool{},
		faults: map[fault]error{}, attempts: map[attemptKey][]int{},
		answers: map[string]Answer{}, waiting: map[sas.StepKey]*waiter{},
	}
	e.definitions = sas.NewDefinitions(reg, e.store)
	e.queue = memqueue.New(memqueue.Options{Clock: e.clock, SendFault: func(url string, m sas.OutboundMessage) *sas.SendFailure {
		e.mu.Lock()
		sent := e.sent
		e.mu.Unlock()
		if sent == nil {
			return nil
		}
		return sent(url, m)
	}})
	logs := opts.Logs
	if logs == nil {
		e.logs = &logtest.Buffer{}
		logs = e.logs
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("sastest: the actors' logs:\n%s", e.logs.String())
			}
		})
	}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))

	byName := map[string]*agent.Agent{}
	for i, a := range agents {
		if a == nil {
			t.Fatalf("sastest: agent %d is nil", i)
		}
		if _, dup := byName[a.Name()]; dup {
			t.Fatalf("sastest: two agents are named %q", a.Name())
		}
		byName[a.Name()] = a
	}
	for _, w := range defs {
		for _, s := range w.Steps {
			if (s.Agent != "" || s.Callback == nil && s.Wait == nil) && byName[s.Agent] == nil {
				t.Fatalf("sastest: step %q of workflow %q names the agent %q, which is not one of the agents given (%s)",
					s.Name, w.Name, s.Agent, agentNames(agents))
			}
		}
	}

	e.intakeURL = e.createQueue(intakeQueue, sizing.SchedulerVisibility, sizing.MaxReceiveCount)
	e.schedulerURL = e.createQueue(schedulerQueue, sizing.SchedulerVisibility, sizing.MaxReceiveCount)
	e.controlURL = e.createQueue(controlQueue, sizing.SchedulerVisibility, sizing.MaxReceiveCount)
	e.statusURL = e.createQueue(statusQueue, 0, 0)
	queues := sas.AgentQueues{ByAgent: map[string]sas.AgentQueue{}}
	for _, a := range agents {
		url := e.createQueue("agent-"+a.Name(), sizing.LambdaVisibility(sizing.AgentTimeout(longestStep(defs, a.Name()))), sizing.MaxReceiveCount)
		queues.ByAgent[a.Name()] = sas.AgentQueue{URL: url}
	}

	// Assembled as a deployment is (internal/assembly), in memory on the
	// fake clock.
	sys := assembly.System{
		Config: config.Config{
			IntakeQueueURL: e.intakeURL, SchedulerQueueURL: e.schedulerURL, ControlQueueURL: e.controlURL, AgentQueues: queues,
			AllowedReplyQueues: []string{e.statusURL},
			// As deployed by default: the SDK's agents echo the signature.
			RequireSignedReplies: true,
			MaxFailures:          opts.MaxFailures, PickupTimeout: opts.PickupTimeout, WaitLimit: opts.WaitLimit,
			Schedules: e.scheduleConfigs(opts.Schedules),
		},
		Parts: assembly.Parts{
			Store: e.store, Queue: e.queue, Alerter: alerts.NewMulti(alerts.NewLog(log), e.alert), Workflows: reg,
			Clock: e.clock, Logger: log,
		},
	}
	for _, a := range agents {
		h, err := sys.WithLog(log.With("actor", "agent", "agent", a.Name()), nil).
			AgentHandler(sys.AgentQueue(a.Name()), assembly.Hosting{Middleware: e.middleware}, a)
		if err != nil {
			t.Fatalf("sastest: %v", err)
		}
		e.agents = append(e.agents, actor{name: "agent " + a.Name(), queues: []string{queues.ByAgent[a.Name()].URL}, batch: 1, handle: h.Handle})
	}
	// One key per Env, as a local run has one per run.
	key := sas.NewSigningKey()
	if e.signer, err = sas.NewSigner(key); err != nil {
		t.Fatalf("sastest: %v", err)
	}
	svc, err := sys.WithLog(log.With("actor", "scheduler"), nil).Scheduler("sastest-scheduler", key)
	if err != nil {
		t.Fatalf("sastest: %v", err)
	}
	e.sched = actor{name: "scheduler", queues: []string{e.intakeURL, e.schedulerURL, e.controlURL}, batch: 10, handle: scheduler.NewHandler(svc).Handle}
	if e.sup, err = sys.WithLog(log.With("actor", "supervisor"), nil).Supervisor("sastest-supervisor"); err != nil {
		t.Fatalf("sastest: %v", err)
	}
	return e
}

func (e *Env) createQueue(name string, visibility time.Duration, maxReceives int) string {
	e.t.Helper()
	attrs := map[string]string{}
	if visibility > 0 {
		attrs["VisibilityTimeout"] = fmt.Sprint(int(visibility.Seconds()))
	}
	q, err := e.queue.CreateQueue(e.ctx, sas.CreateQueueParams{Name: name, Attributes: attrs, MaxReceiveCount: maxReceives})
	if err != nil {
		e.t.Fatalf("sastest: creating the queue %s: %v", name, err)
	}
	return q.URL
}

// longestStep is the longest timeout of the steps agent runs.
func longestStep(defs []workflow.Workflow, agent string) time.Duration {
	var longest time.Duration
	for _, w := range defs {
		for _, s := range w.Steps {
			if s.Agent == agent {
				longest = max(longest, s.Timeout.D())
			}
		}
	}
	return longest
}

func agentNames(agents []*agent.Agent) string {
	var names []string
	for _, a := range agents {
		if a != nil {
			names = append(names, a.Name())
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Now is the fake clock's time: what the actors read as now.
func (e *Env) Now() time.Time { return e.clock.Now() }

// Fail makes the step called step return err at the given attempt (from 1)
// instead of running its agent's Func, in every order the Env runs: every
// run during that attempt, in-process tries and redeliveries included.
// agent.Permanent(err) is a refusal, and the order is compensated; any other
// error is transient, and the step is retried as deployed (a new attempt
// comes from the supervisor). A later call for the same step and attempt
// replaces the earlier one. A step that no workflow has, an attempt below 1
// or a nil err fails the test.
func (e *Env) Fail(step string, attempt int, err error) {
	e.t.Helper()
	e.inject("Fail", step, false, attempt, err)
}

// FailUndo is Fail for the step's undo: its attempts are counted from 1 too,
// apart from the step's own. A transient error is retried as deployed; a
// permanent one, or the supervisor giving up, leaves the step
// CompensationFailed and an operator alerted. A step without an undo in its
// workflow fails the test.
func (e *Env) FailUndo(step string, attempt int, err error) {
	e.t.Helper()
	e.inject("FailUndo", step, true, attempt, err)
}

// FailElement is Fail for one element of a fan-out step (its index in the
// list, from 0), at its own attempt counted from 1. Fail on a fan-out step
// fails that attempt of each of its elements.
func (e *Env) FailElement(step string, index, attempt int, err error) {
	e.t.Helper()
	if index < 0 {
		e.t.Fatalf("sastest: FailElement(%q, %d): elements count from 0", step, index)
	}
	e.injectAt("FailElement", step, false, attempt, index+1, err)
}

func (e *Env) inject(fn, step string, undo bool, attempt int, err error) {
	e.t.Helper()
	e.injectAt(fn, step, undo, attempt, 0, err)
}

// injectAt is inject at one element of a fan-out step (element: its index
// + 1), or at every request of the step (0).
func (e *Env) injectAt(fn, step string, undo bool, attempt, element int, err error) {
	e.t.Helper()
	var steps []string
	found, hasUndo := false, false
	for _, w := range e.defs {
		for _, s := range w.Steps {
			steps = append(steps, s.Name)
			if s.Name == step {
				found = true
				hasUndo = hasUndo || s.Undo != ""
			}
		}
	}
	slices.Sort(steps)
	switch {
	case !found:
		e.t.Fatalf("sastest: %s(%q): no workflow has a step of that name (steps: %s)", fn, step, strings.Join(slices.Compact(steps), ", "))
	case undo && !hasUndo:
		e.t.Fatalf("sastest: %s(%q): the step has no undo in its workflow, so it is never undone", fn, step)
	case attempt < 1 && fn != "Clear" && fn != "CancelWhen":
		e.t.Fatalf("sastest: %s(%q, %d): attempts count from 1", fn, step, attempt)
	case err == nil && fn != "Clear" && fn != "CancelWhen":
		e.t.Fatalf("sastest: %s(%q, %d): the error is nil, which would be a success", fn, step, attempt)
	case err == nil:
		return // a step that exists: checked only
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults[fault{step: step, undo: undo, attempt: attempt, element: element}] = err
}

// middleware is every agent handler's: it numbers the attempts, fires the
// injected failures and records the calls.
func (e *Env) middleware(next agent.Func) agent.Func {
	return func(ctx context.Context, req agent.Request) (any, error) {
		e.mu.Lock()
		k := attemptKey{order: req.OrderID, step: req.Step, undo: req.Undo, element: elementOf(req)}
		seen := e.attempts[k]
		n := slices.Index(seen, req.Attempt) + 1
		if n == 0 {
			e.attempts[k] = append(seen, req.Attempt)
			n = len(seen) + 1
		}
		err, injected := e.injected(req, n)
		e.mu.Unlock()
		e.cancelBefore(ctx, req)

		var res any
		if !injected {
			res, err = next(ctx, req)
		}
		c := call{order: req.OrderID, Call: Call{Step: req.Step, Attempt: n, Undo: req.Undo, Item: req.Item, Index: req.Index}}
		if err != nil {
			c.Err = err.Error()
		}
		e.mu.Lock()
		e.calls = append(e.calls, c)
		e.mu.Unlock()
		return res, err
	}
}

// Run submits an order of the named workflow with payload (anything
// encoding/json encodes as an object; nil for none) and drives the
// deployment until the order is settled: nothing will move it any more
// without an operator. It returns how the order ended. An unknown workflow,
// an invalid or reused order id, a payload that is not an object, a
// rejected order, or one that does not settle within Options.Timeout of
// virtual time fails the test.
func (e *Env) Run(workflowName, orderID string, payload any) Result {
	e.t.Helper()
	return e.run(nil, workflowName, orderID, payload)
}

// RunAt is Run for an order that starts at a later time (the intake's
// startAt; docs/intake.md, "Starting later"): it is stored at once, its
// first step starts at at by the kit's virtual clock, never before, and
// Run's virtual time limit counts from at.
func (e *Env) RunAt(at time.Time, workflowName, orderID string, payload any) Result {
	e.t.Helper()
	return e.run(&at, workflowName, orderID, payload)
}

func (e *Env) run(at *time.Time, workflowName, orderID string, payload any) Result {
	e.t.Helper()
	if !e.reg.Has(workflowName) {
		e.t.Fatalf("sastest: Run(%q, %q): no workflow of that name (workflows: %s)", workflowName, orderID, strings.Join(e.workflowNames(), ", "))
	}
	if !sas.ValidOrderID(orderID) {
		e.t.Fatalf("sastest: Run(%q, %q): an order id is 1-128 characters of A-Z a-z 0-9 . _ : -", workflowName, orderID)
	}
	if e.ran[orderID] {
		e.t.Fatalf("sastest: Run(%q, %q): this Env already ran an order of that id; give each order its own", workflowName, orderID)
	}
	e.ran[orderID] = true
	var body json.RawMessage
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			e.t.Fatalf("sastest: Run(%q, %q): encoding the payload: %v", workflowName, orderID, err)
		}
		if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
			e.t.Fatalf("sastest: Run(%q, %q): the payload must encode as a JSON object, not %s", workflowName, orderID, b)
		}
		body = b
	}
	start := e.clock.Now()
	e.send(e.intakeURL, sas.Encode(sas.Intake{V: sas.MessageVersion, Kind: sas.KindIntake, OrderID: orderID,
		Workflow: workflowName, Payload: body, ReplyTo: e.statusURL, StartAt: at}))
	limit := start.Add(e.opts.Timeout + e.waits(workflowName))
	if at != nil && at.After(start) {
		limit = limit.Add(at.Sub(start))
	}
	v, statuses := e.drive(orderID, limit)
	return e.result(v, statuses, e.clock.Now().Sub(start))
}

func (e *Env) workflowNames() []string {
	var names []string
	for _, w := range e.defs {
		names = append(names, w.Name)
	}
	return names
}

func (e *Env) send(url, body string) {
	e.t.Helper()
	res, err := e.queue.Send(e.ctx, sas.SendParams{QueueURL: url, Messages: []sas.OutboundMessage{{ID: "0", Body: body}}})
	if err == nil && len(res.Failed) > 0 {
		err = fmt.Errorf("%s: %s", res.Failed[0].Code, res.Failed[0].Message)
	}
	if err != nil {
		e.t.Fatalf("sastest: sending to %s: %v", url, err)
	}
}
