package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/msgctx"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
)

// Service handles the scheduler's messages. It holds no state of its own
// (everything is in the store), so any number of instances may run, and one
// instance may handle messages concurrently.
type Service struct {
	cfg Config
	log *slog.Logger
	// defs finds the definition an order runs on, by its version
	// (docs/workflows.md, "Versions").
	defs *sas.Definitions
	// stored marks the registered versions this process has written to
	// the store, by "name#version"; a new order of a version is submitted
	// only after its definition is stored.
	stored sync.Map
	// signer signs the requests and checks the replies' echo.
	signer  *sas.Signer
	metrics *metrics.Emitter
}

// New fills in the configuration's defaults, checks it and returns a
// Service.
func New(cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.ReplyToAllowed = replyToAllowed(cfg.ReplyToAllowed, cfg.ownQueues())
	cfg.SubmitterReplyTo = submitterReplyTo(cfg.SubmitterReplyTo, cfg.ReplyToAllowed)
	signer := cfg.Signer
	if signer == nil {
		var err error
		if signer, err = sas.NewSigner(cfg.SigningKey); err != nil {
			return nil, fmt.Errorf("configuring the scheduler: %w", err)
		}
	}
	// Every line logged with a message's context names the message and
	// its order's trace (internal/msgctx).
	return &Service{cfg: cfg, log: msgctx.Logger(cfg.Logger), defs: sas.NewDefinitions(cfg.Workflows, cfg.Store), signer: signer,
		metrics: metrics.NewEmitter(cfg.Metrics)}, nil
}

// DropError marks a message that is acknowledged without effect because no
// retry could make it succeed: it is malformed, invalid, or about an order or
// step this deployment cannot act on. The handler logs Reason.
type DropError struct {
	Reason string
	Err    error // the cause, if any
}

func (e *DropError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *DropError) Unwrap() error { return e.Err }

func drop(err error, format string, args ...any) error {
	return &DropError{Reason: fmt.Sprintf(format, args...), Err: err}
}

// timeout is a step's time limit: its claim's lease for a step that waits,
// else its agent's call's (callTimeout).
func (s *Service) timeout(d sas.StepDef) time.Duration {
	if d.Callback != nil {
		return d.Callback.Lease() // its claim's lease: the wait (callback.go)
	}
	if d.Timer != nil {
		return d.Timer.Lease() // its claim's lease: the wait (timer.go)
	}
	return s.callTimeout(d)
}

// callTimeout is the limit of one call of a step's agent, the request's
// TimeoutMs: an agent-token step's agent is held to it as any agent is,
// while the step's lease is its wait's (agenttoken.go).
func (s *Service) callTimeout(d sas.StepDef) time.Duration {
	if d.Timeout > 0 {
		return d.Timeout
	}
	return s.cfg.StepTimeout
}

// order is what the handlers of an existing order work from: the order and
// the workflow it runs, and its step records once read.
//
// A reply carries the order's workflow, payload and replyTo (echoed from
// its request: part of message v1), so a reply is handled from them without
// a read. The records are read (read) only where they decide what happens
// next: to plan a compensation. Retry and compensate messages, which carry
// only the order id, read it whole (load).
// view is o's records as an order view with its definition
// (sas.OrderView.Def), so that its State knows which steps have an undo:
// read from the records alone, a step with none before the earliest undone
// one looks owed its undo.
func (o order) view() sas.OrderView {
	v := sas.OrderView{Order: o.ord, Steps: o.steps}
	if len(o.wf.Steps) == len(o.ord.Steps) {
		w := o.wf
		v.Def = &w
	}
	return v
}

type order struct {
	ord   sas.Order
	wf    sas.Workflow
	steps []sas.StepRecord // nil until read
	// known are the results of the steps before knownEnd when the records
	// were not read: a first step's done reply knows all its successor
	// needs (results.go).
	known    sas.Results
	knownEnd int
}

func (o order) id() string { return o.ord.OrderID }

// step returns the record of step i, if read.
func (o order) step(i int) (sas.StepRecord, bool) {
	for _, r := range o.steps {
		if r.Step == i {
			return r, true
		}
	}
	return sas.StepRecord{}, false
}

func (o order) n() int { return len(o.wf.Steps) }

// def is the definition of the step a record's key belongs to: its own, or
// for a fan-out's element its fan-out step's (an element's attempts,
// retries and deadlines are its step's: docs/decisions.md, "Fan-out
// elements are records of their own").
func (o order) def(key int) sas.StepDef { return o.wf.Steps[sas.StepOf(key)] }

