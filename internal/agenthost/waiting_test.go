package agenthost_test

import (
	"github.com/sas-go/sas/internal/dev/poller"

	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// These tests cover issue 7 ("waiting is not executing") and the agent's
// part of issue 8 (no outcome is never acknowledged): docs/protocol.md,
// "Agent".

// A request that waited in the queue past its lease's CompleteBy but
// carries the step's limit (TimeoutMs) is run, on a deadline counted from
// when the agent starts it; the call's context ends at that deadline, or at
// the invocation's end less the reply reserve if that comes first.
func TestRequestThatWaitedPastCompleteByIsRun(t *testing.T) {
	t.Parallel()
	const reserve = 2 * time.Second
	own := clocktest.T0.Add(5 * time.Second) // start (clocktest.T0) + TimeoutMs
	tests := []struct {
		name           string
		invocationEnds time.Time // zero: no deadline on the invocation
		wantDeadline   time.Time
	}{
		{"no invocation deadline", time.Time{}, own},
		{"the invocation ends later", clocktest.T0.Add(time.Hour), own},
		{"the invocation ends first", clocktest.T0.Add(4 * time.Second), clocktest.T0.Add(4*time.Second - reserve)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newServiceRig(t, memqueue.Options{})
			var calls int
			var got time.Time
			var hasDeadline bool
			svc := r.service(agenthost.Config{ReplyReserve: reserve, Agents: payments(func(ctx context.Context, _ sas.AgentRequest) (json.RawMessage, error) {
				calls++
				got, hasDeadline = ctx.Deadline()
				return json.RawMessage(`{"id":"pay_1"}`), nil
			})})
			req := request("o-waited", completeBy(clocktest.T0.Add(-10*time.Second)), timeout(5*time.Second))
			ctx := t.Context()
			if !tt.invocationEnds.IsZero() {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, tt.invocationEnds)
				defer cancel()
			}
			resp, err := svc.Handle(ctx, event(req))
			require.NoError(t, err)
			require.Empty(t, resp.BatchItemFailures)
			require.Equal(t, 1, calls, "run, not dropped")
			require.True(t, hasDeadline)
			require.True(t, tt.wantDeadline.Equal(got), "call deadline %s, want %s", got, tt.wantDeadline)

			reps := r.replies()
			require.Len(t, reps, 1)
			requireEcho(t, req, reps[0])
			require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
			require.Contains(t, r.logs.String(), "waited past completeBy")
		})
	}
}

// The same through the deployed wiring (internal/assembly, the SDK's HTTP agent, httpcall):
// the HTTP call's deadline is the agent's, not the passed CompleteBy.
func TestRequestThatWaitedIsCalledAndReplied(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	req := request("order-w1", completeBy(clocktest.T0.Add(-time.Minute)))
	resp := r.handle(event(req))
	require.Empty(t, resp.BatchItemFailures)
	reps := r.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	require.Len(t, r.effectsFor("order-w1:0"), 1)
}

// Without TimeoutMs (an older scheduler's request) CompleteBy is the
// deadline, as before: expired on arrival, it is not run, and acknowledged
// (nothing can serve it), its visibility untouched.
func TestOlderRequestExpiredOnArrivalIsDropped(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	vis := &visibilityRecorder{Queue: r.queue}
	ran := false
	svc := r.service(agenthost.Config{Queue: vis, RequestQueueURL: "http://memqueue.local/000000000000/agent",
		Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
			ran = true
			return nil, nil
		})})
	resp := handleWith(t, svc, event(request("o-old", legacy, completeBy(clocktest.T0.Add(-time.Second)))))
	require.Empty(t, resp.BatchItemFailures, "acknowledged")
	require.False(t, ran, "no call")
	require.Empty(t, r.replies())
	require.Empty(t, vis.changes())
	require.Contains(t, r.logs.String(), "expired on arrival")
}

// visibilityRecorder is a memqueue that records ChangeVisibility calls.
type visibilityRecorder struct {
	*memqueue.Queue
	mu  sync.Mutex
	got []sas.ChangeVisibilityParams
}

