package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agentqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// These tests drive the SDK's handler on the in-memory queue and a fake
// clock: the step functions are the tests' own.

type seat struct {
	Flight string `json:"flight"`
	Seats  int    `json:"seats"`
}

// A step's result is encoded and echoed in a done reply, with the fence
// and the order fields of the request; the Func sees the request as the
// scheduler sent it, and a deadline counted from when the agent started it.
func TestSuccessRepliesDoneWithTheResult(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var got agent.Request
	var ctxDeadline time.Time
	a := agent.New("flights").Step("reserve-flight", func(ctx context.Context, req agent.Request) (any, error) {
		got = req
		ctxDeadline, _ = ctx.Deadline()
		var s seat
		if err := req.DecodePayload(&s); err != nil {
			return nil, err
		}
		return map[string]any{"reservation": "R-" + s.Flight, "seats": s.Seats}, nil
	}, nil)
	f.clock.Advance(time.Minute) // it waited in the queue: its limit counts from now
	req := request("o-1")
	resp := f.handle(f.handler(a), event(req))
	require.Empty(t, resp.BatchItemFailures)

	reps := f.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	require.JSONEq(t, `{"reservation":"R-FL123","seats":2}`, string(reps[0].Result))
	requireEcho(t, req, reps[0])

	require.Equal(t, clocktest.T0.Add(time.Minute), got.Now(), "the agent's clock")
	require.Equal(t, agent.Request{
		OrderID: "o-1", Workflow: "trip", Version: "v3", Step: "reserve-flight", StepIndex: 1, Attempt: 2,
		IdempotencyKey: "o-1:1", Payload: json.RawMessage(`{"flight":"FL123","seats":2}`), Undo: false,
		Action: "POST /reservations", Priority: 7, Deadline: clocktest.T0.Add(time.Minute + 30*time.Second),
	}, agent.WithoutClock(got))
	require.Equal(t, got.Deadline, ctxDeadline, "the context ends at the request's deadline")
}

// Results: nil is none; a json.RawMessage goes as it is; a value that
// cannot be encoded is left out, and the step still counts as done.
func TestResults(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	results := map[string]any{"o-nil": nil, "o-raw": json.RawMessage(`{"a":[1, 2]}`), "o-chan": make(chan int)}
	a := agent.New("flights").Step("reserve-flight", func(_ context.Context, req agent.Request) (any, error) {
		return results[req.OrderID], nil
	}, nil)
	resp := f.handle(f.handler(a), event(request("o-nil"), request("o-raw"), request("o-chan")))
	require.Empty(t, resp.BatchItemFailures)
	got := map[string]string{}
	for _, rep := range f.replies() {
		require.Equal(t, sas.OutcomeDone, rep.Outcome, rep.OrderID)
		got[rep.OrderID] = string(rep.Result)
	}
	require.Equal(t, map[string]string{"o-nil": "", "o-raw": `{"a":[1,2]}`, "o-chan": ""}, got)
	require.Contains(t, f.logs.String(), "cannot be encoded as JSON")
}

// Permanent, however wrapped, is a failed reply whose reason is the
// error's text; the step runs once. A payload that does not decode is
// permanent too.
func TestPermanentRepliesFailedWithTheReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var runs atomic.Int32
	a := agent.New("flights").Step("reserve-flight", func(_ context.Context, req agent.Request) (any, error) {
		runs.Add(1)
		if req.OrderID == "o-bad-payload" {
			var s seat
			return nil, req.DecodePayload(&s)
		}
		return nil, fmt.Errorf("reserving %s: %w", req.OrderID, agent.Permanent(errors.New("flight FL123 is full")))
	}, nil)
	bad := request("o-bad-payload", func(r *sas.AgentRequest) { r.Payload = json.RawMessage(`{"seats":"two"}`) })
	req := request("o-full")
	resp := f.handle(f.handler(a), event(req, bad))
	require.Empty(t, resp.BatchItemFailures)

	reasons := map[string]string{}
	for _, rep := range f.replies() {
		require.Equal(t, sas.OutcomeFailed, rep.Outcome)
		reasons[rep.OrderID] = rep.Reason
		if rep.OrderID == req.OrderID {
			requireEcho(t, req, rep)
		}
	}
	require.Equal(t, "reserving o-full: flight FL123 is full", reasons["o-full"])
	require.Contains(t, reasons["o-bad-payload"], "reading the payload")
	require.EqualValues(t, 2, runs.Load(), "no retries of a permanent failure")
}

