package sastest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/sastest"
	"github.com/sas-go/sas/workflow"
)

// checkout: a payment whose provider confirms by webhook (a callback step
// with an agent: the agent starts the payment and hands the provider the
// token), then the shipment.
var checkout = []workflow.Workflow{{Name: "checkout", Steps: []workflow.Step{
	{Name: "pay", Agent: "payments", Action: "pay", Undo: "refund", Timeout: workflow.Duration(10 * time.Second),
		Callback: &workflow.Callback{Timeout: workflow.Duration(24 * time.Hour)}},
	{Name: "ship", Agent: "payments", Action: "ship", Timeout: workflow.Duration(10 * time.Second)},
}}}

// The provider answers the token the agent received: at once, before the
// agent's own answer, with its result, which the shipment sees; or it
// declines, and the payment's undo runs (the work may have started).
func TestTheOutsideWorldAnswersTheTokenAnAgentReceived(t *testing.T) {
	t.Parallel()
	var env *sastest.Env
	var tokens []string
	var refunded []string
	decline := map[string]bool{"c-2": true}
	pay := agent.New("payments").Step("pay", func(_ context.Context, req agent.Request) (any, error) {
		tokens = append(tokens, req.Token)
		a := sastest.Answer{Result: map[string]string{"paymentId": "p-" + req.OrderID}}
		if decline[req.OrderID] {
			a = sastest.Answer{Fail: "card declined", Reject: true}
		}
		env.Complete(req.Token, a) // the provider's webhook, before this answer
		return map[string]string{"started": "yes"}, nil
	}, func(_ context.Context, req agent.Request) (any, error) {
		require.Empty(t, req.Token, "an undo carries no token")
		refunded = append(refunded, req.OrderID)
		return nil, nil
	}).Step("ship", func(_ context.Context, req agent.Request) (any, error) {
		var p struct {
			ID string `json:"paymentId"`
		}
		if err := req.DecodeResult("pay", &p); err != nil {
			return nil, err
		}
		if p.ID == "" {
			return nil, errors.New("no payment id")
		}
		return nil, nil
	}, nil)
	env = sastest.New(t, checkout, pay)

	res := env.Run("checkout", "c-1", nil)
	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.JSONEq(t, `{"paymentId":"p-c-1"}`, string(res.Results["pay"]), "the completion's result, not the agent's")
	require.Len(t, tokens, 1)
	require.NotEmpty(t, tokens[0])

	res = env.Run("checkout", "c-2", nil)
	require.Equal(t, sastest.StatusRejected, res.Status)
	require.Equal(t, []string{"c-2"}, refunded, "the declined payment is undone: its agent started it")
}
