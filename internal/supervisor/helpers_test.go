package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/memstore"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
	"github.com/sas-go/sas/internal/testkit/logtest"
	"github.com/sas-go/sas/internal/testkit/storetest"
)

// T0 is the tests' epoch; stepTimeout the lease a scheduler takes.
var T0 = storetest.T0

const stepTimeout = 30 * time.Second

// hookStore runs test code around the store's calls, to move the clock, race
// a completion against the supervisor, or count queries.
type hookStore struct {
	sas.StateStore
	sas.FanOutStore // the supervisor reads a fan-out's elements
	afterFindDue    func(sas.FindDueParams, sas.FindDueResult)
	afterRescue     func(sas.RescueParams)
	findDues        atomic.Int32
	getOrders       atomic.Int32
}

func (h *hookStore) GetOrder(ctx context.Context, id string) (sas.OrderView, error) {
	h.getOrders.Add(1)
	return h.StateStore.GetOrder(ctx, id)
}

func (h *hookStore) FindDue(ctx context.Context, p sas.FindDueParams) (sas.FindDueResult, error) {
	res, err := h.StateStore.FindDue(ctx, p)
	h.findDues.Add(1)
	if err == nil && h.afterFindDue != nil {
		h.afterFindDue(p, res)
	}
	return res, err
}

func (h *hookStore) Rescue(ctx context.Context, p sas.RescueParams) (sas.StepRecord, error) {
	r, err := h.StateStore.Rescue(ctx, p)
	if h.afterRescue != nil {
		h.afterRescue(p)
	}
	return r, err
}

// sentQueue records what reached the queue: every message that was sent,
// and the size of every Send call.
type sentQueue struct {
	sas.Queue
	mu    sync.Mutex
	sent  []sas.OutboundMessage
	calls []int

	depthReads int
	depthFault error
}

func (q *sentQueue) Send(ctx context.Context, p sas.SendParams) (sas.SendResult, error) {
	res, err := q.Queue.Send(ctx, p)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls = append(q.calls, len(p.Messages))
	if err != nil {
		return res, err
	}
	failed := map[string]bool{}
	for _, f := range res.Failed {
		failed[f.ID] = true
	}
	for _, m := range p.Messages {
		if !failed[m.ID] {
			q.sent = append(q.sent, m)
		}
	}
	return res, err
}

// sentMessage is a decoded message and its delay.
type sentMessage struct {
	Kind       sas.Kind
	Retry      sas.Retry
	Compensate sas.Compensate
	Delay      time.Duration
}

// take returns and forgets what was sent so far.
func (q *sentQueue) take(t *testing.T) []sentMessage {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []sentMessage
	for _, m := range q.sent {
		h, err := sas.DecodeHeader([]byte(m.Body))
		require.NoError(t, err)
		sm := sentMessage{Kind: h.Kind, Delay: m.Delay}
		switch h.Kind {
		case sas.KindRetry:
			require.NoError(t, json.Unmarshal([]byte(m.Body), &sm.Retry))
		case sas.KindCompensate:
			require.NoError(t, json.Unmarshal([]byte(m.Body), &sm.Compensate))
		default:
			t.Fatalf("unexpected message kind %q: %s", h.Kind, m.Body)
		}
		out = append(out, sm)
	}
	q.sent = nil
	return out
}

// Depth passes through to the memory queue, counting the reads; depthFault,
// when set, fails them.
func (q *sentQueue) Depth(ctx context.Context, url string) (sas.QueueDepth, error) {
	q.mu.Lock()
	q.depthReads++
	fault := q.depthFault
	q.mu.Unlock()
	if fault != nil {
		return sas.QueueDepth{}, fault
	}
	return q.Queue.(sas.DepthReader).Depth(ctx, url)
}

func (q *sentQueue) sendCalls() []int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]int(nil), q.calls...)
}

// env is a supervisor over the in-memory store and queue, a fake clock and a
// recording alerter.
type env struct {
	clock  *clocktest.Clock // moved by the test or a store hook
	mem    *memstore.Store
	store  *hookStore
	mq     *memqueue.Queue
	queue  *sentQueue
	url    string
	alerts *alerts.Recorder
	logs   *logtest.Buffer
	cfg    Config

	sendFault atomic.Pointer[error] // non-nil: every Send fails with it
}