// load reads an order and finds its workflow. An order this deployment
// cannot run (unknown, or its workflow changed shape since it was
// submitted) is a DropError: retrying would not change the answer.
func (s *Service) load(ctx context.Context, orderID string) (order, error) {
	v, err := s.cfg.Store.GetOrder(ctx, orderID)
	if errors.Is(err, sas.ErrNotFound) {
		return order{}, drop(err, "no order %s", orderID)
	}
	if err != nil {
		return order{}, fmt.Errorf("reading order %s: %w", orderID, err)
	}
	w, err := s.workflow(ctx, v.Order.Workflow, v.Order.Version)
	if err != nil {
		return order{}, fmt.Errorf("order %s: %w", orderID, err)
	}
	if !slices.Equal(w.StepNames(), v.Order.Steps) || len(v.Steps) != len(w.Steps) {
		return order{}, drop(nil, "order %s was submitted with steps %v of workflow %q, which now has %v",
			orderID, v.Order.Steps, w.Name, w.StepNames())
	}
	return order{ord: v.Order, wf: w, steps: v.Steps}, nil
}

// read fills in the step records of an order built from a reply.
func (s *Service) read(ctx context.Context, o *order) error {
	got, err := s.load(ctx, o.id())
	if err != nil {
		return err
	}
	got.ord.Trace = sas.OrderTrace(got.ord.Trace, o.ord.Trace) // an order stored before traces keeps the message's
	*o = got
	return nil
}

// resend reports whether the message being handled sends the request of
// r's attempt again: r is held, its agent reported no pick-up, and the
// message is a redelivery (docs/protocol.md, "Deadlines start at pick-up"),
// or this very handling claimed it (a write whose commit it could not
// tell, retried and refused: sas.OwnWrite). Its first delivery claimed the
// attempt and may have stopped before the request went out; whatever the
// deadline, nobody else sends it, since the supervisor never re-sends a
// request that may still be queued. A different message about the same
// order (a duplicate intake, a twin reply) sends nothing: the request it
// would send is in the queue already, or is the redelivery's to send.
// Whoever holds the attempt, the request carries the holder and the reply
// is fenced on it, and the agent and the remote are idempotent, so a
// request sent twice costs a call at most.
func (s *Service) resend(ctx context.Context, r sas.StepRecord, now time.Time) bool {
	if !r.ProcessState.Leased() || r.LockedBy == "" || !r.StartedAt.IsZero() {
		return false
	}
	if redelivered(ctx) {
		return true
	}
	_, own := sas.OwnWrite(&sas.RaceError{Current: &r}, s.cfg.Owner, now, r.ProcessState, r.Attempt)
	return own && r.LockedBy == s.cfg.Owner
}

type redeliveryKey struct{}

// withRedelivery marks ctx as handling a redelivered message (Origin).
func withRedelivery(ctx context.Context, yes bool) context.Context {
	if !yes {
		return ctx
	}
	return context.WithValue(ctx, redeliveryKey{}, true)
}

type sentAtKey struct{}

// withSentAt marks ctx as handling a message sent at t (zero: unknown).
func withSentAt(ctx context.Context, t time.Time) context.Context {
	if t.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, sentAtKey{}, t)
}

// queued is how long the message ctx handles waited between its send and
// now (SQS's SentTimestamp; zero when unknown or in the future, a clock's
// skew), at most the queues' retention, past which no message waits.
func queued(ctx context.Context, now time.Time) time.Duration {
	t, _ := ctx.Value(sentAtKey{}).(time.Time)
	if t.IsZero() || !now.After(t) {
		return 0
	}
	return min(now.Sub(t), sizing.QueueRetention)
}

// redelivered reports whether ctx handles a redelivered message.
func redelivered(ctx context.Context) bool {
	yes, _ := ctx.Value(redeliveryKey{}).(bool)
	return yes
}

// redelivery reports whether SQS delivers rec again: its
// ApproximateReceiveCount is over 1.
func redelivery(rec events.SQSMessage) bool {
	n, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	return n > 1
}

