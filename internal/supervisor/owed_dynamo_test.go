package supervisor

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// TestGiveUpEffectsSurviveACrashOnDynamoDB: the kill right after the
// give-up write, on DynamoDB Local: the owed entry the write left in the
// index is what a later supervisor finds, sends and settles.
func TestGiveUpEffectsSurviveACrashOnDynamoDB(t *testing.T) {
	t.Parallel()
	cfg := emulator.Require(t)
	client := dynamodb.NewFromConfig(cfg, awsenv.DynamoDBOptions)
	tc := dynamostore.Config{OrdersTable: emulator.UniqueName(t, "orders"), StateTable: emulator.UniqueName(t, "state"), Shards: 4}
	require.NoError(t, dynamostore.CreateTables(t.Context(), client, tc))
	t.Cleanup(func() {
		for _, name := range []string{tc.OrdersTable, tc.StateTable} {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	ds, err := dynamostore.New(client, tc)
	require.NoError(t, err)

	e := newEnv(t)
	cs := &crashStore{hookStore: &hookStore{StateStore: ds}}
	sup := func() *Supervisor {
		return e.supervisor(t, func(c *Config) { c.MaxFailures = 1; c.Store = cs })
	}
	now := e.clock.Now()
	for _, id := range []string{"o-d1", "o-d2"} {
		_, err = ds.Submit(t.Context(), sas.SubmitParams{Order: testOrder(id, 1), Now: now, PickupBy: now.Add(time.Minute),
			Claim: &sas.ClaimParams{Owner: "sched-1", CompleteBy: now.Add(stepTimeout)}})
		require.NoError(t, err)
		_, err = ds.Start(t.Context(), sas.StartParams{Key: key(id, 0), From: sas.Processing, Owner: "sched-1", Attempt: 1,
			Now: now, CompleteBy: now.Add(stepTimeout)})
		require.NoError(t, err)
	}
	e.clock.Set(T0.Add(stepTimeout))
	cs.afterGiveUp.Store(true)
	require.True(t, runCrashing(t, sup()), "killed after the first give-up write")
	require.Empty(t, e.alerts.Alerts())
	require.Empty(t, e.queue.take(t))

	// The next sweep gives up on the other step and sends its effects; the
	// killed run's give-up is not yet due for a re-send.
	rep := runOnce(t, sup())
	require.Equal(t, 1, rep.GaveUp)
	require.Equal(t, 1, rep.Awaiting)
	require.Len(t, e.alerts.Alerts(), 1)

	e.clock.Advance(DefaultOwedRetry)
	rep = runOnce(t, sup())
	require.Equal(t, 1, rep.Redriven)
	require.Equal(t, 1, rep.Awaiting)
	// The scheduler starts both compensations: it settles both give-ups.
	for _, id := range []string{"o-d1", "o-d2"} {
		_, err := ds.Settle(t.Context(), sas.SettleParams{Key: key(id, 0), State: sas.Error, Attempt: 1})
		require.NoError(t, err)
	}
	e.clock.Advance(time.Hour)
	require.Zero(t, runOnce(t, sup()).Redriven)

	ids := map[string]int{}
	for _, a := range e.alerts.Alerts() {
		ids[a.ID]++
	}
	require.Equal(t, map[string]int{"o-d1/0/Error/1": 1, "o-d2/0/Error/1": 1}, ids, "one alert per give-up")
	comp := map[string]int{}
	for _, m := range e.queue.take(t) {
		require.Equal(t, sas.KindCompensate, m.Kind)
		comp[m.Compensate.OrderID]++
	}
	require.Equal(t, map[string]int{"o-d1": 1, "o-d2": 1}, comp, "one compensate request per give-up")
	for _, id := range []string{"o-d1", "o-d2"} {
		v, err := ds.GetOrder(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, sas.Error, v.Steps[0].ProcessState)
		require.Empty(t, v.Steps[0].Owes)
	}
}