// A transient error is tried again in-process, after a jittered wait (on
// the fake clock), and the success is reported.
func TestTransientIsRetriedInProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var runs atomic.Int32
	a := agent.New("flights").Step("reserve-flight", func(context.Context, agent.Request) (any, error) {
		if runs.Add(1) < 3 {
			return nil, errors.New("connection reset by peer")
		}
		return "R-1", nil
	}, nil)
	resp := f.handle(f.handler(a), event(request("o-1")))
	require.Empty(t, resp.BatchItemFailures)
	reps := f.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	require.JSONEq(t, `"R-1"`, string(reps[0].Result))
	require.EqualValues(t, 3, runs.Load())
	require.True(t, f.clock.Now().After(clocktest.T0), "it waited between the tries")
}

// The handler's Middleware sees every run of a step, in-process retries
// included, and what it returns is the step's outcome, classified as usual:
// here it fails the first run transiently instead of running the step.
func TestMiddlewareWrapsEveryRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var steps atomic.Int32
	a := agent.New("flights").Step("reserve-flight", func(context.Context, agent.Request) (any, error) {
		steps.Add(1)
		return "R-1", nil
	}, nil)
	var seen []string
	cfg := f.config(a)
	cfg.Middleware = func(next agent.Func) agent.Func {
		return func(ctx context.Context, req agent.Request) (any, error) {
			seen = append(seen, fmt.Sprintf("%s#%d undo=%t", req.Step, req.Attempt, req.Undo))
			if len(seen) == 1 {
				return nil, errors.New("injected: connection reset")
			}
			return next(ctx, req)
		}
	}
	h, err := agent.NewHandler(cfg)
	require.NoError(t, err)
	resp := f.handle(h, event(request("o-1")))
	require.Empty(t, resp.BatchItemFailures)
	reps := f.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	require.Equal(t, []string{"reserve-flight#2 undo=false", "reserve-flight#2 undo=false"}, seen)
	require.EqualValues(t, 1, steps.Load(), "the injected failure ran instead of the step")
}

// Out of tries: no reply, the request is left for redelivery (the
// Service's path: a short visibility backoff, then the supervisor). Tries
// bounds the runs per delivery.
func TestTransientOutOfTriesLeavesForRedelivery(t *testing.T) {
	t.Parallel()
	for tries, want := range map[int]int32{0: agent.DefaultTries, 1: 1, 5: 5} {
		f := newFixture(t)
		var runs atomic.Int32
		var opts []agent.Option
		if tries > 0 {
			opts = append(opts, agent.Tries(tries))
		}
		a := agent.New("flights", opts...).Step("reserve-flight", func(context.Context, agent.Request) (any, error) {
			runs.Add(1)
			return nil, errors.New("HTTP 503")
		}, nil)
		url, recs := f.received("flights", request("o-1"))
		cfg := f.config(a)
		cfg.QueueURL = url
		h, err := agent.NewHandler(cfg)
		require.NoError(t, err)
		resp := f.handle(h, events.SQSEvent{Records: recs})
		require.Equal(t, []string{recs[0].MessageId}, failedIDs(resp), "tries %d", tries)
		require.Empty(t, f.replies())
		require.Equal(t, want, runs.Load(), "tries %d", tries)
		require.Contains(t, f.logs.String(), "no outcome after")
		f.clock.Advance(time.Second)
		require.Equal(t, []string{"o-1"}, f.visible(url), "back after the short backoff")
	}
}

