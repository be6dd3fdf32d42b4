package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/assembly"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/memstore"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sasctl"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/sizing"
	"github.com/sas-go/sas/internal/sqsevent"
	"github.com/sas-go/sas/internal/supervisor"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// The deployment the simulator runs: the construct's queue settings, and
// limits short enough that a seed's run goes through many supervisor
// decisions in little virtual time.
const (
	maxReceives        = sizing.MaxReceiveCount // every queue's redrive policy, as the construct sets it
	schedulerVisible   = sizing.SchedulerVisibility
	agentMaxDeliveries = agenthost.DefaultMaxDeliveries // the agents' hand-back, as assembled
	pickupTimeout      = 30 * time.Second
	waitLimit          = time.Minute
	sweepEvery         = 10 * time.Second
	stepTimeout        = 10 * time.Second
	// supervisorMaxFailures is the supervisors' default failure threshold.
	supervisorMaxFailures = 3
	// undoMaxFailures is the schedulers' and supervisors' undo threshold:
	// an undo has its own retry policy, longer than a step's (as deployed,
	// though shorter than the deployed 20, so that runs settle).
	undoMaxFailures = 5
	// maxSkew bounds the second supervisor's clock skew, either way.
	maxSkew = 2 * time.Second
)

// agentTimeout is the agents' function timeout, as the construct sizes it
// for steps of up to twice stepTimeout (a variant's).
var agentTimeout = sizing.AgentTimeout(2 * stepTimeout)

// start is the virtual time every run starts at: fixed, so that a trace
// reads the same on every replay, and far ahead of the wall clock, so that
// the agents' context deadlines (which Go counts in real time) never end.
var start = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// World is one run's deployment: the real scheduler, supervisor, agent
// handler and operator commands over the in-memory store, the queue model
// and the remote model, on a fake clock.
type World struct {
	cfg   Config
	rng   *rand.Rand
	clock *clocktest.Clock
	mem   *memstore.Store
	st    *store

	queues                []*queue // in creation order: iteration is deterministic
	byURL                 map[string]*queue
	intake, sched, status *queue
	control               *queue
	agentQ                map[string]*queue
	agentNames            []string
	schedulers            []*scheduler.Handler
	supervisors           []*supervisor.Supervisor
	agents                map[string]*agent.Handler
	operator              *sasctl.App
	tasks                 []*task
	nextTask, nextMsg     int
	remote                *remote
	alerts                []sas.Alert
	statuses              map[string][]sas.Status
	gaveUp                []failure
	resubmitted           map[string]bool // failures an operator resubmitted, by failure.id
	// reported holds the attempts whose agent's transient outcome a
	// scheduler handled (acknowledged, and ended normally): issue 19's
	// rule, a failure is counted, never waited on.
	reported map[reportedAttempt]bool
	// requested holds, for each attempt of a step, the number of the last
	// message that carried its agent request (by any task).
	requested            map[reportedAttempt]int
	picked               map[pickedAttempt]bool  // goodput.go
	defs                 map[string]sas.Workflow // by version
	v1, v2               sas.Workflow
	deployed             bool
	orders               []string
	violations           []Violation
	trace                []string
	events               int
	faults               bool
	calmSince            time.Time
	opsLeft, submitsLeft int
	cancelsLeft          int // cancels still to send (Config.Cancels)
	// compensateAsked: the orders an operator asked to compensate.
	compensateAsked map[string]bool
	// cancelAccepted: the orders whose cancel the store accepted (cancel.go).
	cancelAccepted map[string]bool
	// unstartedAtCancel: for each cancelled order, the steps never claimed
	// when the store accepted its first mark, the moment the cancel landed
	// (cancel.go, checkCancelled).
	unstartedAtCancel map[string][]int
	// cancelsWhileBranching counts the cancels that landed while two
	// steps or more of their order were in flight (Result).
	cancelsWhileBranching int
	// forged counts the forged messages put on the scheduler queue.
	forged       int
	discard      *slog.Logger
	deadLettered int
	redriven     int
	// poisoned: the orders a message of which went to a dead-letter queue
	// as a poison message does (lastHandlersCut, renewedOut). The queue's
	// alarm tells an operator, who redrives it: an order never stored (its
	// intake there), or a failure told by that message alone, is then no
	// violation.
	poisoned map[string]bool
	// startAt: the orders submitted to start later, and when (waits.go).
	startAt map[string]time.Time
	// storeDownUntil ends the store's outage (Faults.Outage).
	storeDownUntil time.Time
	// cb: the outside world of callback steps, and what their rules
	// remember (callbacks.go).
	cb *callbacks
	// sch is the deployment's schedule, if it has one (schedules.go).
	sch schedWorld
}

