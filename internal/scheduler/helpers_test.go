package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/memstore"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/testkit/clocktest"
	"github.com/sas-go/sas/internal/testkit/storetest"
)

const (
	owner       = "scheduler-test"
	stepTimeout = 30 * time.Second
	// pickupTimeout is the fixture's PickupTimeout: a claim's deadline
	// is its pick-up allowance plus the step's timeout (leaseTime).
	pickupTimeout = time.Minute
	leaseTime     = pickupTimeout + stepTimeout
)

// intakeQueueURL and controlQueueURL name the intake and control queues of
// the golden events' ARNs; any other queue is the scheduler queue.
const (
	intakeQueueURL  = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-intake"
	controlQueueURL = "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-control"
	intakeARN       = "arn:aws:sqs:eu-west-1:123456789012:sas-intake"
	controlARN      = "arn:aws:sqs:eu-west-1:123456789012:sas-control"
	schedulerARN    = "arn:aws:sqs:eu-west-1:123456789012:sas-scheduler"
)

// testKey is the signing key every scheduler of a fixture shares, as the
// schedulers of a deployment do.
var testKey = []byte("0123456789abcdef0123456789abcdef")

// t0 is the fake clock's start: millisecond-aligned, as the store keeps times.
var t0 = storetest.T0

// recorder is an alerter that keeps what it is told and can be made to fail.
type recorder struct {
	mu     sync.Mutex
	alerts []sas.Alert
	fail   int // fail this many calls before recording again
}

func (r *recorder) Alert(_ context.Context, a sas.Alert) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return errors.New("alerter unavailable")
	}
	r.alerts = append(r.alerts, a)
	return nil
}

func (r *recorder) all() []sas.Alert {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sas.Alert(nil), r.alerts...)
}

// faultyStore fails or panics on the reads and step writes of chosen orders:
// the store being unreachable for one message.
type faultyStore struct {
	sas.StateStore
	mu     sync.Mutex
	fail   map[string]error
	panics map[string]bool
	// beforeSubmit, when set, runs before each submission (schedule_test.go).
	beforeSubmit func(sas.SubmitParams)
	// beforeGetSchedule, when set, runs before each read of a schedule.
	beforeGetSchedule func()
	// listFails fails the next reads of a fan-out's elements
	// (fanoutstop_test.go): a handler that dies at that read.
	listFails int
	// beforeStart, when set, runs once before the next start of a
	// fan-out (fanoutstop_test.go).
	beforeStart func()
	// beforeCancel, when set, runs once before the next cancel write of
	// a step it names (cancelgraph_test.go).
	beforeCancel func(sas.CancelParams) bool
}

func (s *faultyStore) Cancel(ctx context.Context, p sas.CancelParams) (sas.StepRecord, error) {
	s.mu.Lock()
	hook := s.beforeCancel
	s.mu.Unlock()
	if hook != nil && hook(p) {
		s.mu.Lock()
		s.beforeCancel = nil
		s.mu.Unlock()
	}
	return s.StateStore.Cancel(ctx, p)
}

func (s *faultyStore) fault(id string) error {
	s.mu.Lock()
	err, p := s.fail[id], s.panics[id]
	s.mu.Unlock()
	if p {
		panic("store bug for " + id)
	}
	return err
}

func (s *faultyStore) GetOrder(ctx context.Context, id string) (sas.OrderView, error) {
	if err := s.fault(id); err != nil {
		return sas.OrderView{}, err
	}
	return s.StateStore.GetOrder(ctx, id)
}

func (s *faultyStore) Claim(ctx context.Context, p sas.ClaimParams) (sas.StepRecord, error) {
	if err := s.fault(p.Key.OrderID); err != nil {
		return sas.StepRecord{}, err
	}
	return s.StateStore.Claim(ctx, p)
}

func (s *faultyStore) Complete(ctx context.Context, p sas.CompleteParams) ([]sas.StepRecord, error) {
	if err := s.fault(p.Key.OrderID); err != nil {
		return nil, err
	}
	return s.StateStore.Complete(ctx, p)
}