func (v *visibilityRecorder) ChangeVisibility(ctx context.Context, p sas.ChangeVisibilityParams) error {
	v.mu.Lock()
	v.got = append(v.got, p)
	v.mu.Unlock()
	return v.Queue.ChangeVisibility(ctx, p)
}

// changes maps a receipt handle to the visibility it was given.
func (v *visibilityRecorder) changes() map[string]time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := map[string]time.Duration{}
	for _, p := range v.got {
		out[p.Receipt] = p.Timeout
	}
	return out
}

// received sends requests to a new agent queue of r's memqueue and receives
// them, as the event source would: real receipt handles.
func (r *serviceRig) received(reqs ...sas.AgentRequest) (string, events.SQSEvent) {
	r.t.Helper()
	q, err := r.queue.CreateQueue(r.t.Context(), sas.CreateQueueParams{Name: "agent"})
	require.NoError(r.t, err)
	var out []sas.OutboundMessage
	for i, req := range reqs {
		out = append(out, sas.OutboundMessage{ID: string(rune('a' + i)), Body: sas.Encode(req)})
	}
	sent, err := r.queue.Send(r.t.Context(), sas.SendParams{QueueURL: q.URL, Messages: out})
	require.NoError(r.t, err)
	require.Empty(r.t, sent.Failed)
	msgs, err := r.queue.Receive(r.t.Context(), sas.ReceiveParams{QueueURL: q.URL, Max: 10, Visibility: time.Hour})
	require.NoError(r.t, err)
	require.Len(r.t, msgs, len(reqs))
	ev := events.SQSEvent{}
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: m.MessageID, ReceiptHandle: m.Receipt, Body: m.Body, EventSource: "aws:sqs"})
	}
	return q.URL, ev
}

// No outcome leaves the message for redelivery (never acknowledged, no
// reply) and, with the request queue known, brings it back after
// 2^(receives-1) seconds, at most 30: in seconds, not after the queue's
// visibility timeout.
func TestNoOutcomeIsLeftForRedeliveryWithBackoff(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	vis := &visibilityRecorder{Queue: r.queue}
	reqs := []sas.AgentRequest{request("o-r1"), request("o-r2"), request("o-r3"), request("o-rx")}
	url, ev := r.received(reqs...)
	ev = withReceives(ev, "1", "2", "3", "") // the last without the attribute: 1
	svc := r.service(agenthost.Config{Queue: vis, RequestQueueURL: url, Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		return nil, errors.New("connection refused")
	})})

	resp := handleWith(t, svc, ev)
	// The third delivery without an outcome is the last (MaxDeliveries 3):
	// acknowledged, the supervisor takes over.
	require.ElementsMatch(t, []string{ev.Records[0].MessageId, ev.Records[1].MessageId, ev.Records[3].MessageId}, failedIDs(resp))
	require.Empty(t, r.replies())
	require.Equal(t, map[string]time.Duration{
		ev.Records[0].ReceiptHandle: time.Second,
		ev.Records[1].ReceiptHandle: 2 * time.Second,
		ev.Records[3].ReceiptHandle: time.Second,
	}, vis.changes())
	for _, p := range vis.got {
		require.Equal(t, url, p.QueueURL)
	}

	// And the queue keeps them that long, not the hour they were received for.
	visibleAfter := func(d time.Duration) []string {
		r.clock.Advance(d)
		msgs, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: url, Max: 10, Visibility: time.Hour})
		require.NoError(t, err)
		return ordersOf(t, msgs)
	}
	require.ElementsMatch(t, []string{"o-r1", "o-rx"}, visibleAfter(time.Second))
	require.Equal(t, []string{"o-r2"}, visibleAfter(time.Second))
}

