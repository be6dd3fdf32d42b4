package memqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
	"github.com/sas-go/sas/internal/testkit/queuetest"
)

// start is where each test's fake clock starts.
var start = clocktest.T0

func TestQueueContract(t *testing.T) {
	t.Parallel()
	queuetest.Run(t, queuetest.Backend{
		Name:              "memory",
		ExactReceiveCount: true,
		New: func(t *testing.T, s queuetest.Spec) queuetest.Fixture {
			clk := clocktest.New(start)
			q := memqueue.New(memqueue.Options{Clock: clk})
			created, err := q.CreateQueue(t.Context(), sas.CreateQueueParams{Name: "contract", MaxReceiveCount: s.MaxReceiveCount})
			require.NoError(t, err)
			return queuetest.Fixture{
				Queue:      q,
				URL:        created.URL,
				DLQURL:     created.DLQURL,
				MissingURL: created.URL + "-missing",
				Advance:    clk.Advance,
			}
		},
	})
}

type env struct {
	clk *clocktest.Clock
	q   *memqueue.Queue
	url string
}

func setup(t *testing.T, opts memqueue.Options, p sas.CreateQueueParams) env {
	t.Helper()
	clk := clocktest.New(start)
	opts.Clock = clk
	q := memqueue.New(opts)
	if p.Name == "" {
		p.Name = "q"
	}
	created, err := q.CreateQueue(t.Context(), p)
	require.NoError(t, err)
	return env{clk: clk, q: q, url: created.URL}
}

func (e env) send(t *testing.T, bodies ...string) {
	t.Helper()
	msgs := make([]sas.OutboundMessage, len(bodies))
	for i, b := range bodies {
		msgs[i] = sas.OutboundMessage{ID: fmt.Sprint(i), Body: b}
	}
	res, err := e.q.Send(t.Context(), sas.SendParams{QueueURL: e.url, Messages: msgs})
	require.NoError(t, err)
	require.Empty(t, res.Failed)
}

func (e env) receive(t *testing.T, vis time.Duration) []sas.InboundMessage {
	t.Helper()
	got, err := e.q.Receive(t.Context(), sas.ReceiveParams{QueueURL: e.url, Max: 10, Visibility: vis})
	require.NoError(t, err)
	return got
}

func (e env) stats(t *testing.T) memqueue.Stats {
	t.Helper()
	s, err := e.q.Stats(e.url)
	require.NoError(t, err)
	return s
}

// SQS documents that an old receipt "might not" delete the message; memqueue
// takes the case that exposes a consumer relying on it: it does not.
func TestStaleReceiptDeleteKeepsMessage(t *testing.T) {
	t.Parallel()
	e := setup(t, memqueue.Options{}, sas.CreateQueueParams{})
	e.send(t, "m")
	old := e.receive(t, time.Second)[0]
	e.clk.Advance(time.Second)
	current := e.receive(t, time.Minute)[0]

	res, err := e.q.Delete(t.Context(), sas.DeleteParams{QueueURL: e.url, Receipts: []string{old.Receipt}})
	require.NoError(t, err)
	assert.Empty(t, res.Failed)
	assert.Equal(t, memqueue.Stats{InFlight: 1}, e.stats(t), "the stale delete did nothing")

	e.clk.Advance(time.Minute)
	again := e.receive(t, time.Minute)
	require.Len(t, again, 1, "redelivered after the holder's visibility ended")
	assert.Equal(t, current.MessageID, again[0].MessageID)
	assert.Equal(t, 3, again[0].ReceiveCount)
}

// The latest receipt still deletes after its visibility ran out, as long as
// nobody received the message since (SQS behaves so).
func TestExpiredButLatestReceiptDeletes(t *testing.T) {
	t.Parallel()
	e := setup(t, memqueue.Options{}, sas.CreateQueueParams{})
	e.send(t, "m")
	m := e.receive(t, time.Second)[0]
	e.clk.Advance(time.Hour)

	// Extending an expired receipt changes nothing: the message stays visible.
	require.NoError(t, e.q.ChangeVisibility(t.Context(), sas.ChangeVisibilityParams{QueueURL: e.url, Receipt: m.Receipt, Timeout: time.Minute}))
	assert.Equal(t, memqueue.Stats{Visible: 1}, e.stats(t))

	_, err := e.q.Delete(t.Context(), sas.DeleteParams{QueueURL: e.url, Receipts: []string{m.Receipt}})
	require.NoError(t, err)
	assert.Equal(t, memqueue.Stats{}, e.stats(t))
}