func (s *faultyStore) Fail(ctx context.Context, p sas.FailParams) (sas.StepRecord, error) {
	if err := s.fault(p.Key.OrderID); err != nil {
		return sas.StepRecord{}, err
	}
	return s.StateStore.Fail(ctx, p)
}

// countingStore counts the scheduler's calls to the store, by method: the
// store calls per message are deterministic, and they are what an order
// costs (on DynamoDB, GetOrder is a consistent GetItem and a consistent
// Query; Submit a TransactWriteItems; Complete an UpdateItem, or a
// TransactWriteItems with the successor's claim).
type countingStore struct {
	sas.StateStore
	mu    sync.Mutex
	calls map[string]int
	next  []*sas.ClaimParams // Complete's Next, in call order
	// elapsed are the steps completed as the end of a wait (Elapsed: the
	// write fenced on the due time), in call order.
	elapsed []sas.StepKey
}

func (s *countingStore) count(method string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method]++
}

// take returns the counts since the last take, and resets them.
func (s *countingStore) take() (map[string]int, []*sas.ClaimParams) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, n := s.calls, s.next
	s.calls, s.next = map[string]int{}, nil
	return c, n
}

func (s *countingStore) Submit(ctx context.Context, p sas.SubmitParams) (sas.SubmitResult, error) {
	s.count("Submit")
	return s.StateStore.Submit(ctx, p)
}

func (s *countingStore) Claim(ctx context.Context, p sas.ClaimParams) (sas.StepRecord, error) {
	s.count("Claim")
	return s.StateStore.Claim(ctx, p)
}

func (s *countingStore) Complete(ctx context.Context, p sas.CompleteParams) ([]sas.StepRecord, error) {
	s.count("Complete")
	s.mu.Lock()
	s.next = append(s.next, p.Next)
	if p.Elapsed {
		s.elapsed = append(s.elapsed, p.Key)
	}
	s.mu.Unlock()
	return s.StateStore.Complete(ctx, p)
}

func (s *countingStore) Fail(ctx context.Context, p sas.FailParams) (sas.StepRecord, error) {
	s.count("Fail")
	return s.StateStore.Fail(ctx, p)
}

func (s *countingStore) FindDue(ctx context.Context, p sas.FindDueParams) (sas.FindDueResult, error) {
	s.count("FindDue")
	return s.StateStore.FindDue(ctx, p)
}

func (s *countingStore) Rescue(ctx context.Context, p sas.RescueParams) (sas.StepRecord, error) {
	s.count("Rescue")
	return s.StateStore.Rescue(ctx, p)
}

func (s *countingStore) GiveUp(ctx context.Context, p sas.GiveUpParams) (sas.StepRecord, error) {
	s.count("GiveUp")
	return s.StateStore.GiveUp(ctx, p)
}

func (s *countingStore) Start(ctx context.Context, p sas.StartParams) (sas.StepRecord, error) {
	s.count("Start")
	return s.StateStore.Start(ctx, p)
}

func (s *countingStore) Resubmit(ctx context.Context, p sas.ResubmitParams) (sas.StepRecord, error) {
	s.count("Resubmit")
	return s.StateStore.Resubmit(ctx, p)
}

func (s *countingStore) NoteEffect(ctx context.Context, p sas.NoteEffectParams) (sas.StepRecord, error) {
	s.count("NoteEffect")
	return s.StateStore.NoteEffect(ctx, p)
}

func (s *countingStore) Cancel(ctx context.Context, p sas.CancelParams) (sas.StepRecord, error) {
	s.count("Cancel")
	return s.StateStore.Cancel(ctx, p)
}

func (s *countingStore) GetStep(ctx context.Context, k sas.StepKey) (sas.StepRecord, error) {
	s.count("GetStep")
	return s.StateStore.GetStep(ctx, k)
}

func (s *countingStore) GetOrder(ctx context.Context, id string) (sas.OrderView, error) {
	s.count("GetOrder")
	return s.StateStore.GetOrder(ctx, id)
}