// Violation is an invariant the run broke.
type Violation struct {
	Rule   string
	Detail string
}

func (v Violation) String() string { return v.Rule + ": " + v.Detail }

func (w *World) violate(rule, format string, args ...any) {
	v := Violation{Rule: rule, Detail: fmt.Sprintf(format, args...)}
	w.violations = append(w.violations, v)
	w.tracef("VIOLATION %s", v)
}

func (w *World) tracef(format string, args ...any) {
	line := fmt.Sprintf("[%4d %8s] ", w.events, w.clock.Now().Sub(start).Round(time.Millisecond)) + fmt.Sprintf(format, args...)
	w.trace = append(w.trace, line)
	if w.cfg.Log != nil {
		fmt.Fprintln(w.cfg.Log, line)
	}
}

func newWorld(cfg Config) *World {
	w := &World{
		cfg:         cfg,
		rng:         rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5a5)),
		clock:       clocktest.New(start),
		mem:         memstore.New(memstore.Config{Shards: 2}),
		byURL:       map[string]*queue{},
		agentQ:      map[string]*queue{},
		agents:      map[string]*agent.Handler{},
		statuses:    map[string][]sas.Status{},
		resubmitted: map[string]bool{},
		reported:    map[reportedAttempt]bool{},
		requested:   map[reportedAttempt]int{},
		poisoned:    map[string]bool{},
		defs:        map[string]sas.Workflow{},
		faults:      true,
		discard:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	w.st = &store{w: w, mem: w.mem}
	w.remote = newRemote(w)
	w.opsLeft, w.submitsLeft = cfg.Operator, cfg.LateOrders
	w.compensateAsked, w.startAt = map[string]bool{}, map[string]time.Time{}
	if cfg.Cancels {
		w.cancelsLeft = 2
	}
	w.cancelAccepted = map[string]bool{}
	w.unstartedAtCancel = map[string][]int{}
	w.initSchedules()

	w.intake = w.newQueue("intake", "scheduler", schedulerVisible)
	w.sched = w.newQueue("scheduler", "scheduler", schedulerVisible)
	w.status = w.newQueue("status", "", 0)
	w.control = w.newQueue("control", "scheduler", schedulerVisible)
	w.v1 = tripWorkflow()
	switch {
	case cfg.branching():
		w.v1 = tripBranches()
		if cfg.choosing() {
			w.v1 = branchChoices(w.v1, cfg.Seed)
		}
	case cfg.choosing():
		w.v1 = withChoices(w.v1, cfg.Seed)
	}
	if cfg.callbacking() {
		w.v1 = withCallback(w.v1, cfg.Seed) // callbacks.go
		if cfg.agentToken() {
			w.v1 = withAgentToken(w.v1) // agenttoken.go
		}
	}
	if cfg.waiting() {
		w.v1 = withWait(w.v1, cfg.Seed)
	}
	if cfg.fanning() {
		w.v1 = withFanOut(w.v1, cfg.Seed, cfg.fanOutFailures()) // fanout.go
		if !cfg.fanOutFailures() {
			// A cancel of elements is not built yet, nor any element's
			// outcome but done: no remote fault in the run (an element's
			// call fails fast, transient, once its agent's circuit opened
			// on other steps' faults: seed 1002), and no jump of the clock
			// (a request picked up late is reported started, one received
			// past the agents' deliveries is handed back: seed 1315).
			w.cancelsLeft = 0
			w.cfg.Faults.Transient, w.cfg.Faults.Refusal, w.cfg.Faults.Lost, w.cfg.Faults.Jump = 0, 0, 0, 0
		}
	}
	w.v2 = variant(w.v1, cfg.Variant)
	w.defs[w.v1.Version()] = w.v1
	w.defs[w.v2.Version()] = w.v2
	for _, wf := range []sas.Workflow{w.v1, w.v2} {
		for _, s := range wf.Steps {
			if s.Agentless() {
				continue
			}
			if w.agentQ[s.Agent] == nil {
				w.agentQ[s.Agent] = w.newQueue("agent-"+s.Agent, s.Agent, sizing.LambdaVisibility(agentTimeout))
				w.agentNames = append(w.agentNames, s.Agent)
			}
		}
	}
	for _, name := range w.agentNames {
		w.agents[name] = w.newAgent(name)
	}
	w.deploy(w.v1, "")
	w.operator = &sasctl.App{Store: w.st, Queue: queues{w}, Clock: w.clock, IntakeQueueURL: w.intake.url,
		ControlQueueURL: w.control.url, PickupTimeout: pickupTimeout, Actor: "operator:sim", Out: io.Discard}
	return w
}

