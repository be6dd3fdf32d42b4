package agenthost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
)

// sendCounter counts the Send calls a memqueue gets: each is one SQS request
// (SendMessage or SendMessageBatch), which is what an order pays for.
func sendCounter() (*atomic.Int64, memqueue.Options) {
	var n atomic.Int64
	return &n, memqueue.Options{Fault: func(op memqueue.Op, _ string) error {
		if op == memqueue.OpSend {
			n.Add(1)
		}
		return nil
	}}
}

// The replies of a batch are sent together: one request for ten replies.
func TestRepliesOfABatchShareOneSend(t *testing.T) {
	t.Parallel()
	sends, opts := sendCounter()
	r := newServiceRig(t, opts)
	// A linger longer than the test: the ten replies go when the tenth is
	// ready, however the goroutines are scheduled.
	svc := r.service(agenthost.Config{ReplyLinger: time.Hour, Agents: payments(func(_ context.Context, req sas.AgentRequest) (json.RawMessage, error) {
		return json.RawMessage(`"ok ` + req.OrderID + `"`), nil
	})})
	var msgs []any
	for i := range 10 {
		msgs = append(msgs, request(fmt.Sprintf("order-b%d", i)))
	}
	resp := handleWith(t, svc, event(msgs...))
	require.Empty(t, resp.BatchItemFailures)
	require.Len(t, r.replies(), 10)
	require.Equal(t, int64(1), sends.Load(), "one SendMessageBatch for the whole batch")
}

// A call that is still running does not hold back the replies of the calls
// that finished: they wait at most a moment for each other, not for it.
func TestSlowCallDoesNotHoldBackOtherReplies(t *testing.T) {
	t.Parallel()
	sends, opts := sendCounter()
	r := newServiceRig(t, opts)
	release := make(chan struct{})
	// The default linger: the fast replies wait for each other a moment at
	// most, never for the slow call.
	svc := r.service(agenthost.Config{Agents: payments(func(ctx context.Context, req sas.AgentRequest) (json.RawMessage, error) {
		if req.OrderID == "order-slow" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return json.RawMessage(`"ok"`), nil
	})})
	msgs := []any{request("order-slow")}
	for i := range 4 {
		msgs = append(msgs, request(fmt.Sprintf("order-f%d", i)))
	}
	type handled struct {
		resp events.SQSEventResponse
		err  error
	}
	done := make(chan handled, 1)
	go func() {
		resp, err := svc.Handle(t.Context(), event(msgs...))
		done <- handled{resp, err}
	}()
	var got []sas.AgentReply
	require.Eventually(t, func() bool {
		got = append(got, r.replies()...)
		return len(got) == 4
	}, 5*time.Second, 10*time.Millisecond, "the fast replies go out while the slow call runs")
	close(release)
	h := <-done
	require.NoError(t, h.err)
	require.Empty(t, h.resp.BatchItemFailures)
	slow := r.replies()
	require.Len(t, slow, 1)
	require.Equal(t, "order-slow", slow[0].OrderID)
	// Two requests: the fast replies together, then the slow one (one more
	// if the machine is so loaded that a fast call ends past the linger).
	require.GreaterOrEqual(t, sends.Load(), int64(2))
	require.Less(t, sends.Load(), int64(len(msgs)), "fewer requests than replies")
}