// A step's own retry.attempts (the request's tries) overrides the agent's
// Tries: more runs for a step that asks for them, fewer for one that asks
// for fewer.
func TestTheStepsTriesOverrideTheAgents(t *testing.T) {
	t.Parallel()
	for stepTries, want := range map[int]int32{5: 5, 1: 1} {
		f := newFixture(t)
		var runs atomic.Int32
		a := agent.New("flights").Step("reserve-flight", func(context.Context, agent.Request) (any, error) {
			runs.Add(1)
			return nil, errors.New("HTTP 503")
		}, nil)
		resp := f.handle(f.handler(a), event(request("o-1", func(r *sas.AgentRequest) { r.Tries = stepTries })))
		require.Len(t, resp.BatchItemFailures, 1, "no outcome: left for redelivery")
		require.Equal(t, want, runs.Load(), "the step asks for %d tries", stepTries)
	}
	// And a Run with Tries set honours it the same way.
	var runs atomic.Int32
	a := agent.New("flights", agent.Backoff(time.Millisecond, time.Millisecond)).Step("reserve-flight", func(context.Context, agent.Request) (any, error) {
		if runs.Add(1) < 5 {
			return nil, errors.New("HTTP 503")
		}
		return "ok", nil
	}, nil)
	out := a.Run(context.Background(), agent.Request{OrderID: "o-2", Step: "reserve-flight", Tries: 5})
	require.Equal(t, agent.StatusDone, out.Status, "%v", out.Err)
}

// A RetryAfter that fits before the deadline is waited out in-process.
func TestRetryAfterWithinTheDeadlineWaits(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var runs atomic.Int32
	a := agent.New("flights").Step("reserve-flight", func(context.Context, agent.Request) (any, error) {
		if runs.Add(1) == 1 {
			return nil, agent.RetryAfter(5*time.Second, errors.New("HTTP 429"))
		}
		return nil, nil
	}, nil)
	f.handle(f.handler(a), event(request("o-1")))
	reps := f.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	require.Equal(t, clocktest.T0.Add(5*time.Second), f.clock.Now(), "the wait the service asked for")
}

// A RetryAfter beyond the deadline: no reply, and the request stays
// invisible in its queue for the time asked (not the short backoff), then
// comes back. The Func runs once.
func TestRetryAfterBeyondTheDeadlineSetsTheVisibility(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var runs atomic.Int32
	a := agent.New("flights").Step("reserve-flight", func(context.Context, agent.Request) (any, error) {
		runs.Add(1)
		return nil, fmt.Errorf("quota: %w", agent.RetryAfter(10*time.Minute, errors.New("HTTP 429: daily quota reached")))
	}, nil)
	url, recs := f.received("flights", request("o-1", timeout(30*time.Second)))
	cfg := f.config(a)
	cfg.QueueURL = url
	h, err := agent.NewHandler(cfg)
	require.NoError(t, err)
	resp := f.handle(h, events.SQSEvent{Records: recs})
	require.Equal(t, []string{recs[0].MessageId}, failedIDs(resp))
	require.Empty(t, f.replies())
	require.EqualValues(t, 1, runs.Load())

	f.clock.Advance(10*time.Minute - time.Second)
	require.Empty(t, f.visible(url), "still waiting as asked")
	f.clock.Advance(time.Second)
	require.Equal(t, []string{"o-1"}, f.visible(url))
}

// The Func's context ends at the request's deadline (here on the wall
// clock: a context's timer is a real one); what it returns then is no
// outcome.
func TestTheContextEndsAtTheDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var ctxErr error
	var deadlineSeen bool
	a := agent.New("flights").Step("reserve-flight", func(ctx context.Context, req agent.Request) (any, error) {
		dl, ok := ctx.Deadline()
		deadlineSeen = ok && dl.Equal(req.Deadline)
		<-ctx.Done()
		ctxErr = ctx.Err()
		return nil, ctx.Err()
	}, nil)
	cfg := f.config(a)
	cfg.Clock = nil // the wall clock
	h, err := agent.NewHandler(cfg)
	require.NoError(t, err)
	req := request("o-1", timeout(100*time.Millisecond), func(r *sas.AgentRequest) { r.CompleteBy = time.Now().Add(time.Hour) })
	resp := f.handle(h, event(req))
	require.Equal(t, []string{"m1"}, failedIDs(resp), "no outcome: left for redelivery")
	require.Empty(t, f.replies())
	require.ErrorIs(t, ctxErr, context.DeadlineExceeded)
	require.True(t, deadlineSeen, "the context's deadline is req.Deadline")
}