func (w *World) newQueue(name, consumer string, visibility time.Duration) *queue {
	q := &queue{name: name, url: "https://sqs.sim.example/000000000000/" + name, arn: "arn:aws:sqs:sim:000000000000:" + name,
		visibility: visibility, consumer: consumer}
	if consumer != "" {
		q.maxReceives = maxReceives
		if w.cfg.Sabotage == SabotageShortWindow {
			q.maxReceives = shortWindowReceives
		}
		q.dlq = &queue{name: name + "-dlq", url: q.url + "-dlq", arn: q.arn + "-dlq"}
		w.byURL[q.dlq.url] = q.dlq
	}
	w.queues = append(w.queues, q)
	w.byURL[q.url] = q
	return q
}

// deploy replaces the schedulers and supervisors with ones running wf:
// two of each, the second supervisor's clock skewed. They are assembled as
// every deployment's are (internal/assembly), from the world's parts.
func (w *World) deploy(wf sas.Workflow, suffix string) {
	reg, err := sas.NewRegistry(wf)
	if err != nil {
		panic(err)
	}
	sys := w.system(reg)
	w.schedulers = nil
	for _, owner := range []string{"sched-a" + suffix, "sched-b" + suffix} {
		svc, err := sys.Scheduler(owner, signingKey)
		if err != nil {
			panic(err)
		}
		w.schedulers = append(w.schedulers, scheduler.NewHandler(svc))
	}
	w.supervisors = nil
	skew := time.Duration(w.rng.IntN(int(2*maxSkew/time.Millisecond)+1))*time.Millisecond - maxSkew
	for i, offset := range []time.Duration{0, skew} {
		on := sys
		on.Clock = skewed{w.clock, offset}
		sup, err := on.Supervisor(fmt.Sprintf("sup-%d%s", i+1, suffix))
		if err != nil {
			panic(err)
		}
		w.supervisors = append(w.supervisors, sup)
	}
}

// system is the world's deployment of the workflows of reg: its queues, its
// limits and the parts the simulator gives every actor (the store, queues
// and alerter that stop their callers, the fake clock).
func (w *World) system(reg sas.Registry) assembly.System {
	aq := sas.AgentQueues{ByAgent: map[string]sas.AgentQueue{}}
	for _, name := range w.agentNames {
		aq.ByAgent[name] = sas.AgentQueue{URL: w.agentQ[name].url}
	}
	return assembly.System{
		Config: config.Config{
			IntakeQueueURL: w.intake.url, SchedulerQueueURL: w.sched.url, ControlQueueURL: w.control.url,
			AgentQueues: aq, AllowedReplyQueues: []string{w.status.url},
			RequireSignedReplies: w.signedOnly(),
			MaxFailures:          supervisorMaxFailures, StepTimeout: stepTimeout, PickupTimeout: pickupTimeout, WaitLimit: waitLimit,
			Schedules: w.schedules(),
		},
		Parts: assembly.Parts{
			Store: w.st, Queue: queues{w}, Alerter: alerter{w}, Workflows: reg, Clock: w.clock,
			Logger: w.discard, Metrics: io.Discard,
		},
		BaseBackoff: time.Second, MaxBackoff: 8 * time.Second,
		UndoRetry: undoRetry, OwedRetry: 10 * time.Second,
	}
}

// undoRetry is the undo policy of the schedulers and supervisors.
var undoRetry = sas.RetryPolicy{MaxAttempts: undoMaxFailures, InitialInterval: 2 * time.Second, MaxInterval: 16 * time.Second}