func (s *countingStore) ListByState(ctx context.Context, p sas.ListByStateParams) (sas.ListByStateResult, error) {
	s.count("ListByState")
	return s.StateStore.ListByState(ctx, p)
}

var _ sas.StateStore = (*countingStore)(nil)

// fixture is one scheduler over an in-memory store and queues, a fake clock
// and an alert recorder.
type fixture struct {
	t         *testing.T
	ctx       context.Context
	clock     *clocktest.Clock
	mem       *memstore.Store
	store     *faultyStore
	calls     *countingStore // what the schedulers asked of the store
	q         *memqueue.Queue
	alerts    *recorder
	svc       *scheduler.Service
	h         *scheduler.Handler
	agentURL  string
	replyURL  string // allowed
	otherURL  string // allowed, a second caller
	deniedURL string

	mu         sync.Mutex
	failSends  map[string]int                     // queue URL → whole-call failures to inject
	failEntry  func(url string, body string) bool // per-message transient failures
	msgCounter int
	// messages are the message ids made so far, by body: an event of a
	// body made before is the same message (duplicate makes a new one);
	// receives counts each id's deliveries, so that handling a message
	// again is SQS's redelivery of it (ApproximateReceiveCount one up).
	messages map[string]string
	receives map[string]int
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{
		t: t, ctx: context.Background(), clock: clocktest.New(t0),
		mem: memstore.New(memstore.Config{}), alerts: &recorder{}, failSends: map[string]int{},
		messages: map[string]string{}, receives: map[string]int{},
	}
	f.store = &faultyStore{StateStore: f.mem, fail: map[string]error{}, panics: map[string]bool{}}
	f.calls = &countingStore{StateStore: f.store, calls: map[string]int{}}
	f.q = memqueue.New(memqueue.Options{
		Clock: f.clock,
		Fault: func(op memqueue.Op, url string) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if op == memqueue.OpSend && f.failSends[url] > 0 {
				f.failSends[url]--
				return errors.New("injected: connection reset")
			}
			return nil
		},
		SendFault: func(url string, m sas.OutboundMessage) *sas.SendFailure {
			f.mu.Lock()
			fe := f.failEntry
			f.mu.Unlock()
			if fe != nil && fe(url, m.Body) {
				return &sas.SendFailure{Code: "ServiceUnavailable", Message: "injected"}
			}
			return nil
		},
	})
	mk := func(name string) string {
		c, err := f.q.CreateQueue(f.ctx, sas.CreateQueueParams{Name: name})
		require.NoError(t, err)
		return c.URL
	}
	f.agentURL, f.replyURL, f.otherURL, f.deniedURL = mk("agent"), mk("caller"), mk("caller2"), mk("denied")
	f.svc = f.newService(owner)
	f.h = scheduler.NewHandler(f.svc)
	return f
}

func schedulerHandler(svc *scheduler.Service) *scheduler.Handler { return scheduler.NewHandler(svc) }

// newService makes another scheduler instance over the same store and queues.
func (f *fixture) newService(id string) *scheduler.Service {
	f.t.Helper()
	reg, err := registry.Default(stepTimeout)
	require.NoError(f.t, err)
	return f.newServiceWith(id, reg, sas.AgentQueues{Default: f.agentURL})
}

// newServiceStrict is newService requiring signed replies.
func (f *fixture) newServiceStrict(id string) *scheduler.Service {
	f.t.Helper()
	reg, err := registry.Default(stepTimeout)
	require.NoError(f.t, err)
	return f.newServiceConfig(id, reg, sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) { c.RequireSignedReplies = true })
}

// newServiceWith is newService with its own workflows and agent queues.
func (f *fixture) newServiceWith(id string, reg sas.Registry, queues sas.AgentQueues) *scheduler.Service {
	f.t.Helper()
	return f.newServiceConfig(id, reg, queues, nil)
}