// An unknown step, and the undo of a step registered without one, are
// permanent failures naming the step and the agent; a registered undo runs
// for a compensation.
func TestStepLookup(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var undone agent.Request
	a := agent.New("flights").
		Step("reserve-flight", func(context.Context, agent.Request) (any, error) { return nil, nil },
			func(_ context.Context, req agent.Request) (any, error) { undone = req; return "cancelled", nil }).
		Step("notify", func(context.Context, agent.Request) (any, error) { return nil, nil }, nil)
	resp := f.handle(f.handler(a), event(
		request("o-unknown", step("gift-wrap")),
		request("o-no-undo", step("notify"), undo),
		request("o-undo", undo),
	))
	require.Empty(t, resp.BatchItemFailures)
	byOrder := map[string]sas.AgentReply{}
	for _, rep := range f.replies() {
		byOrder[rep.OrderID] = rep
	}
	require.Equal(t, sas.OutcomeFailed, byOrder["o-unknown"].Outcome)
	require.Equal(t, `agent "flights" has no step "gift-wrap" (it serves: notify, reserve-flight)`, byOrder["o-unknown"].Reason)
	require.Equal(t, sas.OutcomeFailed, byOrder["o-no-undo"].Outcome)
	require.Equal(t, `agent "flights": step "notify" has no undo, so its compensation cannot be served`, byOrder["o-no-undo"].Reason)
	require.Equal(t, sas.OutcomeDone, byOrder["o-undo"].Outcome)
	require.True(t, byOrder["o-undo"].Compensation)
	require.True(t, undone.Undo)
	require.Equal(t, "o-undo:1:undo", undone.IdempotencyKey)
	require.Equal(t, "POST /reservations/cancel", undone.Action)
}

// Default serves the steps not registered by name.
func TestDefaultServesTheOtherSteps(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := agent.New("flights").
		Step("reserve-flight", func(context.Context, agent.Request) (any, error) { return "named", nil }, nil).
		Default(func(_ context.Context, req agent.Request) (any, error) { return "default " + req.Step, nil }, nil)
	f.handle(f.handler(a), event(request("o-1"), request("o-2", step("anything"))))
	results := map[string]string{}
	for _, rep := range f.replies() {
		results[rep.OrderID] = string(rep.Result)
	}
	require.Equal(t, map[string]string{"o-1": `"named"`, "o-2": `"default anything"`}, results)
}

// A malformed message is acknowledged alone, without a reply; the good
// requests of its batch are served, each by its own agent.
func TestMalformedMessageIsRejectedAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ok := func(context.Context, agent.Request) (any, error) { return "ok", nil }
	flights := agent.New("flights").Step("reserve-flight", ok, nil)
	hotels := agent.New("hotels").Step("book-room", ok, nil)
	missingLock := request("o-3", func(r *sas.AgentRequest) { r.LockedBy = "" })
	room := request("o-4", func(r *sas.AgentRequest) { r.Agent, r.StepName = "hotels", "book-room" })
	resp := f.handle(f.handler(flights, hotels), event(request("o-1"), `{"v":1,"kind":"agent.requ`, missingLock, room))
	require.Empty(t, resp.BatchItemFailures, "malformed messages are acknowledged, never retried")
	var done []string
	for _, rep := range f.replies() {
		require.Equal(t, sas.OutcomeDone, rep.Outcome)
		done = append(done, rep.OrderID)
	}
	require.ElementsMatch(t, []string{"o-1", "o-4"}, done)
	require.Contains(t, f.logs.String(), "malformed request acknowledged without a reply")
}

