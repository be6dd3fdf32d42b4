package agenthost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
	"github.com/sas-go/sas/internal/testkit/logtest"
)

// These tests drive the Service with runners written for them: the
// outcome rules and the batch handling, without HTTP.

type serviceRig struct {
	t        *testing.T
	clock    *clocktest.Clock
	queue    *memqueue.Queue
	replyURL string
	logs     *logtest.Buffer
}

func newServiceRig(t *testing.T, opts memqueue.Options) *serviceRig {
	t.Helper()
	r := &serviceRig{t: t, clock: clocktest.New(clocktest.T0), logs: &logtest.Buffer{}}
	opts.Clock = r.clock
	r.queue = memqueue.New(opts)
	q, err := r.queue.CreateQueue(t.Context(), sas.CreateQueueParams{Name: "scheduler"})
	require.NoError(t, err)
	r.replyURL = q.URL
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent logs:\n%s", r.logs.String())
		}
	})
	return r
}

func (r *serviceRig) service(cfg agenthost.Config) *agenthost.Service {
	r.t.Helper()
	if cfg.Queue == nil {
		cfg.Queue = r.queue
	}
	cfg.ReplyQueueURL, cfg.Clock = r.replyURL, r.clock
	cfg.Logger = slog.New(slog.NewJSONHandler(r.logs, nil))
	svc, err := agenthost.New(cfg)
	require.NoError(r.t, err)
	return svc
}

func (r *serviceRig) replies() []sas.AgentReply {
	return (&rig{t: r.t, queue: r.queue, replyURL: r.replyURL}).replies()
}

func payments(f agenthost.RunnerFunc) map[string]agenthost.Runner {
	return map[string]agenthost.Runner{"payments": f}
}

func TestOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		run         func(c *clocktest.Clock) (json.RawMessage, error)
		wantOutcome sas.Outcome // "" for no reply, and the message left for redelivery
		wantResult  string
		wantReason  string
	}{
		{
			name:        "done",
			run:         func(*clocktest.Clock) (json.RawMessage, error) { return json.RawMessage(`{"id":"x"}`), nil },
			wantOutcome: sas.OutcomeDone, wantResult: `{"id":"x"}`,
		},
		{
			name:        "done without a result",
			run:         func(*clocktest.Clock) (json.RawMessage, error) { return nil, nil },
			wantOutcome: sas.OutcomeDone,
		},
		{
			name:        "a result that is not JSON is carried as a string",
			run:         func(*clocktest.Clock) (json.RawMessage, error) { return json.RawMessage(`OK fine`), nil },
			wantOutcome: sas.OutcomeDone, wantResult: `"OK fine"`,
		},
		{
			name: "permanent",
			run: func(*clocktest.Clock) (json.RawMessage, error) {
				return nil, &agenthost.PermanentError{Reason: "card declined", Err: errors.New("HTTP 402")}
			},
			wantOutcome: sas.OutcomeFailed, wantReason: "card declined",
		},
		{
			name: "permanent without a PermanentError",
			run: func(*clocktest.Clock) (json.RawMessage, error) {
				return nil, fmt.Errorf("%w: no such account", agenthost.ErrPermanent)
			},
			wantOutcome: sas.OutcomeFailed, wantReason: "permanent failure: no such account",
		},
		{
			name: "any other error sends nothing and leaves the message",
			run:  func(*clocktest.Clock) (json.RawMessage, error) { return nil, errors.New("connection refused") },
		},
		{
			name: "a success after the deadline sends nothing and leaves the message",
			run: func(c *clocktest.Clock) (json.RawMessage, error) {
				c.Advance(31 * time.Second)
				return json.RawMessage(`{}`), nil
			},
		},
		{
			name: "a permanent failure after the deadline sends nothing and leaves the message",
			run: func(c *clocktest.Clock) (json.RawMessage, error) {
				c.Advance(30 * time.Second)
				return nil, &agenthost.PermanentError{Reason: "late"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newServiceRig(t, memqueue.Options{})
			svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
				return tt.run(r.clock)
			})})
			req := request("o-1")
			resp := handleWith(t, svc, event(req))

			reps := r.replies()
			if tt.wantOutcome == "" {
				require.Empty(t, reps)
				require.Equal(t, []string{"m1"}, failedIDs(resp), "no outcome: left for redelivery, never acknowledged")
				return
			}
			require.Empty(t, resp.BatchItemFailures)
			require.Len(t, reps, 1)
			requireEcho(t, req, reps[0])
			require.Equal(t, tt.wantOutcome, reps[0].Outcome)
			require.Equal(t, tt.wantReason, reps[0].Reason)
			if tt.wantResult == "" {
				require.Empty(t, reps[0].Result)
			} else {
				require.JSONEq(t, tt.wantResult, string(reps[0].Result))
			}
		})
	}
}