func TestReceiptOfAnotherQueueIsInvalid(t *testing.T) {
	t.Parallel()
	e := setup(t, memqueue.Options{}, sas.CreateQueueParams{Name: "a"})
	other, err := e.q.CreateQueue(t.Context(), sas.CreateQueueParams{Name: "b"})
	require.NoError(t, err)
	e.send(t, "m")
	m := e.receive(t, time.Minute)[0]

	res, err := e.q.Delete(t.Context(), sas.DeleteParams{QueueURL: other.URL, Receipts: []string{m.Receipt}})
	require.NoError(t, err)
	require.Len(t, res.Failed, 1)
	assert.Equal(t, "ReceiptHandleIsInvalid", res.Failed[0].Code)
	err = e.q.ChangeVisibility(t.Context(), sas.ChangeVisibilityParams{QueueURL: other.URL, Receipt: m.Receipt})
	assert.ErrorIs(t, err, sas.ErrInvalid)
}

func TestDelayAndDefaultVisibility(t *testing.T) {
	t.Parallel()
	e := setup(t, memqueue.Options{}, sas.CreateQueueParams{
		Attributes: map[string]string{"DelaySeconds": "10", "VisibilityTimeout": "5"},
	})
	e.send(t, "m")
	assert.Equal(t, memqueue.Stats{Delayed: 1}, e.stats(t), "the queue's delay applies")
	e.clk.Advance(9 * time.Second)
	assert.Empty(t, e.receive(t, 0))
	e.clk.Advance(time.Second)
	got := e.receive(t, 0)
	require.Len(t, got, 1)
	assert.Equal(t, e.clk.Now().Add(-10*time.Second), got[0].SentAt)

	e.clk.Advance(4 * time.Second)
	assert.Empty(t, e.receive(t, 0), "hidden for the queue's 5 s visibility")
	e.clk.Advance(time.Second)
	assert.Len(t, e.receive(t, 0), 1)
}

func TestSubSecondDurationsRoundUp(t *testing.T) {
	t.Parallel()
	e := setup(t, memqueue.Options{}, sas.CreateQueueParams{})
	e.send(t, "m")
	e.receive(t, 1500*time.Millisecond)
	e.clk.Advance(1999 * time.Millisecond)
	assert.Empty(t, e.receive(t, time.Minute), "1.5 s is 2 s, as SQS takes whole seconds")
	e.clk.Advance(time.Millisecond)
	assert.Len(t, e.receive(t, time.Minute), 1)
}

func TestDeadLetterKeepsMessage(t *testing.T) {
	t.Parallel()
	e := setup(t, memqueue.Options{}, sas.CreateQueueParams{MaxReceiveCount: 3})
	e.send(t, "poison")
	var id string
	for range 3 {
		got := e.receive(t, time.Second)
		require.Len(t, got, 1)
		id = got[0].MessageID
		e.clk.Advance(time.Second)
	}
	assert.Empty(t, e.receive(t, time.Second), "the fourth receive moves it")
	assert.Equal(t, memqueue.Stats{}, e.stats(t))

	dlq, err := e.q.Stats(e.url + "-dlq")
	require.NoError(t, err)
	assert.Equal(t, memqueue.Stats{Visible: 1}, dlq)
	got, err := e.q.Receive(t.Context(), sas.ReceiveParams{QueueURL: e.url + "-dlq", Max: 10})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, id, got[0].MessageID)
	assert.Equal(t, 4, got[0].ReceiveCount, "the count carries over")
}

func TestRedrivePolicyAttribute(t *testing.T) {
	t.Parallel()
	q := memqueue.New(memqueue.Options{Clock: clocktest.New(start)})
	dlq, err := q.CreateQueue(t.Context(), sas.CreateQueueParams{Name: "dead"})
	require.NoError(t, err)
	arn, err := q.QueueARN(dlq.URL)
	require.NoError(t, err)
	_, err = q.CreateQueue(t.Context(), sas.CreateQueueParams{Name: "main", Attributes: map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":2}`, arn),
	}})
	require.NoError(t, err)

	_, err = q.CreateQueue(t.Context(), sas.CreateQueueParams{Name: "bad", Attributes: map[string]string{
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:memory:000000000000:nope","maxReceiveCount":2}`,
	}})
	assert.ErrorIs(t, err, sas.ErrInvalid, "unknown dead-letter queue")
}