// An agent function polls its queue and its priority lane: a request left
// for redelivery has its visibility changed on the queue it came from, and
// comes back there.
func TestTwoQueuesEachGetsItsOwnBackoff(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := agent.New("flights").Step("reserve-flight", func(_ context.Context, req agent.Request) (any, error) {
		if req.Priority >= sas.HighPriority {
			return nil, agent.RetryAfter(time.Hour, errors.New("HTTP 429"))
		}
		return nil, errors.New("HTTP 503")
	}, nil)
	lane, fromLane := f.received("flights-priority", request("o-hi", func(r *sas.AgentRequest) { r.Priority = 9 }))
	main, fromMain := f.received("flights", request("o-lo", func(r *sas.AgentRequest) { r.Priority = 0 }))
	cfg := f.config(a)
	cfg.QueueURL, cfg.PriorityQueueURL = main, lane
	h, err := agent.NewHandler(cfg)
	require.NoError(t, err)
	for _, recs := range [][]events.SQSMessage{fromLane, fromMain} {
		resp := f.handle(h, events.SQSEvent{Records: recs})
		require.Len(t, resp.BatchItemFailures, 1)
	}
	require.NotContains(t, f.logs.String(), "could not shorten the visibility")

	f.clock.Advance(time.Second)
	require.Equal(t, []string{"o-lo"}, f.visible(main), "the short backoff, on its queue")
	require.Empty(t, f.visible(lane))
	f.clock.Advance(time.Hour)
	require.Equal(t, []string{"o-hi"}, f.visible(lane), "the wait asked, on the lane")
}

// Requests with the same key in one batch run one after the other, never
// at once (a duplicate delivery), whatever their agents' step functions do.
// In a synctest bubble the first run holds until every other goroutine of
// the handler is blocked: had the handler started a duplicate beside it,
// that one would have entered its step by then.
func TestDuplicatesRunOneAfterTheOther(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		release := make(chan struct{})
		var mu sync.Mutex
		running, most, runs := 0, 0, 0
		a := agent.New("flights").Step("reserve-flight", func(context.Context, agent.Request) (any, error) {
			mu.Lock()
			running++
			runs++
			most = max(most, running)
			mu.Unlock()
			<-release
			mu.Lock()
			running--
			mu.Unlock()
			return nil, nil
		}, nil)
		h := f.handler(a)
		done := make(chan error, 1)
		go func() {
			_, err := h.Handle(t.Context(), event(request("o-1"), request("o-1"), request("o-1")))
			done <- err
		}()
		synctest.Wait()
		mu.Lock()
		require.Equal(t, 1, runs, "one run of the key at a time: the others wait for it")
		mu.Unlock()
		close(release)
		require.NoError(t, <-done)
		require.Len(t, f.replies(), 3)
		require.Equal(t, 3, runs)
		require.Equal(t, 1, most)
	})
}

// Mistakes in an agent's definition or the handler's configuration are
// refused when the handler is built, all at once, never at run time.
func TestNewHandlerRefusesMistakes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	do := func(context.Context, agent.Request) (any, error) { return nil, nil }
	for name, tc := range map[string]struct {
		cfg  func(*agent.HandlerConfig)
		want string
	}{
		"no agents":    {func(c *agent.HandlerConfig) { c.Agents = nil }, "at least one agent"},
		"nil agent":    {func(c *agent.HandlerConfig) { c.Agents = []*agent.Agent{nil} }, "agent 0 is nil"},
		"agent twice":  {func(c *agent.HandlerConfig) { c.Agents = append(c.Agents, agent.New("flights").Step("x", do, nil)) }, `agent "flights" given twice`},
		"no name":      {func(c *agent.HandlerConfig) { c.Agents = []*agent.Agent{agent.New("").Step("x", do, nil)} }, "name"},
		"step twice":   {func(c *agent.HandlerConfig) { c.Agents[0].Step("reserve-flight", do, nil) }, `step "reserve-flight" registered twice`},
		"nil do":       {func(c *agent.HandlerConfig) { c.Agents[0].Step("cancel", nil, nil) }, `step "cancel": do is nil`},
		"unnamed step": {func(c *agent.HandlerConfig) { c.Agents[0].Step("", do, nil) }, "a step needs a name"},
		"tries 0":      {func(c *agent.HandlerConfig) { c.Agents = []*agent.Agent{agent.New("f", agent.Tries(0))} }, "Tries"},
		"backoff": {func(c *agent.HandlerConfig) {
			c.Agents = []*agent.Agent{agent.New("f", agent.Backoff(time.Second, time.Millisecond))}
		}, "Backoff"},
		"default twice":    {func(c *agent.HandlerConfig) { c.Agents[0].Default(do, nil).Default(do, nil) }, "Default"},
		"no queue":         {func(c *agent.HandlerConfig) { agentqueue.Use(c, nil) }, "SQS"},
		"no reply queue":   {func(c *agent.HandlerConfig) { c.SchedulerQueueURL = "" }, "ReplyQueueURL"},
		"negative setting": {func(c *agent.HandlerConfig) { c.MaxDeliveries = -1 }, "MaxDeliveries"},
	} {
		cfg := f.config(agent.New("flights").Step("reserve-flight", do, nil))
		tc.cfg(&cfg)
		_, err := agent.NewHandler(cfg)
		require.ErrorIs(t, err, sas.ErrInvalid, name)
		require.ErrorContains(t, err, tc.want, name)
	}

	// Several mistakes are reported together.
	cfg := f.config(agent.New("flights").Step("", do, nil).Step("x", nil, nil))
	_, err := agent.NewHandler(cfg)
	require.ErrorContains(t, err, "a step needs a name")
	require.ErrorContains(t, err, `step "x": do is nil`)
}