func TestLongReasonIsCut(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		return nil, &agenthost.PermanentError{Reason: "déclinée " + strings.Repeat("é", 3000)}
	})})
	handleWith(t, svc, event(request("o-1")))
	reps := r.replies()
	require.Len(t, reps, 1)
	require.LessOrEqual(t, len(reps[0].Reason), 1000)
	require.True(t, utf8.ValidString(reps[0].Reason), "cut on a rune boundary")
	require.True(t, strings.HasPrefix(reps[0].Reason, "déclinée éé"))
	require.True(t, strings.HasSuffix(reps[0].Reason, "…"))
}

func TestPanicFailsOnlyItsMessage(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	svc := r.service(agenthost.Config{Agents: payments(func(_ context.Context, req sas.AgentRequest) (json.RawMessage, error) {
		if req.OrderID == "o-2" {
			panic("a bug")
		}
		return json.RawMessage(`{}`), nil
	})})
	resp := handleWith(t, svc, event(request("o-1"), request("o-2"), request("o-3")))
	require.Equal(t, []string{"m2"}, failedIDs(resp))
	require.Len(t, r.replies(), 2)
	require.Contains(t, r.logs.String(), "panic")
}

func TestQueueOutageFailsEveryRepliedMessage(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{Fault: func(op memqueue.Op, _ string) error {
		if op == memqueue.OpSend {
			return errors.New("simulated outage")
		}
		return nil
	}})
	svc := r.service(agenthost.Config{Agents: payments(func(_ context.Context, req sas.AgentRequest) (json.RawMessage, error) {
		return json.RawMessage(`{}`), nil
	})})
	// o-2 is an older scheduler's request that expired on arrival: nothing
	// to send, acknowledged anyway.
	expired := request("o-2", legacy, completeBy(clocktest.T0))
	resp := handleWith(t, svc, event(request("o-1"), expired, request("o-3")))
	require.Equal(t, []string{"m1", "m3"}, failedIDs(resp))
}

func TestEmptyEventAnswersAnEmptyList(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		return nil, nil
	})})
	resp := handleWith(t, svc, events.SQSEvent{})
	require.Empty(t, resp.BatchItemFailures)
	b, err := json.Marshal(resp)
	require.NoError(t, err)
	require.JSONEq(t, `{"batchItemFailures":[]}`, string(b))
}

func TestBatchRunsConcurrentlyWithinTheBound(t *testing.T) {
	t.Parallel()
	const bound = 3
	r := newServiceRig(t, memqueue.Options{})
	var inFlight, peak atomic.Int32
	full := make(chan struct{})
	var once sync.Once
	svc := r.service(agenthost.Config{Concurrency: bound, Agents: payments(func(ctx context.Context, _ sas.AgentRequest) (json.RawMessage, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		if n == bound {
			once.Do(func() { close(full) })
		}
		// The first ones wait until the bound is reached, which proves
		// they run at once; a serial handler would time out here.
		select {
		case <-full:
		case <-time.After(5 * time.Second):
			return nil, errors.New("never reached the concurrency bound")
		}
		return json.RawMessage(`{}`), nil
	})})
	var msgs []any
	for _, id := range []string{"o-1", "o-2", "o-3", "o-4", "o-5", "o-6", "o-7", "o-8", "o-9"} {
		msgs = append(msgs, request(id))
	}
	resp := handleWith(t, svc, event(msgs...))
	require.Empty(t, resp.BatchItemFailures)
	require.Len(t, r.replies(), 9)
	require.EqualValues(t, bound, peak.Load())
}