// signingKey is the schedulers' key (fixed: a seed replays byte for byte).
var signingKey = []byte("sim-signing-key-0123456789abcdef-0123456789abcdef")

// skewed is a supervisor's clock, off the world's by a fixed offset.
type skewed struct {
	c      *clocktest.Clock
	offset time.Duration
}

func (s skewed) Now() time.Time { return s.c.Now().Add(s.offset) }

// agentClock is the agents' clock: a sleep between in-process tries is a
// stop (others run meanwhile), not a jump of the world's time.
type agentClock struct{ w *World }

func (c agentClock) Now() time.Time { return c.w.clock.Now() }

func (c agentClock) Sleep(ctx context.Context, d time.Duration) error {
	// The length is the SDK's jitter, drawn outside the seed, and nothing
	// here depends on it: the trace leaves it out, so that a seed replays
	// to the same trace (seed 1234, once it ran branches).
	stop(ctx, opOther, "sleep")
	return ctx.Err()
}

func (w *World) newAgent(name string) *agent.Handler {
	a := agent.New(name, agent.Tries(2), agent.Backoff(100*time.Millisecond, time.Second)).Default(
		func(ctx context.Context, req agent.Request) (any, error) { return w.remote.call(ctx, name, req) },
		func(ctx context.Context, req agent.Request) (any, error) { return w.remote.call(ctx, name, req) },
	)
	sys := w.system(nil) // an agent reads no definition
	sys.Clock = agentClock{w}
	h, err := sys.AgentHandler(sys.AgentQueue(name), assembly.Hosting{}, a)
	if err != nil {
		panic(err)
	}
	return h
}

// alerter is the world's sas.Alerter: it records every alert that went out.
type alerter struct{ w *World }

func (a alerter) Alert(ctx context.Context, al sas.Alert) error {
	c := stop(ctx, opAlert, "alert %s/%d %s attempt %d (%s)", al.OrderID, al.Step, al.State, al.Attempts, al.Source)
	if c.fault == faultFail {
		if t := taskOf(ctx); t != nil {
			t.excused = true
		}
		return errors.New("sim: the alert failed (injected)")
	}
	if a.w.cfg.Sabotage == SabotageLoseAlerts {
		return nil
	}
	if a.w.cfg.Sabotage == SabotageOneAlertID {
		al.ID = "sas-alert"
	}
	a.w.alerts = append(a.w.alerts, al)
	a.w.tracef("  alert out: %s/%d %s attempt %d id=%q: %s", al.OrderID, al.Step, al.State, al.Attempts, al.ID, al.Reason)
	return nil
}

// oldAgent says whether a message an agent sends goes out as an agent built
// before the reply's version field would send it. An element's reply never
// does: an agent that runs a fan-out's elements was built after it
// (fanout.go).
func (w *World) oldAgent(ctx context.Context, body string) bool {
	t := taskOf(ctx)
	return w.cfg.OldAgents && t != nil && strings.HasPrefix(t.name, "agent") &&
		strings.Contains(body, `"kind":"agent.reply"`) && w.rng.IntN(2) == 0 && !elementReply(body)
}

// sent notes a message that went out: it discharges what its task owes,
// and statuses are kept for the checks.
func (w *World) sent(ctx context.Context, q *queue, m *message) {
	w.tracef("  sent %s to %s: %s", m.id, q.name, describeBody(m.body))
	w.sentWaiting(ctx, q, m) // callbacks.go
	w.agentCompletes(q, m)   // agenttoken.go
	if q == w.status {
		m.gone = true
		return
	}
	t := taskOf(ctx)
	if t == nil {
		return
	}
	var h struct {
		Kind    sas.Kind `json:"kind"`
		OrderID string   `json:"orderId"`
		Step    int      `json:"step"`
		Attempt int      `json:"attempt"`
		Requeue bool     `json:"requeue"`
	}
	if json.Unmarshal([]byte(m.body), &h) != nil {
		return
	}
	k := sas.StepKey{OrderID: h.OrderID, Step: h.Step}
	if h.Kind == sas.KindAgentRequest {
		w.requested[reportedAttempt{k, h.Attempt}] = w.nextMsg
	}
	keep := t.owes[:0]
	for _, o := range t.owes {
		switch {
		case o.kind == owesRequest && h.Kind == sas.KindAgentRequest && o.key == k && o.attempt == h.Attempt:
		case o.kind == owesRetry && h.Kind == sas.KindRetry && !h.Requeue && o.key == k && o.attempt == h.Attempt:
		default:
			keep = append(keep, o)
		}
	}
	t.owes = keep
}