func TestRedeliveryBackoff(t *testing.T) {
	t.Parallel()
	for receives, want := range map[string]time.Duration{
		"": time.Second, "x": time.Second, "0": time.Second, "-3": time.Second,
		"1": time.Second, "2": 2 * time.Second, "3": 4 * time.Second, "5": 16 * time.Second,
		"6": 30 * time.Second, "10": 30 * time.Second, "1000000": 30 * time.Second,
	} {
		m := events.SQSMessage{Attributes: map[string]string{"ApproximateReceiveCount": receives}}
		require.Equal(t, want, agenthost.RedeliveryBackoff(m), "receives %q", receives)
	}
	require.Equal(t, time.Second, agenthost.RedeliveryBackoff(events.SQSMessage{}), "no attributes at all")
}

// Without the request queue's URL the message is still left for redelivery;
// it comes back after the queue's visibility timeout.
func TestNoOutcomeWithoutRequestQueueStillRedelivers(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	vis := &visibilityRecorder{Queue: r.queue}
	_, ev := r.received(request("o-nq"))
	svc := r.service(agenthost.Config{Queue: vis, Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		return nil, errors.New("connection refused")
	})})
	resp := handleWith(t, svc, ev)
	require.Equal(t, []string{ev.Records[0].MessageId}, failedIDs(resp))
	require.Empty(t, vis.changes())
}

// A failed ChangeVisibility is logged only: the message is still left for
// redelivery, and comes back after the queue's visibility timeout.
func TestVisibilityChangeFailureIsOnlyLogged(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{Fault: func(op memqueue.Op, _ string) error {
		if op == memqueue.OpChangeVisibility {
			return errors.New("simulated throttling")
		}
		return nil
	}})
	url, ev := r.received(request("o-cv"), request("o-ok"))
	svc := r.service(agenthost.Config{RequestQueueURL: url, Agents: payments(func(_ context.Context, req sas.AgentRequest) (json.RawMessage, error) {
		if req.OrderID == "o-cv" {
			return nil, errors.New("connection refused")
		}
		return json.RawMessage(`{}`), nil
	})})
	resp := handleWith(t, svc, ev)
	require.Equal(t, []string{ev.Records[0].MessageId}, failedIDs(resp))
	require.Len(t, r.replies(), 1, "the other request is served")
	require.Contains(t, r.logs.String(), "could not shorten the visibility")
	require.Contains(t, r.logs.String(), "simulated throttling")
}

// An outcome that comes after the agent's own deadline is not sent, even
// while the lease (CompleteBy) still runs; its message is left for
// redelivery, whose call gets the stored answer under the same key.
func TestReplyAfterOwnDeadlineIsNotSent(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		r.clock.Advance(5 * time.Second)
		return json.RawMessage(`{}`), nil
	})})
	req := request("o-slow", completeBy(clocktest.T0.Add(time.Hour)), timeout(5*time.Second))
	resp := handleWith(t, svc, event(req))
	require.Empty(t, r.replies(), "5s is the limit: at it, the outcome is late")
	require.Equal(t, []string{"m1"}, failedIDs(resp))
	require.Contains(t, r.logs.String(), "outcome came after the deadline")
}

// Duplicates of one request in a batch, both of which waited past their
// CompleteBy, still run one after the other, and each has its own limit
// counted from when it starts (the second starts when the first ends).
func TestWaitedDuplicatesRunOneAfterTheOther(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	var mu sync.Mutex
	running := false
	var deadlines []time.Time
	svc := r.service(agenthost.Config{Agents: payments(func(ctx context.Context, _ sas.AgentRequest) (json.RawMessage, error) {
		mu.Lock()
		if running {
			mu.Unlock()
			return nil, errors.New("two runs of one key at once")
		}
		running = true
		dl, _ := ctx.Deadline()
		deadlines = append(deadlines, dl)
		mu.Unlock()
		// Within the 5s limit; not so long that the first reply, held for
		// company while the second runs, is past its deadline when sent.
		r.clock.Advance(2 * time.Second)
		mu.Lock()
		running = false
		mu.Unlock()
		return json.RawMessage(`{}`), nil
	})})
	waited := func(attempt int) sas.AgentRequest {
		return request("o-dup", completeBy(clocktest.T0.Add(-time.Minute)), timeout(5*time.Second), func(q *sas.AgentRequest) { q.Attempt = attempt })
	}
	resp := handleWith(t, svc, event(waited(1), waited(2)))
	require.Empty(t, resp.BatchItemFailures)
	reps := r.replies()
	require.Len(t, reps, 2, "each within its own limit")
	for _, rep := range reps {
		require.Equal(t, sas.OutcomeDone, rep.Outcome)
	}
	require.Equal(t, []time.Time{clocktest.T0.Add(5 * time.Second), clocktest.T0.Add(7 * time.Second)}, deadlines,
		"each counted from its own start")
}