// A panicking step is contained to its request, which is left for
// redelivery; the batch's others are served.
func TestPanicIsContainedToItsRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := agent.New("flights").Step("reserve-flight", func(_ context.Context, req agent.Request) (any, error) {
		if req.OrderID == "o-panic" {
			panic("nil map")
		}
		return nil, nil
	}, nil)
	resp := f.handle(f.handler(a), event(request("o-panic"), request("o-fine")))
	require.Equal(t, []string{"m1"}, failedIDs(resp))
	reps := f.replies()
	require.Len(t, reps, 1)
	require.Equal(t, "o-fine", reps[0].OrderID)
}

// A guard refuses a request before anything runs: the reply is a
// permanent failure whose reason says the agent refused it and why; a
// request the guard lets through runs as usual, undos included.
func TestGuardRefusesBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var runs atomic.Int32
	do := func(context.Context, agent.Request) (any, error) { runs.Add(1); return nil, nil }
	a := agent.New("flights").Step("reserve-flight", do, do).
		Guard(func(req agent.Request) error {
			if req.Action != "POST /reservations" {
				return fmt.Errorf("action %q is not one of its workflows'", req.Action)
			}
			return nil
		})
	require.NoError(t, a.Err())

	bad := request("o-1")
	bad.Action = "DELETE /accounts"
	resp := f.handle(f.handler(a), event(bad))
	require.Empty(t, resp.BatchItemFailures)
	reps := f.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeFailed, reps[0].Outcome)
	require.Equal(t, `agent "flights" refused the request: action "DELETE /accounts" is not one of its workflows'`, reps[0].Reason)
	require.Zero(t, runs.Load(), "nothing ran for the refused request")

	good := request("o-2")
	f.handle(f.handler(a), event(good))
	reps = f.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	require.EqualValues(t, 1, runs.Load())

	// Run (the test path) refuses the same way.
	out := a.Run(t.Context(), agent.Request{OrderID: "o-3", Step: "reserve-flight", Action: "POST /elsewhere"})
	require.Equal(t, agent.StatusFailed, out.Status)
	require.Contains(t, out.Reason, "refused the request")
	require.EqualValues(t, 1, runs.Load())

	require.Error(t, agent.New("x").Guard(nil).Err(), "a nil guard is a definition mistake")
}

// The SDK's handler tells the scheduler what it measured of each run, for
// the order's page: how long the request waited (from SQS's SentTimestamp
// to the start) and how long the step ran, as the metrics do.
func TestTheReplySaysHowLongTheRequestWaitedAndRan(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := agent.New("flights").Step("reserve-flight", func(context.Context, agent.Request) (any, error) {
		f.clock.Advance(2 * time.Second)
		return seat{Flight: "FL1", Seats: 1}, nil
	}, nil)
	ev := event(request("o-timed"))
	ev.Records[0].Attributes = map[string]string{"SentTimestamp": fmt.Sprint(f.clock.Now().Add(-5 * time.Second).UnixMilli())}
	f.handle(f.handler(a), ev)
	reps := f.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.RunTiming{Queued: sas.MillisOf(5 * time.Second), Ran: sas.MillisOf(2 * time.Second)}, reps[0].Timing())
}