// leaseEnd is the deadline of an attempt claimed at now whose request is
// sent after wait: the pick-up allowance (PickupTimeout), then the step's
// timeout (docs/protocol.md, "Deadlines start at pick-up"). An agent that
// picks the request up within the allowance finishes by it and reports
// nothing; a later one reports its pick-up, which moves the deadline.
// undo: the claim is of the step's undo, always an agent's call.
func (s *Service) leaseEnd(def sas.StepDef, undo bool, wait time.Duration, now time.Time) time.Time {
	switch {
	case undo:
		return now.Add(wait + s.cfg.PickupTimeout + s.callTimeout(def))
	case def.Agentless(), def.AgentToken():
		// No request to pick up: its wait (callback.go), or its due time
		// (timer.go); or a wait that counts from the claim, its agent's
		// call inside it (agenttoken.go).
		return now.Add(wait + s.timeout(def))
	}
	return now.Add(wait + s.cfg.PickupTimeout + s.timeout(def))
}

// dispatch adds the agent request for a claimed step (or undo) to u.
func (s *Service) dispatch(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, r sas.StepRecord) {
	s.dispatchAfter(ctx, u, o, def, r, 0)
}

// dispatchAfter is dispatch with the request delayed by wait (an attempt
// after a failed one waits out its retry interval in the agent queue).
//
// The request carries the results of the steps before r (and, for an
// undo, r's own), from o's records or, when o has none that say, read
// (results.go). Should that read fail, nothing is sent and u fails: the
// step is claimed and not started, so the message's redelivery sends the
// request (resend), as after a failed send. (The supervisor would only
// re-drive it at its request's delivery horizon: docs/protocol.md,
// "Deadlines start at pick-up".)
func (s *Service) dispatchAfter(ctx context.Context, u *outbox.Unit, oo order, def sas.StepDef, r sas.StepRecord, wait time.Duration) {
	if def.Agentless() && def.Outside() {
		s.await(ctx, u, oo, def, r) // no agent: its token goes out instead (callback.go)
		return
	}
	if def.Timer != nil {
		// No agent: it waits for its due time (timer.go). A write or read
		// that failed leaves it to the supervisor, as a failed send would.
		if err := s.timer(ctx, u, oo, def, r, false); err != nil {
			s.log.ErrorContext(ctx, "wait step not armed or ended; the supervisor asks again at its deadline",
				"order", oo.id(), "step", r.Step, "attempt", r.Attempt, "err", err)
		}
		return
	}
	if def.ForEach != nil && !sas.IsElement(r.Step) {
		// No request of its own: its elements' (fanout.go).
		if err := s.dispatchFanOut(ctx, u, oo, def, r); err != nil {
			s.log.ErrorContext(ctx, "fan-out not started; the message is left for redelivery, which starts it", "order", oo.id(), "step", r.Step, "err", err)
			u.Fail(fmt.Errorf("starting the fan-out of step %s attempt %d: %w", r.Key(), r.Attempt, err))
		}
		return
	}
	step, undo := r.Step, r.ProcessState == sas.Compensating
	ownResult := undo // an undo sees its own step's result
	if sas.IsElement(r.Step) {
		// An element sees what its step sees; its undo, its own result
		// under its step's name (fanoutstop.go).
		step, ownResult = sas.StepOf(r.Step), false
	}
	results, err := s.resultsFor(ctx, &oo, step, ownResult)
	if err != nil {
		s.log.ErrorContext(ctx, "request not sent: the results it carries could not be read; the message is left for redelivery, which sends it",
			"order", oo.id(), "step", r.Step, "attempt", r.Attempt, "err", err)
		u.Fail(fmt.Errorf("the request for step %s attempt %d: reading the results it carries: %w", r.Key(), r.Attempt, err))
		return
	}
	o := oo.ord
	req := s.request(o, def, r)
	lane := o.Priority
	if req.Compensation {
		// An undo goes to the agent's priority lane where it has one, so
		// that a backlog of forward work does not starve compensations
		// (docs/agents.md, "Priority lanes"). The request still echoes the
		// order's own priority, which the next forward step keeps.
		lane = max(lane, sas.HighPriority)
	}
	if undo && sas.IsElement(r.Step) && len(r.Result) > 0 {
		own := make(sas.Results, len(results)+1)
		for k, v := range results {
			own[k] = v
		}
		own[def.Name] = r.Result
		results = own
	}
	req.Results = results // not signed: read from the records, never echoed
	req.Item = r.Item     // an element's (fanout.go); not echoed either
	u.Send(outbox.Message{
		QueueURL: s.cfg.AgentQueues.URL(def.Agent, lane), Body: sas.Encode(req), Delay: wait,
		What: fmt.Sprintf("the request for step %s attempt %d", r.Key(), r.Attempt),
	})
	s.log.InfoContext(ctx, "step dispatched", "order", o.OrderID, "step", r.Step, "stepName", def.Name,
		"attempt", r.Attempt, "compensation", req.Compensation, "completeBy", r.CompleteBy)
}