// Requests with one key run in batch order, one after the other; distinct
// keys run at once. In a synctest bubble every run holds until all the
// handler's goroutines are blocked: what is running then is what the
// handler lets run together.
func TestSameKeyRunsInOrderNotAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newServiceRig(t, memqueue.Options{})
		release := make(chan struct{})
		var mu sync.Mutex
		var running []string // "order/attempt" of the runs under way
		var order []int
		svc := r.service(agenthost.Config{Agents: payments(func(_ context.Context, req sas.AgentRequest) (json.RawMessage, error) {
			run := fmt.Sprintf("%s/%d", req.OrderID, req.Attempt)
			mu.Lock()
			running = append(running, run)
			if req.OrderID == "o-1" {
				order = append(order, req.Attempt)
			}
			mu.Unlock()
			<-release
			mu.Lock()
			running = slices.DeleteFunc(running, func(r string) bool { return r == run })
			mu.Unlock()
			return json.RawMessage(`{}`), nil
		})})
		a1 := request("o-1")
		a2 := request("o-1", func(q *sas.AgentRequest) { q.Attempt = 2 })
		a3 := request("o-1", func(q *sas.AgentRequest) { q.Attempt = 3 })
		done := make(chan error, 1)
		var resp events.SQSEventResponse
		go func() {
			var err error
			resp, err = svc.Handle(t.Context(), event(a1, request("o-2"), a2, a3))
			done <- err
		}()
		synctest.Wait()
		mu.Lock()
		require.ElementsMatch(t, []string{"o-1/1", "o-2/1"}, running, "the first of each key, together")
		mu.Unlock()
		close(release)
		require.NoError(t, <-done)
		require.Empty(t, resp.BatchItemFailures)
		require.Len(t, r.replies(), 4)
		require.Equal(t, []int{1, 2, 3}, order, "batch order within a key")
	})
}

func TestCallStopsBeforeTheInvocationEnds(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	var callDeadline time.Time
	svc := r.service(agenthost.Config{ReplyReserve: 3 * time.Second, Agents: payments(func(ctx context.Context, _ sas.AgentRequest) (json.RawMessage, error) {
		callDeadline, _ = ctx.Deadline()
		return json.RawMessage(`{}`), nil
	})})
	invocationEnds := time.Now().Add(10 * time.Second)
	ctx, cancel := context.WithDeadline(t.Context(), invocationEnds)
	defer cancel()
	resp, err := svc.Handle(ctx, event(request("o-1")))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Equal(t, invocationEnds.Add(-3*time.Second), callDeadline)
	require.Len(t, r.replies(), 1)
}

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	q := memqueue.New(memqueue.Options{})
	run := agenthost.RunnerFunc(func(context.Context, sas.AgentRequest) (json.RawMessage, error) { return nil, nil })
	for name, cfg := range map[string]agenthost.Config{
		"no queue":       {ReplyQueueURL: "u", Agents: map[string]agenthost.Runner{"a": run}},
		"no reply queue": {Queue: q, Agents: map[string]agenthost.Runner{"a": run}},
		"no agents":      {Queue: q, ReplyQueueURL: "u"},
		"nil runner":     {Queue: q, ReplyQueueURL: "u", Agents: map[string]agenthost.Runner{"a": nil}},
		"negative bound": {Queue: q, ReplyQueueURL: "u", Agents: map[string]agenthost.Runner{"a": run}, Concurrency: -1},
	} {
		_, err := agenthost.New(cfg)
		require.ErrorIs(t, err, sas.ErrInvalid, name)
	}
}