func (f *fixture) newServiceConfig(id string, reg sas.Registry, queues sas.AgentQueues, mutate func(*scheduler.Config)) *scheduler.Service {
	f.t.Helper()
	cfg := scheduler.Config{
		Store: f.calls, Queue: f.q, Clock: f.clock, Alerter: f.alerts, Workflows: reg,
		Owner: id, AgentQueues: queues, PickupTimeout: pickupTimeout, IntakeQueueURL: intakeQueueURL,
		ControlQueueURL: controlQueueURL, SigningKey: testKey,
		ReplyToAllowed: func(u string) bool { return u == f.replyURL || u == f.otherURL },
		// Shown only for a failing test (or with -v).
		Logger: slog.New(slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})).With("instance", id),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	svc, err := scheduler.New(cfg)
	require.NoError(f.t, err)
	return svc
}

func (f *fixture) failNextSends(url string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failSends[url] = n
}

func (f *fixture) failEntries(fn func(url, body string) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failEntry = fn
}

// event wraps bodies as one SQS event. A body delivered before is that
// message's redelivery: the same id, its ApproximateReceiveCount one up (a
// handler that failed it, or died with it). Each record comes from the
// queue its kind belongs to (sourceARN); a test of the trust rules sets
// another.
func (f *fixture) event(bodies ...string) events.SQSEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ev events.SQSEvent
	for _, b := range bodies {
		id, ok := f.messages[b]
		if !ok {
			f.msgCounter++
			id = fmt.Sprintf("msg-%d", f.msgCounter)
			f.messages[b] = id
		}
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: id, Body: b, EventSource: "aws:sqs", EventSourceARN: sourceARN(b)})
	}
	return ev
}

// duplicate wraps bodies as one SQS event of new messages, each received
// for the first time: a second message with the same content (a submitter
// that sent its order twice, an agent that replied twice), not a
// redelivery.
func (f *fixture) duplicate(bodies ...string) events.SQSEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ev events.SQSEvent
	for _, b := range bodies {
		f.msgCounter++
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: fmt.Sprintf("msg-%d", f.msgCounter), Body: b, EventSource: "aws:sqs", EventSourceARN: sourceARN(b),
		})
	}
	return ev
}

// sourceARN is the queue a message of body's kind is sent to: an intake
// (or anything that is not JSON) the intake queue, a retry or compensate
// the control queue (an agent's requeue the scheduler queue), a reply the
// scheduler queue.
func sourceARN(body string) string {
	var h struct {
		Kind    sas.Kind `json:"kind"`
		Requeue bool     `json:"requeue"`
	}
	if json.Unmarshal([]byte(body), &h) != nil {
		return intakeARN
	}
	switch h.Kind {
	case "", sas.KindIntake:
		return intakeARN
	case sas.KindRetry:
		if h.Requeue {
			return schedulerARN
		}
		return controlARN
	case sas.KindCompensate, sas.KindRedrive:
		return controlARN
	}
	return schedulerARN
}

// handle delivers an event and returns the ids of the failed messages.
func (f *fixture) handle(ev events.SQSEvent) []string {
	f.t.Helper()
	return f.handleWith(f.h, ev)
}

func (f *fixture) handleWith(h *scheduler.Handler, ev events.SQSEvent) []string {
	f.t.Helper()
	ev.Records = append([]events.SQSMessage(nil), ev.Records...)
	f.mu.Lock()
	for i, rec := range ev.Records {
		if rec.Attributes["ApproximateReceiveCount"] != "" {
			continue // a test that sets it (renew_test)
		}
		f.receives[rec.MessageId]++
		attrs := map[string]string{"ApproximateReceiveCount": strconv.Itoa(f.receives[rec.MessageId])}
		for k, v := range rec.Attributes {
			attrs[k] = v
		}
		ev.Records[i].Attributes = attrs
	}
	f.mu.Unlock()
	resp, err := h.Handle(f.ctx, ev)
	require.NoError(f.t, err)
	require.NotNil(f.t, resp.BatchItemFailures, "batchItemFailures must never be nil")
	ids := []string{}
	for _, it := range resp.BatchItemFailures {
		ids = append(ids, it.ItemIdentifier)
	}
	return ids
}