// request is the signed agent request for a claimed step (or undo): the
// one definition of what the scheduler sends for an attempt, which the
// check of a handed-back request (requeueAuthentic) rebuilds, so that no
// signed field can be left out of one of them. The results it carries are
// added by dispatchAfter (they are not signed).
func (s *Service) request(o sas.Order, def sas.StepDef, r sas.StepRecord) sas.AgentRequest {
	undo := r.ProcessState == sas.Compensating
	action := def.Action
	if undo {
		action = def.Undo
	}
	req := sas.AgentRequest{
		V: sas.MessageVersion, Kind: sas.KindAgentRequest,
		OrderID: o.OrderID, Step: r.Step, StepName: def.Name, Agent: def.Agent,
		Attempt: r.Attempt, LockedBy: r.LockedBy, CompleteBy: r.CompleteBy,
		IdempotencyKey: sas.IdempotencyKey(o.OrderID, r.Step, r.Generation, undo),
		Payload:        o.Payload,
		Compensation:   undo,
		// Echoed by the agent, so that its reply is handled without reading
		// the order (see Reply).
		Workflow: o.Workflow,
		ReplyTo:  o.ReplyTo,
		// The agent's own limit, counted from when it starts the request:
		// time spent waiting in the agent queue is not execution
		// (docs/protocol.md, "Agent"). Every send carries it, re-sends
		// of a live step included.
		TimeoutMs: s.callTimeout(def).Milliseconds(),
		// What to do, from the definition the order runs on, and what
		// the reply echoes so that later steps stay on that definition
		// and in the order's lane.
		Action: action, Priority: o.Priority, Version: o.Version, Tries: def.Tries,
		Generation: r.Generation,
		// A failed attempt is reported, not left for redelivery, and the
		// step's retry policy applies (transient.go).
		TransientOutcome: true, NonRetryable: def.NonRetryableFor(undo),
		// A late pick-up is reported, so the deadline counts from it
		// (started.go).
		StartedOutcome: true,
		// The order's trace, a span of its own per attempt: a re-send of
		// the same attempt carries the same context.
		Trace: sas.ChildTrace(o.Trace, fmt.Sprintf("%s %s %d", sas.KindAgentRequest, sas.IdempotencyKey(o.OrderID, r.Step, r.Generation, undo), r.Attempt)),
	}
	if def.AgentToken() && !undo {
		// The step's token, for the agent to hand to the outside world
		// (agenttoken.go). Not signed: the reply does not echo it.
		req.Token = s.signer.MintToken(tokenOf(r))
	}
	if undo {
		for g := 0; g < r.Generation; g++ {
			req.PriorKeys = append(req.PriorKeys, sas.IdempotencyKey(o.OrderID, r.Step, g, true))
		}
	}
	s.sign(&req) // so that the reply's echo can be believed (trust.go)
	return req
}

// alert adds an operator alert about a step that needs a person to u. id
// names the event (sas.AlertID, and a suffix for events other than the
// step reaching its state): a redelivery of the message that raised it
// raises the same id, so an alert pipeline that drops repeats pages once.
func (s *Service) alert(u *outbox.Unit, o order, r sas.StepRecord, id, reason string, now time.Time) {
	u.Alert(alertFor(o, r, id, reason, now))
}

func alertFor(o order, r sas.StepRecord, id, reason string, now time.Time) sas.Alert {
	a := sas.Alert{
		ID: id, OrderID: o.id(), Step: r.Step, StepName: r.StepName, State: r.ProcessState, Reason: reason,
		Attempts: r.Attempt, Failures: r.FailureCount, At: now, Source: "scheduler",
	}
	a.Reason = sas.BoundReason(a.Reason)
	if a.StepName == "" && r.Step < o.n() {
		a.StepName = o.wf.Steps[r.Step].Name
	}
	return a
}

// run handles one message outside a Handler: its effects are sent as soon
// as it is done, and a failed one is its error.
func (s *Service) run(ctx context.Context, f func(*outbox.Unit) error) error {
	var b outbox.Batch
	if err := f(b.Unit(0)); err != nil {
		return err
	}
	for _, failed := range b.Flush(ctx, s.sink()) {
		return failed.Err
	}
	return nil
}

func (s *Service) sink() outbox.Sink {
	return outbox.Sink{Queue: s.cfg.Queue, Alerter: s.cfg.Alerter, Logger: s.log}
}
