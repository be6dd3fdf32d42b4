package localrun

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// The run's verdict counts dead letters exactly, past the 10 one receive
// returns, per queue, and names each (issue: a cap of 10 per DLQ reported
// 10 where there were 35).
func TestDeadLettersAreCountedExactlyAndNamed(t *testing.T) {
	cfg := emulator.Require(t)
	ctx := t.Context()
	q := sqsqueue.New(sqs.NewFromConfig(cfg))
	dlqs := map[string]string{}
	for _, name := range []string{"agent", "control", "scheduler", "intake"} {
		created, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: emulator.UniqueName(t, name), MaxReceiveCount: 5})
		require.NoError(t, err)
		dlqs[name] = created.DLQURL
	}
	fill := func(url string, n int, body func(i int) string) {
		for i := 0; i < n; i += 10 {
			var msgs []sas.OutboundMessage
			for j := i; j < min(i+10, n); j++ {
				msgs = append(msgs, sas.OutboundMessage{ID: fmt.Sprint(j), Body: body(j)})
			}
			res, err := q.Send(ctx, sas.SendParams{QueueURL: url, Messages: msgs})
			require.NoError(t, err)
			require.Empty(t, res.Failed)
		}
	}
	fill(dlqs["agent"], 35, func(i int) string {
		return fmt.Sprintf(`{"v":1,"kind":"agent.request","orderId":"o-%d","step":1,"attempt":2}`, i)
	})
	fill(dlqs["intake"], 3, func(i int) string { return "not json" })
	fill(dlqs["scheduler"], 1, func(int) string {
		return `{"v":1,"kind":"retry","orderId":"o-r","step":0,"attempt":1,"sasRenewals":3,"sasRenewalSig":"x"}`
	})

	got, err := countDeadLetters(ctx, q, dlqs)
	require.NoError(t, err)
	require.Len(t, got, 3, "a DLQ with nothing in it (control) is not listed")
	require.Equal(t, "agent", got[0].Queue)
	require.Equal(t, 35, got[0].Count)
	require.Len(t, got[0].Messages, maxListed)
	require.Contains(t, got[0].Messages[0], "agent.request order o-")
	require.Contains(t, got[0].Messages[0], "step 1 attempt 2")
	require.Equal(t, "intake", got[1].Queue)
	require.Equal(t, 3, got[1].Count)
	require.Contains(t, got[1].Messages[0], "not JSON")
	require.Equal(t, "scheduler", got[2].Queue)
	require.Contains(t, got[2].Messages[0], "retry order o-r step 0 attempt 1, renewed 3 times, received", "its renewals, which tell a poison message from a good one let go")

	// The summary says how many went where, and fails the run.
	sum := Summary{DeadLettered: got, DeadLetters: 39}
	require.False(t, sum.OK())
	require.Contains(t, sum.Problem(), "39 messages went to a dead-letter queue (35 to agent's, 3 to intake's, 1 to scheduler's)")
	var b strings.Builder
	printSummary(&b, sum)
	require.Contains(t, b.String(), "35 dead-lettered from agent:")
	require.Contains(t, b.String(), "… and 15 more")

	// A DLQ that cannot be read fails the count, not silently zero.
	_, err = countDeadLetters(ctx, q, map[string]string{"gone": dlqs["agent"] + "-does-not-exist"})
	require.Error(t, err)
}