// deliver handles bodies as one event and requires that none failed.
func (f *fixture) deliver(bodies ...string) {
	f.t.Helper()
	require.Empty(f.t, f.handle(f.event(bodies...)), "no message of the batch may fail")
}

// drain receives and deletes everything in a queue, in send order.
func (f *fixture) drain(url string) []string {
	f.t.Helper()
	var out []string
	for {
		msgs, err := f.q.Receive(f.ctx, sas.ReceiveParams{QueueURL: url, Max: 10})
		require.NoError(f.t, err)
		if len(msgs) == 0 {
			return out
		}
		var receipts []string
		for _, m := range msgs {
			out = append(out, m.Body)
			receipts = append(receipts, m.Receipt)
		}
		_, err = f.q.Delete(f.ctx, sas.DeleteParams{QueueURL: url, Receipts: receipts})
		require.NoError(f.t, err)
	}
}

func (f *fixture) requests() []sas.AgentRequest {
	f.t.Helper()
	var out []sas.AgentRequest
	for _, b := range f.drain(f.agentURL) {
		var r sas.AgentRequest
		require.NoError(f.t, json.Unmarshal([]byte(b), &r))
		require.Equal(f.t, sas.KindAgentRequest, r.Kind)
		out = append(out, r)
	}
	return out
}

// request drains the agent queue and requires exactly one request.
func (f *fixture) request() sas.AgentRequest {
	f.t.Helper()
	reqs := f.requests()
	require.Len(f.t, reqs, 1, "want exactly one agent request")
	return reqs[0]
}

func (f *fixture) statusesAt(url string) []sas.Status {
	f.t.Helper()
	var out []sas.Status
	for _, b := range f.drain(url) {
		var s sas.Status
		require.NoError(f.t, json.Unmarshal([]byte(b), &s))
		require.Equal(f.t, sas.KindStatus, s.Kind)
		require.Equal(f.t, sas.MessageVersion, s.V)
		out = append(out, s)
	}
	return out
}

func (f *fixture) statuses() []sas.Status { f.t.Helper(); return f.statusesAt(f.replyURL) }

// view reads an order and checks every step's history is legal.
func (f *fixture) view(id string) sas.OrderView {
	f.t.Helper()
	v, err := f.mem.GetOrder(f.ctx, id)
	require.NoError(f.t, err)
	storetest.RequireLegalHistory(f.t, v)
	return v
}

func (f *fixture) requireNoOrder(id string) {
	f.t.Helper()
	_, err := f.mem.GetOrder(f.ctx, id)
	require.ErrorIs(f.t, err, sas.ErrNotFound)
}

func (f *fixture) states(id string) []sas.ProcessState {
	f.t.Helper()
	var out []sas.ProcessState
	for _, r := range f.view(id).Steps {
		out = append(out, r.ProcessState)
	}
	return out
}