// The deployed wiring end to end: the assembly takes the agent queue from
// SAS_AGENT_QUEUE_URL, and a request that keeps ending without an outcome
// comes back after 1s, then 2s, until the queue's maxReceiveCount sends it to
// the dead-letter queue (the supervisor's from there). The poller is the
// local stand-in for Lambda's event source mapping.
func TestNoOutcomeComesBackSoonThenIsHandedToTheSupervisor(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{
		faults: script("order-dl:0", remotesim.ScriptStep{Fault: remotesim.FaultTransient}),
		client: agent.HTTPConfig{Tries: 1},
	})
	q, err := r.queue.CreateQueue(t.Context(), sas.CreateQueueParams{
		Name: "agent", MaxReceiveCount: 3, Attributes: map[string]string{"VisibilityTimeout": "270"},
	})
	require.NoError(t, err)
	svc, err := r.deployed(config.Config{SchedulerQueueURL: r.replyURL, PaymentsURL: r.simURL, AgentQueueURL: q.URL, StepTimeout: 30 * time.Second})
	require.NoError(t, err)
	sent, err := r.queue.Send(t.Context(), sas.SendParams{QueueURL: q.URL, Messages: []sas.OutboundMessage{{ID: "1", Body: sas.Encode(request("order-dl"))}}})
	require.NoError(t, err)
	require.Empty(t, sent.Failed)
	p := &poller.Poller{Name: "agent", Queue: r.queue, QueueURL: q.URL, Handler: svc.Handle, Logger: slog.New(slog.NewJSONHandler(r.logs, nil))}
	poll := func() int {
		n, err := p.PollOnce(t.Context())
		require.NoError(t, err)
		return n
	}

	require.Equal(t, 1, poll(), "first delivery")
	require.Zero(t, poll(), "invisible for its backoff")
	r.fake.Advance(time.Second)
	require.Equal(t, 1, poll(), "back after 1s")
	r.fake.Advance(time.Second)
	require.Zero(t, poll())
	r.fake.Advance(time.Second)
	require.Equal(t, 1, poll(), "back after 2s")
	r.fake.Advance(time.Hour)
	require.Zero(t, poll(), "the third delivery was the last: acknowledged")

	dead, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: q.DLQURL, Max: 10})
	require.NoError(t, err)
	require.Empty(t, dead, "the DLQ is for messages nothing can serve, not for a step still being worked on")
	// No reply: one retry{requeue} for the same attempt, for the scheduler
	// to send the request again if the attempt is still current.
	msgs, err := r.queue.Receive(t.Context(), sas.ReceiveParams{QueueURL: r.replyURL, Max: 10, Visibility: time.Hour})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	var rt sas.Retry
	require.NoError(t, json.Unmarshal([]byte(msgs[0].Body), &rt))
	require.Equal(t, sas.Retry{V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: "order-dl", Step: 0, Attempt: 1,
		Reason: "no outcome after 3 deliveries", Requeue: true}, rt)
	st := p.Stats()
	require.Equal(t, 2, st.Failed)
	require.Equal(t, 1, st.Deleted)
	logs := r.logs.String()
	for _, b := range []string{`"backoff":"1s"`, `"backoff":"2s"`} {
		require.Contains(t, logs, b)
	}
	require.Equal(t, 3, strings.Count(logs, "no outcome; no reply, message left for redelivery"))
	require.Equal(t, 1, strings.Count(logs, "no outcome after the last delivery; handed back to the scheduler"))
}