func newEnv(t *testing.T, tweak ...func(*Config)) *env {
	t.Helper()
	e := &env{clock: clocktest.New(T0), mem: memstore.New(memstore.Config{}), alerts: alerts.NewRecorder(), logs: &logtest.Buffer{}}
	e.store = &hookStore{StateStore: e.mem, FanOutStore: e.mem}
	e.mq = memqueue.New(memqueue.Options{
		Clock: e.clock,
		Fault: func(op memqueue.Op, _ string) error {
			if p := e.sendFault.Load(); op == memqueue.OpSend && p != nil {
				return *p
			}
			return nil
		},
	})
	created, err := e.mq.CreateQueue(t.Context(), sas.CreateQueueParams{Name: "scheduler"})
	require.NoError(t, err)
	e.url = created.URL
	e.queue = &sentQueue{Queue: e.mq}
	e.cfg = Config{
		Store: e.store, Queue: e.queue, Clock: e.clock, Alerter: e.alerts,
		ControlQueueURL: e.url, Actor: "sup-test",
		Logger:  slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics: io.Discard,
	}
	for _, f := range tweak {
		f(&e.cfg)
	}
	return e
}

func (e *env) supervisor(t *testing.T, tweak ...func(*Config)) *Supervisor {
	t.Helper()
	cfg := e.cfg
	for _, f := range tweak {
		f(&cfg)
	}
	s, err := New(cfg)
	require.NoError(t, err)
	return s
}

func (e *env) failSends(err error) {
	if err == nil {
		e.sendFault.Store(nil)
		return
	}
	e.sendFault.Store(&err)
}

func testOrder(id string, steps int) sas.Order {
	o := sas.Order{OrderID: id, Workflow: "test"}
	for i := 0; i < steps; i++ {
		o.Steps = append(o.Steps, fmt.Sprintf("step%d", i))
	}
	return o
}

// submitClaimed submits an order whose first step a scheduler claimed now
// (attempt 1, CompleteBy now+stepTimeout), as the scheduler does on intake,
// and whose agent reported the pick-up at once (CompleteBy unchanged): a
// passed deadline is then a failure of the attempt.
func (e *env) submitClaimed(t *testing.T, id string, steps int) {
	t.Helper()
	e.submitQueued(t, id, steps)
	e.start(t, key(id, 0), sas.Processing, "sched-1", 1)
}

// submitQueued is submitClaimed without the pick-up: the first step's
// request is, for all the supervisor knows, still queued.
func (e *env) submitQueued(t *testing.T, id string, steps int) {
	t.Helper()
	now := e.clock.Now()
	res, err := e.mem.Submit(t.Context(), sas.SubmitParams{
		Order: testOrder(id, steps), Now: now, PickupBy: now.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "sched-1", CompleteBy: now.Add(stepTimeout)},
	})
	require.NoError(t, err)
	require.True(t, res.Created)
}

// start records the pick-up of the held attempt now, its deadline a step
// timeout from now (the agent's started report).
func (e *env) start(t *testing.T, k sas.StepKey, from sas.ProcessState, owner string, attempt int) sas.StepRecord {
	t.Helper()
	now := e.clock.Now()
	r, err := e.mem.Start(t.Context(), sas.StartParams{Key: k, From: from, Owner: owner, Attempt: attempt, Now: now, CompleteBy: now.Add(stepTimeout)})
	require.NoError(t, err)
	return r
}

// submitUnclaimed submits an order nobody claims: its first step is Pending,
// due for pick-up a minute from now.
func (e *env) submitUnclaimed(t *testing.T, id string, steps int) {
	t.Helper()
	now := e.clock.Now()
	_, err := e.mem.Submit(t.Context(), sas.SubmitParams{Order: testOrder(id, steps), Now: now, PickupBy: now.Add(time.Minute)})
	require.NoError(t, err)
}

func (e *env) step(t *testing.T, id string, step int) sas.StepRecord {
	t.Helper()
	v, err := e.mem.GetOrder(t.Context(), id)
	require.NoError(t, err)
	storetest.RequireLegalHistory(t, v)
	return v.Steps[step]
}

func (e *env) claim(t *testing.T, k sas.StepKey, from sas.ProcessState, attempt int) sas.StepRecord {
	t.Helper()
	now := e.clock.Now()
	r, err := e.mem.Claim(t.Context(), sas.ClaimParams{Key: k, From: from, Attempt: attempt, Owner: "sched-2", Now: now, CompleteBy: now.Add(stepTimeout)})
	require.NoError(t, err)
	return e.start(t, k, r.ProcessState, r.LockedBy, r.Attempt)
}

func key(id string, step int) sas.StepKey { return sas.StepKey{OrderID: id, Step: step} }

func runOnce(t *testing.T, s *Supervisor) Report {
	t.Helper()
	rep, err := s.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, rep.Errors)
	return rep
}
