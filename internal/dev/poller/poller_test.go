package poller

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

func ok() events.SQSEventResponse {
	return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
}
func fail(id string) events.SQSBatchItemFailure {
	return events.SQSBatchItemFailure{ItemIdentifier: id}
}

func setup(t *testing.T, h SQSHandler) (*Poller, *memqueue.Queue, string, *clocktest.Clock) {
	t.Helper()
	c := clocktest.New(clocktest.T0)
	q := memqueue.New(memqueue.Options{Clock: c})
	created, err := q.CreateQueue(context.Background(), sas.CreateQueueParams{Name: "work", Attributes: map[string]string{"VisibilityTimeout": "30"}})
	require.NoError(t, err)
	return &Poller{Name: "work", Queue: q, QueueURL: created.URL, BatchSize: 10, Handler: h}, q, created.URL, c
}

func send(t *testing.T, q sas.Queue, url string, bodies ...string) {
	t.Helper()
	var msgs []sas.OutboundMessage
	for i, b := range bodies {
		msgs = append(msgs, sas.OutboundMessage{ID: string(rune('a' + i)), Body: b})
	}
	res, err := q.Send(context.Background(), sas.SendParams{QueueURL: url, Messages: msgs})
	require.NoError(t, err)
	require.Empty(t, res.Failed)
}

func TestPollerDeletesAllButReportedFailures(t *testing.T) {
	t.Parallel()
	var seen []string
	p, q, url, c := setup(t, func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		r := ok()
		for _, m := range ev.Records {
			seen = append(seen, m.Body)
			if m.Body == "bad" {
				r.BatchItemFailures = append(r.BatchItemFailures, fail(m.MessageId))
			}
		}
		return r, nil
	})
	send(t, q, url, "one", "bad", "two")
	n, err := p.PollOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.ElementsMatch(t, []string{"one", "bad", "two"}, seen)
	seen = nil
	n, _ = p.PollOnce(context.Background())
	require.Zero(t, n, "the failed message is invisible until its visibility timeout")
	c.Advance(31 * time.Second)
	n, _ = p.PollOnce(context.Background())
	require.Equal(t, 1, n)
	require.Equal(t, []string{"bad"}, seen, "only the reported failure comes back")
	st := p.Stats()
	require.Equal(t, 2, st.Deleted)
	require.Equal(t, 2, st.Failed)
}

func TestPollerHandlerErrorRetriesWholeBatch(t *testing.T) {
	t.Parallel()
	calls := 0
	p, q, url, c := setup(t, func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		calls++
		if calls == 1 {
			panic("boom")
		}
		return events.SQSEventResponse{}, nil // nil list: refused
	})
	send(t, q, url, "x", "y")
	_, err := p.PollOnce(context.Background())
	require.NoError(t, err)
	c.Advance(31 * time.Second)
	n, _ := p.PollOnce(context.Background())
	require.Equal(t, 2, n, "a panic fails the batch: nothing deleted")
	c.Advance(31 * time.Second)
	n, _ = p.PollOnce(context.Background())
	require.Equal(t, 2, n, "a nil batchItemFailures fails the batch too")
	require.Equal(t, 3, p.Stats().HandlerErrors, "the panic and both nil lists")
	require.Zero(t, p.Stats().Deleted)
}

// A batch received for an instance that died while the receive was out is
// never handed to a handler: it is told to Abandoned (the local runs blame
// its orders' failures on the kill) and comes back after its visibility
// timeout, its receives counted.
func TestABatchReceivedForADeadInstanceIsAbandoned(t *testing.T) {
	t.Parallel()
	handled := 0
	p, q, url, c := setup(t, func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		handled++
		return ok(), nil
	})
	var abandoned []string
	p.Abandoned = func(msgs []sas.InboundMessage) {
		for _, m := range msgs {
			abandoned = append(abandoned, m.Body)
		}
	}
	send(t, q, url, "one", "two")
	dead, kill := context.WithCancel(context.Background())
	kill()
	n, err := p.PollOnce(dead)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Zero(t, handled, "no handler for a dead instance")
	require.ElementsMatch(t, []string{"one", "two"}, abandoned)
	require.Equal(t, 2, p.Stats().Abandoned)

	c.Advance(31 * time.Second)
	msgs, err := q.Receive(context.Background(), sas.ReceiveParams{QueueURL: url, Max: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	require.Equal(t, 2, msgs[0].ReceiveCount, "the abandoned receive counted")
}
