package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// sendCounting counts Send calls per queue: each is one SQS request
// (SendMessage, or SendMessageBatch for up to ten messages).
type sendCounting struct {
	sas.Queue
	mu    sync.Mutex
	calls map[string]int
}

func (q *sendCounting) Send(ctx context.Context, p sas.SendParams) (sas.SendResult, error) {
	q.mu.Lock()
	q.calls[p.QueueURL]++
	q.mu.Unlock()
	return q.Queue.Send(ctx, p)
}

func (q *sendCounting) take() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := q.calls
	q.calls = map[string]int{}
	return c
}

// countingHandler is a scheduler like the fixture's whose sends are counted.
func (f *fixture) countingHandler() (*scheduler.Handler, *sendCounting) {
	f.t.Helper()
	q := &sendCounting{Queue: f.q, calls: map[string]int{}}
	reg, err := registry.Default(stepTimeout)
	require.NoError(f.t, err)
	svc, err := scheduler.New(scheduler.Config{
		Store: f.calls, Queue: q, Clock: f.clock, Alerter: f.alerts, Workflows: reg,
		Owner: owner, AgentQueues: sas.AgentQueues{Default: f.agentURL}, PickupTimeout: time.Minute, IntakeQueueURL: intakeQueueURL, SigningKey: testKey,
		ReplyToAllowed: func(u string) bool { return u == f.replyURL || u == f.otherURL },
		Logger:         slog.New(slog.NewTextHandler(f.t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(f.t, err)
	return scheduler.NewHandler(svc), q
}

// The messages of one invocation go out batched per queue: ten orders cost
// one request to the agent queue at intake and one at each reply, not ten.
func TestSendsOfABatchShareOneRequestPerQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h, q := f.countingHandler()

	var intakes []string
	for i := range 10 {
		intakes = append(intakes, intake(fmt.Sprintf("o-batch%d", i), "payment", ""))
	}
	require.Empty(t, f.handleWith(h, f.event(intakes...)))
	require.Equal(t, map[string]int{f.agentURL: 1}, q.take(), "ten requests, one SendMessageBatch")
	reqs := f.requests()
	require.Len(t, reqs, 10)

	var replies []string
	for _, r := range reqs {
		replies = append(replies, done(r))
	}
	require.Empty(t, f.handleWith(h, f.event(replies...)))
	require.Empty(t, q.take(), "the last step done, no replyTo: nothing to send")
	for i := range 10 {
		require.Equal(t, []sas.ProcessState{sas.Processed}, f.states(fmt.Sprintf("o-batch%d", i)))
	}

	// With a replyTo, "received" follows each request: one more request, to
	// the caller's queue, in the order the records were handled.
	intakes = nil
	for i := range 10 {
		intakes = append(intakes, intake(fmt.Sprintf("o-batchr%d", i), "order", f.replyURL))
	}
	require.Empty(t, f.handleWith(h, f.event(intakes...)))
	require.Equal(t, map[string]int{f.agentURL: 1, f.replyURL: 1}, q.take())
	reqs = f.requests()
	require.Len(t, reqs, 10)
	sts := f.statuses()
	require.Len(t, sts, 10)
	for i, st := range sts {
		require.Equal(t, fmt.Sprintf("o-batchr%d", i), st.OrderID)
		require.Equal(t, sas.StatusReceived, st.Status)
	}

	// A reply that dispatches the next step and posts "step-done": the
	// requests in one batch, the statuses in another.
	replies = nil
	for _, r := range reqs {
		replies = append(replies, done(r))
	}
	require.Empty(t, f.handleWith(h, f.event(replies...)))
	require.Equal(t, map[string]int{f.agentURL: 1, f.replyURL: 1}, q.take())
	require.Len(t, f.requests(), 10)
	require.Len(t, f.statuses(), 10)
}

// A record whose first message fails sends none of its later ones, and only
// that record is redelivered; the others' messages all go out.
func TestFailedSendStopsOnlyItsRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	h, _ := f.countingHandler()
	f.failEntries(func(url, body string) bool {
		return url == f.agentURL && strings.Contains(body, `"orderId":"o-fs1"`)
	})
	ev := f.event(intake("o-fs0", "payment", f.replyURL), intake("o-fs1", "payment", f.replyURL), intake("o-fs2", "payment", f.replyURL))
	require.Equal(t, []string{ev.Records[1].MessageId}, f.handleWith(h, ev))
	require.Len(t, f.requests(), 2)
	var got []string
	for _, st := range f.statuses() {
		got = append(got, st.OrderID+":"+st.Status)
	}
	require.Equal(t, []string{"o-fs0:received", "o-fs2:received"}, got, "no \"received\" for the order whose request failed")
}
