package agenthost_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// TestGoldenSQSEvent feeds the handler an event as Lambda delivers it
// (testdata/sqs-event.json): a charge, the undo of another order's charge,
// and a truncated message.
func TestGoldenSQSEvent(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/sqs-event.json")
	require.NoError(t, err)
	var ev events.SQSEvent
	require.NoError(t, json.Unmarshal(raw, &ev))
	require.Len(t, ev.Records, 3)

	r := newRig(t, rigOptions{})
	resp := r.handle(ev)
	require.Empty(t, resp.BatchItemFailures, "the truncated message is acknowledged, not retried")

	// What goes back to Lambda.
	out, err := json.Marshal(resp)
	require.NoError(t, err)
	require.JSONEq(t, `{"batchItemFailures":[]}`, string(out))

	reps := map[string]sas.AgentReply{}
	for _, rep := range r.replies() {
		reps[rep.OrderID] = rep
	}
	require.Len(t, reps, 2)
	for order, attempt := range map[string]int{"golden-1": 1, "golden-2": 2} {
		rep := reps[order]
		require.Equal(t, sas.OutcomeDone, rep.Outcome, order)
		require.Equal(t, attempt, rep.Attempt, order)
		require.Equal(t, 0, rep.Step, order)
		require.Equal(t, "scheduler-2030/01/02/[$LATEST]7f3a", rep.LockedBy, order)
	}
	// The golden requests come from a scheduler that sent no workflow or
	// replyTo: the replies echo what there was, and nothing more.
	for _, rep := range reps {
		require.Empty(t, rep.Workflow)
		require.Empty(t, rep.ReplyTo)
		require.Equal(t, "charge", rep.StepName)
		require.JSONEq(t, `{"amount":1250,"currency":"EUR"}`, string(rep.Payload))
	}
	require.False(t, reps["golden-1"].Compensation)
	require.True(t, reps["golden-2"].Compensation)
	require.Equal(t, "captured", resultField(t, reps["golden-1"], "status"))
	require.Equal(t, "refunded", resultField(t, reps["golden-2"], "status"))

	// The bytes the service received, under the keys the scheduler chose.
	charge := r.effectsFor("golden-1:0")
	require.Len(t, charge, 1)
	require.Equal(t, "/payments", charge[0].Path)
	require.Equal(t, `{"amount":1250,"currency":"EUR","orderId":"golden-1","step":"charge"}`, string(charge[0].Body))
	refund := r.effectsFor("golden-2:0:undo")
	require.Len(t, refund, 1)
	require.Equal(t, "/refunds", refund[0].Path)

	require.Contains(t, r.logs.String(), `"messageId":"b7e4c1d0-5a2f-4c4e-9d3b-0a1f2e3d4c5b"`)
	require.Contains(t, r.logs.String(), "malformed request")
}