// intake is an intake message; replyTo "" omits it.
func intake(id, workflow, replyTo string) string {
	m := map[string]any{"v": 1, "orderId": id, "workflow": workflow, "payload": map[string]any{"amount": 42, "currency": "EUR"}}
	if replyTo != "" {
		m["replyTo"] = replyTo
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// reply is the agent's answer to req, echoing the request's order fields
// and its trace as the agent does (the scheduler's read-free path).
func reply(req sas.AgentRequest, outcome sas.Outcome, reason string) string {
	return sas.Encode(signedReply(req, outcome, reason))
}

// untracedReply is reply from a signed agent built before traces: it echoes
// the signature but no trace.
func untracedReply(req sas.AgentRequest, outcome sas.Outcome, reason string) string {
	rep := signedReply(req, outcome, reason)
	rep.Trace = ""
	return sas.Encode(rep)
}

func signedReply(req sas.AgentRequest, outcome sas.Outcome, reason string) sas.AgentReply {
	return sas.AgentReply{
		V: sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: req.OrderID, Step: req.Step,
		Attempt: req.Attempt, LockedBy: req.LockedBy, Outcome: outcome, Reason: reason, Agent: req.Agent,
		Workflow: req.Workflow, ReplyTo: req.ReplyTo, Payload: req.Payload, Compensation: req.Compensation,
		StepName: req.StepName, Priority: req.Priority, Version: req.Version, Generation: req.Generation, Sig: req.Sig,
		Trace: sas.ChildTrace(req.Trace, fmt.Sprintf("%s %s %d", sas.KindAgentReply, req.IdempotencyKey, req.Attempt)),
	}
}

// legacyReply is reply from an agent that echoes only the fence (before the
// order fields were added): the scheduler reads the order.
func legacyReply(req sas.AgentRequest, outcome sas.Outcome, reason string) string {
	return sas.Encode(sas.AgentReply{
		V: sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: req.OrderID, Step: req.Step,
		Attempt: req.Attempt, LockedBy: req.LockedBy, Outcome: outcome, Reason: reason, Agent: req.Agent,
	})
}

func done(req sas.AgentRequest) string { return reply(req, sas.OutcomeDone, "") }

func retryMsg(id string, step, attempt int) string {
	return sas.Encode(sas.Retry{V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: id, Step: step, Attempt: attempt, Reason: "stuck"})
}

func compensateMsg(id string) string {
	return sas.Encode(sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: id, Reason: "gave up", Actor: "supervisor-1"})
}

// statusList renders statuses compactly for assertions: "status/step/seq".
func statusList(ss []sas.Status) []string {
	var out []string
	for _, s := range ss {
		e := s.Status
		if s.Step != "" {
			e += "/" + s.Step
		}
		out = append(out, fmt.Sprintf("%s#%d", e, s.Sequence))
	}
	return out
}

// rescue is the supervisor taking an expired step back (FindDue + Rescue).
func (f *fixture) rescue(id string, step int) sas.StepRecord {
	f.t.Helper()
	r := f.step(id, step)
	require.False(f.t, f.clock.Now().Before(r.DueAt), "rescue needs the step due")
	out, err := f.mem.Rescue(f.ctx, sas.RescueParams{
		Key: r.Key(), From: r.ProcessState, Attempt: r.Attempt, Now: f.clock.Now(),
		PickupBy: f.clock.Now().Add(time.Minute), Actor: "supervisor-1", Reason: "deadline passed",
	})
	require.NoError(f.t, err)
	return out
}

// started records the pick-up of the step's held attempt now, as the
// scheduler does on its agent's started report.
func (f *fixture) started(id string, step int) sas.StepRecord {
	f.t.Helper()
	r := f.step(id, step)
	out, err := f.mem.Start(f.ctx, sas.StartParams{Key: r.Key(), From: r.ProcessState, Owner: r.LockedBy, Attempt: r.Attempt,
		Now: f.clock.Now(), CompleteBy: f.clock.Now().Add(leaseTime)})
	require.NoError(f.t, err)
	return out
}

// giveUp is the supervisor giving up on an expired step.
func (f *fixture) giveUp(id string, step int) sas.StepRecord {
	f.t.Helper()
	r := f.step(id, step)
	out, err := f.mem.GiveUp(f.ctx, sas.GiveUpParams{
		Key: r.Key(), From: r.ProcessState, Attempt: r.Attempt, Now: f.clock.Now(), Actor: "supervisor-1", Reason: "too many failures",
	})
	require.NoError(f.t, err)
	return out
}

func (f *fixture) step(id string, i int) sas.StepRecord {
	f.t.Helper()
	v := f.view(id)
	require.Greater(f.t, len(v.Steps), i)
	return v.Steps[i]
}

// transitions counts the history entries of a step that moved it into state.
func transitions(r sas.StepRecord, to sas.ProcessState) int {
	n := 0
	for _, h := range r.History {
		if h.To == to {
			n++
		}
	}
	return n
}

// runForward submits an order and completes its first k steps.
func (f *fixture) runForward(id, workflow string, k int) sas.AgentRequest {
	f.t.Helper()
	f.deliver(intake(id, workflow, f.replyURL))
	req := f.request()
	for i := 0; i < k; i++ {
		f.deliver(done(req))
		if req.Step+1 < len(f.view(id).Steps) {
			req = f.request()
		}
	}
	return req
}