// ended is called when a task ends: a task that did not die has the event
// source delete what it acknowledged, and must have sent what its writes
// obliged it to.
func (w *World) ended(t *task) {
	for i, x := range w.tasks {
		if x == t {
			w.tasks = append(w.tasks[:i], w.tasks[i+1:]...)
			break
		}
	}
	if t.panicked != "" {
		w.violate("panic", "task %d (%s) panicked: %s", t.id, t.name, t.panicked)
		return
	}
	if t.dead.Load() {
		w.outrun(t)
		w.tracef("task %d (%s) died", t.id, t.name)
		return
	}
	if t.after != nil {
		t.after()
	}
	w.outrun(t)
	if !t.excused {
		for _, o := range t.owes {
			if o.kind == owesRequest && w.requested[reportedAttempt{o.key, o.attempt}] > o.since {
				// A twin delivery sent it since this task's write: the
				// attempt's request is out, which is what is owed (the
				// twin of an ambiguous commit finds the write made and
				// sends it; this task may then find the step moved on).
				continue
			}
			if o.kind == owesNextAttempt {
				// Owed is that the step does not stay handed back at that
				// attempt, stranded until the supervisor counts another
				// failure: this task's claim or a twin's moved it on.
				if r, err := w.mem.GetStep(context.Background(), o.key); err == nil && (r.Attempt != o.attempt || r.LockedBy != "" ||
					r.ProcessState != sas.RescueTarget(sas.Processing) && r.ProcessState != sas.RescueTarget(sas.Compensating)) {
					continue
				}
			}
			if o.kind == owesRequest && w.picked[pickedAttempt{o.key, o.attempt}] {
				// Another delivery's send of the same request was picked
				// up: the attempt started, and its request is not re-sent
				// (issue 31, goodput.go).
				continue
			}
			w.violate("lost work", "task %d (%s) ended normally without sending %s", t.id, t.name, o)
		}
	}
	w.tracef("task %d (%s) ended", t.id, t.name)
}

// outrun notes, for each message t received and did not delete, whether a
// later receive made t's receipt stale, so that its deletes deleted
// nothing.
func (w *World) outrun(t *task) {
	for _, x := range t.received {
		x.r.outrun = !x.m.gone && x.m.receipt != x.r.receipt
	}
}

// deliver hands up to batch visible messages of q (chosen at random, in
// any order) to its consumer, as an event source mapping would, counting
// each receive and dead-lettering a message received past maxReceives.
func (w *World) deliver(q *queue, msgs []*message) {
	now := w.clock.Now()
	var in []sas.InboundMessage
	var handed []*message
	for _, m := range msgs {
		m.receives++
		if q.maxReceives > 0 && m.receives > q.maxReceives {
			w.deadLetter(q, m)
			continue
		}
		m.visibleAt = now.Add(q.visibility)
		m.receipt = fmt.Sprintf("%s#%d", m.id, m.receives)
		if f := w.cfg.Faults.Unhandled; f > 0 && w.rng.Float64() < f {
			// Received, hidden and counted, and never handed to a
			// handler (issue 31). Drawn only when the fault is on, so
			// that the other mixes' seeds draw what they did.
			m.receipts = append(m.receipts, &receive{receipt: m.receipt})
			w.tracef("receive %d of %s (%s) from %s never reaches a handler", m.receives, m.id, describeBody(m.body), q.name)
			continue
		}
		handed = append(handed, m)
		in = append(in, sas.InboundMessage{MessageID: m.id, Receipt: m.receipt, Body: w.delivered(m), ReceiveCount: m.receives, SentAt: m.sentAt})
	}
	if len(in) == 0 {
		return
	}
	w.serve(q, in) // goodput.go
	var handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	var name string
	timeout := sizing.SchedulerTimeout
	if q.consumer == "scheduler" {
		i := w.rng.IntN(len(w.schedulers))
		handle, name = w.schedulers[i].Handle, fmt.Sprintf("scheduler %d", i)
	} else {
		handle, name, timeout = w.agents[q.consumer].Handle, "agent "+q.consumer, agentTimeout
	}
	var ids []string
	for _, m := range in {
		ids = append(ids, fmt.Sprintf("%s(r%d %s)", m.MessageID, m.ReceiveCount, describeBody(m.Body)))
	}
	w.tracef("deliver %s from %s to %s", strings.Join(ids, ", "), q.name, name)
	t := w.start(name, timeout, func(ctx context.Context) {
		resp, err := handle(ctx, sqsevent.Event(q.arn, in))
		if err != nil {
			return // the whole batch comes back after its visibility timeout
		}
		receipts := sqsevent.Done(in, resp)
		t := taskOf(ctx)
		t.after = func() {
			for _, r := range receipts {
				q.delete(r)
			}
			if q.consumer == "scheduler" {
				w.noteReported(t, in, receipts)
			}
		}
	})
	for _, m := range handed { // received, not dead-lettered, handed to t
		r := &receive{t: t, receipt: m.receipt}
		m.receipts = append(m.receipts, r)
		t.received = append(t.received, received{m, r})
	}
}