func TestCreateQueue(t *testing.T) {
	t.Parallel()
	q := memqueue.New(memqueue.Options{})
	ctx := t.Context()
	a, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: "same", Attributes: map[string]string{"VisibilityTimeout": "10"}})
	require.NoError(t, err)
	b, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: "same", Attributes: map[string]string{"VisibilityTimeout": "10"}})
	require.NoError(t, err)
	assert.Equal(t, a, b, "the same queue again is the same queue")

	for name, p := range map[string]sas.CreateQueueParams{
		"other attributes":   {Name: "same", Attributes: map[string]string{"VisibilityTimeout": "11"}},
		"unsupported":        {Name: "x", Attributes: map[string]string{"FifoQueue": "true"}},
		"fifo":               {Name: "x.fifo"},
		"empty name":         {},
		"bad visibility":     {Name: "x", Attributes: map[string]string{"VisibilityTimeout": "43201"}},
		"negative max count": {Name: "x", MaxReceiveCount: -1},
	} {
		_, err := q.CreateQueue(ctx, p)
		assert.ErrorIs(t, err, sas.ErrInvalid, name)
	}

	require.NoError(t, q.DeleteQueue(ctx, a.URL))
	_, err = q.Receive(ctx, sas.ReceiveParams{QueueURL: a.URL})
	assert.ErrorIs(t, err, sas.ErrNotFound)
	assert.ErrorIs(t, q.DeleteQueue(ctx, a.URL), sas.ErrNotFound)
}

func TestFaults(t *testing.T) {
	t.Parallel()
	down := errors.New("connection reset")
	var failSend, failReceive bool
	var mu sync.Mutex
	e := setup(t, memqueue.Options{
		Fault: func(op memqueue.Op, _ string) error {
			mu.Lock()
			defer mu.Unlock()
			if op == memqueue.OpSend && failSend || op == memqueue.OpReceive && failReceive {
				return down
			}
			return nil
		},
		SendFault: func(_ string, m sas.OutboundMessage) *sas.SendFailure {
			if m.Body == "throttle me" {
				return &sas.SendFailure{Code: "RequestThrottled", Message: "slow down"}
			}
			return nil
		},
	}, sas.CreateQueueParams{})

	res, err := e.q.Send(t.Context(), sas.SendParams{QueueURL: e.url, Messages: []sas.OutboundMessage{
		{ID: "a", Body: "fine"}, {ID: "b", Body: "throttle me"},
	}})
	require.NoError(t, err)
	assert.Equal(t, []sas.SendFailure{{ID: "b", Code: "RequestThrottled", Message: "slow down"}}, res.Failed)
	assert.Equal(t, 1, res.Requests)
	assert.Equal(t, memqueue.Stats{Visible: 1}, e.stats(t))

	mu.Lock()
	failSend, failReceive = true, true
	mu.Unlock()
	_, err = e.q.Send(t.Context(), sas.SendParams{QueueURL: e.url, Messages: []sas.OutboundMessage{{ID: "c", Body: "lost?"}}})
	assert.ErrorIs(t, err, down)
	_, err = e.q.Receive(t.Context(), sas.ReceiveParams{QueueURL: e.url})
	assert.ErrorIs(t, err, down)
	assert.Equal(t, memqueue.Stats{Visible: 1}, e.stats(t), "a failed call changes nothing")
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	e := setup(t, memqueue.Options{}, sas.CreateQueueParams{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := e.q.Send(ctx, sas.SendParams{QueueURL: e.url, Messages: []sas.OutboundMessage{{ID: "a", Body: "x"}}})
	assert.ErrorIs(t, err, context.Canceled)
}

// Many consumers at once: within its visibility a message goes to one of them.
func TestConcurrentConsumers(t *testing.T) {
	t.Parallel()
	e := setup(t, memqueue.Options{}, sas.CreateQueueParams{})
	const n = 200
	for i := range n / 10 {
		bodies := make([]string, 10)
		for j := range bodies {
			bodies[j] = fmt.Sprint(i*10 + j)
		}
		e.send(t, bodies...)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				got, err := e.q.Receive(context.Background(), sas.ReceiveParams{QueueURL: e.url, Max: 3, Visibility: time.Minute})
				if err != nil || len(got) == 0 {
					return
				}
				receipts := make([]string, len(got))
				mu.Lock()
				for i, m := range got {
					seen[m.Body]++
					receipts[i] = m.Receipt
				}
				mu.Unlock()
				if _, err := e.q.Delete(context.Background(), sas.DeleteParams{QueueURL: e.url, Receipts: receipts}); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Len(t, seen, n)
	for body, count := range seen {
		assert.Equal(t, 1, count, body)
	}
	assert.Equal(t, memqueue.Stats{}, e.stats(t))
}