func TestDecodeRequest(t *testing.T) {
	t.Parallel()
	good := request("o-1")
	valid := sas.Encode(good)
	require.NotEmpty(t, valid)

	got, err := agenthost.DecodeRequest([]byte(valid))
	require.NoError(t, err)
	require.Equal(t, good.OrderID, got.OrderID)
	require.True(t, good.CompleteBy.Equal(got.CompleteBy))
	require.Equal(t, int64(30_000), got.TimeoutMs)

	// An older scheduler's request has no limit of its own.
	got, err = agenthost.DecodeRequest([]byte(with(good, legacy)))
	require.NoError(t, err)
	require.Zero(t, got.TimeoutMs)

	// A request without a key gets the scheduler's.
	noKey := request("o-1", compensation)
	noKey.IdempotencyKey = ""
	got, err = agenthost.DecodeRequest([]byte(sas.Encode(noKey)))
	require.NoError(t, err)
	require.Equal(t, "o-1:0:undo", got.IdempotencyKey)

	// Fields a newer scheduler might add are tolerated.
	_, err = agenthost.DecodeRequest([]byte(`{"v":1,"kind":"agent.request","orderId":"o","step":0,"stepName":"charge","agent":"payments","attempt":1,"lockedBy":"s","completeBy":"2030-01-02T03:04:35Z","priority":3}`))
	require.NoError(t, err)

	bad := map[string]struct {
		body  string
		field string
	}{
		"empty":         {``, ""},
		"not JSON":      {`{`, ""},
		"array":         {`[1]`, ""},
		"wrong type":    {`{"step":"one"}`, ""},
		"bad time":      {`{"completeBy":"soon"}`, ""},
		"version 2":     {with(good, func(q *sas.AgentRequest) { q.V = 2 }), "v"},
		"other kind":    {with(good, func(q *sas.AgentRequest) { q.Kind = sas.KindRetry }), "kind"},
		"bad order id":  {with(good, func(q *sas.AgentRequest) { q.OrderID = "a b" }), "orderId"},
		"negative step": {with(good, func(q *sas.AgentRequest) { q.Step = -1 }), "step"},
		"no step name":  {with(good, func(q *sas.AgentRequest) { q.StepName = "" }), "stepName"},
		"no agent":      {with(good, func(q *sas.AgentRequest) { q.Agent = "" }), "agent"},
		"attempt 0":     {with(good, func(q *sas.AgentRequest) { q.Attempt = 0 }), "attempt"},
		"no owner":      {with(good, func(q *sas.AgentRequest) { q.LockedBy = "" }), "lockedBy"},
		"no deadline":   {with(good, func(q *sas.AgentRequest) { q.CompleteBy = time.Time{} }), "completeBy"},
		"neg. timeout":  {with(good, func(q *sas.AgentRequest) { q.TimeoutMs = -1 }), "timeoutMs"},
		"huge timeout":  {with(good, func(q *sas.AgentRequest) { q.TimeoutMs = 1 << 62 }), "timeoutMs"},
		"key w/ space":  {with(good, func(q *sas.AgentRequest) { q.IdempotencyKey = "a b" }), "idempotencyKey"},
	}
	for name, tt := range bad {
		_, err := agenthost.DecodeRequest([]byte(tt.body))
		require.ErrorIs(t, err, sas.ErrInvalid, name)
		var ve *sas.ValidationError
		require.ErrorAs(t, err, &ve, name)
		require.Equal(t, tt.field, ve.Field, name)
		require.NotEmpty(t, ve.Reason, name)
	}
}

func with(req sas.AgentRequest, f func(*sas.AgentRequest)) string {
	f(&req)
	return sas.Encode(req)
}

// Every reply echoes the request's order fields verbatim, done or failed,
// forward or undo, so the scheduler advances the order without reading it;
// a request from an older scheduler, without them, gets a reply without them.
func TestReplyEchoesTheOrder(t *testing.T) {
	t.Parallel()
	legacy := func(q *sas.AgentRequest) { q.Workflow, q.ReplyTo, q.TimeoutMs = "", "", 0 }
	odd := func(q *sas.AgentRequest) {
		// Key order is the scheduler's, not sorted: echoed, not re-read.
		q.Payload = json.RawMessage(`{"z": 1,  "a":[ 2 ]}`)
		q.Step, q.StepName, q.Workflow = 2, "ship", "order"
	}
	tests := []struct {
		name    string
		req     sas.AgentRequest
		outcome sas.Outcome
	}{
		{"done", request("o-1"), sas.OutcomeDone},
		{"failed", request("o-2"), sas.OutcomeFailed},
		{"undo done", request("o-3", compensation), sas.OutcomeDone},
		{"undo failed", request("o-4", compensation), sas.OutcomeFailed},
		{"another step", request("o-5", odd), sas.OutcomeDone},
		{"older scheduler", request("o-6", legacy), sas.OutcomeDone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newServiceRig(t, memqueue.Options{})
			svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
				if tt.outcome == sas.OutcomeFailed {
					return nil, &agenthost.PermanentError{Reason: "no"}
				}
				return json.RawMessage(`{"ok":true}`), nil
			})})
			require.Empty(t, handleWith(t, svc, event(tt.req)).BatchItemFailures)
			reps := r.replies()
			require.Len(t, reps, 1)
			requireEcho(t, tt.req, reps[0])
			require.Equal(t, tt.outcome, reps[0].Outcome)
		})
	}

	// The older scheduler's reply has no keys it did not send.
	r := newServiceRig(t, memqueue.Options{})
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		return nil, nil
	})})
	handleWith(t, svc, event(request("o-7", legacy)))
	msgs, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: r.replyURL, Max: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(msgs[0].Body), &keys))
	require.NotContains(t, keys, "workflow")
	require.NotContains(t, keys, "replyTo")
	require.NotContains(t, keys, "compensation")
}