// renewed reports whether t handed on (renewed) the message it received
// under receipt.
func (t *task) renewed(receipt string) bool {
	for _, x := range t.received {
		if x.r.receipt == receipt {
			return x.r.handedOffAt > 0
		}
	}
	return false
}

// reportedAttempt is one attempt of one step.
type reportedAttempt struct {
	key     sas.StepKey
	attempt int
}

// noteReported records the transient outcomes a scheduler handled: the
// messages of in that t acknowledged, except those it renewed (a renewal
// hands the message on unread: its copy is still to be handled, and until
// then the attempt may be waited on as any unreported one).
func (w *World) noteReported(t *task, in []sas.InboundMessage, receipts []string) {
	for _, m := range in {
		if !slices.Contains(receipts, m.Receipt) || t.renewed(m.Receipt) {
			continue
		}
		var rep sas.AgentReply
		if json.Unmarshal([]byte(m.Body), &rep) != nil || rep.Kind != sas.KindAgentReply || rep.Outcome != sas.OutcomeTransient {
			continue
		}
		w.reported[reportedAttempt{sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}, rep.Attempt}] = true
	}
}

// sweep runs one supervisor's RunOnce as a task.
func (w *World) sweep(i int) {
	sup := w.supervisors[i]
	w.tracef("sweep by supervisor %d", i+1)
	w.start(fmt.Sprintf("supervisor %d", i+1), sizing.SupervisorTimeout, func(ctx context.Context) { _, _ = sup.RunOnce(ctx) })
}

// operate runs one operator command (sasctl) as a task.
func (w *World) operate(args ...string) {
	if args[0] == "compensate" {
		w.compensateAsked[args[1]] = true
	}
	if args[0] == "resubmit" || args[0] == "compensate" {
		// A run an operator resubmits or compensates may run again beside a
		// later run: skip holds a run back for the previous run only
		// (docs/schedules.md, "Overlap: allow or skip"; seed 53016).
		for id := range w.sch.runs {
			if args[1] == id || args[1] == "-all" {
				w.sch.touched[id] = true
			}
		}
	}
	w.tracef("operator: sasctl %s", strings.Join(args, " "))
	w.start("operator", 0, func(ctx context.Context) { _ = w.operator.Run(ctx, args) })
}

// submit sends an order to the intake queue, as an application does.
func (w *World) submit() {
	id := fmt.Sprintf("o%d", len(w.orders)+1)
	w.orders = append(w.orders, id)
	in := sas.Intake{V: sas.MessageVersion, Kind: sas.KindIntake, OrderID: id, Workflow: w.v1.Name,
		Payload: w.payload(len(w.orders)), ReplyTo: w.status.url}
	if at, ok := w.startLater(len(w.orders)); ok {
		in.StartAt, w.startAt[id] = &at, at
	}
	body := sas.Encode(in)
	w.nextMsg++
	m := &message{id: fmt.Sprintf("m%d", w.nextMsg), body: body, sentAt: w.clock.Now(), visibleAt: w.clock.Now(), sender: "application"}
	w.intake.msgs = append(w.intake.msgs, m)
	w.tracef("submit %s", id)
}
