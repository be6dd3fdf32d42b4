package sastest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/workflow"
)

// One order, one trace (docs/observability.md): the trace context started
// at intake reaches every request, reply and status of the order, through
// a redelivered request (its first reply is lost) and a transient failure
// retried by a delayed request of the next attempt.
func TestOneOrderOneTrace(t *testing.T) {
	t.Parallel()
	defs := []workflow.Workflow{{Name: "greet", Steps: []workflow.Step{
		{Name: "gift", Agent: "shop", Action: "reserve", Undo: "release", Timeout: workflow.Duration(10 * time.Second)},
		{Name: "card", Agent: "mail", Action: "send", Timeout: workflow.Duration(10 * time.Second)},
	}}}
	ok := func(context.Context, agent.Request) (any, error) { return map[string]string{"ok": "yes"}, nil }
	e := New(t, defs,
		agent.New("shop").Step("gift", ok, ok),
		agent.New("mail").Step("card", ok, nil))
	e.Fail("card", 1, errors.New("503 from the mail service")) // transient: a next attempt

	type msg struct {
		Kind    sas.Kind `json:"kind"`
		OrderID string   `json:"orderId"`
		Step    int      `json:"step"`
		Attempt int      `json:"attempt"`
		Trace   string   `json:"trace"`
	}
	var mu sync.Mutex
	var msgs []msg
	lostReply := false
	e.mu.Lock()
	e.sent = func(_ string, m sas.OutboundMessage) *sas.SendFailure {
		var got msg
		if json.Unmarshal([]byte(m.Body), &got) != nil {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if got.Kind == sas.KindAgentReply && got.Step == 0 && !lostReply {
			lostReply = true // the agent leaves its request for redelivery
			return &sas.SendFailure{Code: "ServiceUnavailable", Message: "injected"}
		}
		msgs = append(msgs, got)
		return nil
	}
	e.mu.Unlock()

	res := e.Run("greet", "o-trace", nil)
	require.Equal(t, StatusProcessed, res.Status, "%+v", res)
	var calls []string
	for _, c := range res.Calls {
		calls = append(calls, c.String())
	}
	require.Equal(t, []string{"gift#1", "gift#1", "card#1 → 503 from the mail service", "card#1 → 503 from the mail service",
		"card#1 → 503 from the mail service", "card#2"}, calls,
		"the lost reply's request redelivered (the same attempt); the transient failure, after the agent's in-process tries, retried (the next)")

	v, err := e.store.GetOrder(e.ctx, "o-trace")
	require.NoError(t, err)
	trace := sas.TraceID(v.Order.Trace)
	require.NotEmpty(t, trace, "a trace started at intake and stored with the order")

	mu.Lock()
	defer mu.Unlock()
	kinds := map[sas.Kind]int{}
	spans := map[string]bool{}
	for _, m := range msgs {
		if m.Kind == sas.KindIntake {
			continue // the submitter's, which sends none: the scheduler starts one
		}
		require.Equal(t, "o-trace", m.OrderID)
		require.Equal(t, trace, sas.TraceID(m.Trace), "%s step %d attempt %d carries the order's trace", m.Kind, m.Step, m.Attempt)
		kinds[m.Kind]++
		spans[m.Trace] = true
	}
	require.Equal(t, 3, kinds[sas.KindAgentRequest], "gift, card attempt 1, card attempt 2 (delayed)")
	require.Equal(t, 4, kinds[sas.KindAgentReply], "gift's pick-up reported on its redelivery, gift (after it), card transient, card done")
	require.Positive(t, kinds[sas.KindStatus])
	require.Greater(t, len(spans), 3, "each message a span of its own")
}
