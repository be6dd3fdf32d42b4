package scheduler_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/testkit/emulator"
	"github.com/sas-go/sas/internal/testkit/storetest"
)

// dynamoStore is a DynamoDB store on DynamoDB Local, fresh tables, whose
// transactions can be made to conflict (storetest.Conflicting).
func dynamoStore(t *testing.T) (*dynamostore.Store, *storetest.Conflicting) {
	t.Helper()
	cfg := emulator.Require(t)
	client := dynamodb.NewFromConfig(cfg, awsenv.DynamoDBOptions)
	tc := dynamostore.Config{OrdersTable: emulator.UniqueName(t, "orders"), StateTable: emulator.UniqueName(t, "state"), Shards: 4}
	require.NoError(t, dynamostore.CreateTables(t.Context(), client, tc))
	t.Cleanup(func() {
		for _, name := range []string{tc.OrdersTable, tc.StateTable} {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	tx := &storetest.Conflicting{DynamoAPI: client}
	ds, err := dynamostore.New(tx, tc)
	require.NoError(t, err)
	return ds, tx
}

// N3: on DynamoDB, a transaction the scheduler makes can be cancelled by
// another in flight on the same order (a stale duplicate done, an
// operator's compensate): TransactionConflict. That decides nothing, so the
// message is redelivered and its redelivery makes the write, on every
// path whose write is a transaction: the intake's submission, a done
// reply's completion with its successor's claim, a refusal's first undo
// claim (fenced on its siblings; once acknowledged as "started elsewhere",
// leaving the order never compensated), and an undo's completion with the
// next undo's claim. Served by DynamoDB Local but for the conflict itself,
// which it never answers (storetest.Conflicting).
func TestN3AConflictingTransactionIsRedeliveredNotAcknowledged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ds, tx := dynamoStore(t)
	svc := f.newServiceConfig(owner, mustDefault(t), sas.AgentQueues{Default: f.agentURL}, func(c *scheduler.Config) { c.Store = ds })
	f.h = scheduler.NewHandler(svc)
	states := func() []sas.ProcessState {
		v, err := ds.GetOrder(f.ctx, "o-n3")
		require.NoError(t, err)
		storetest.RequireLegalHistory(t, v)
		var out []sas.ProcessState
		for _, r := range v.Steps {
			out = append(out, r.ProcessState)
		}
		return out
	}
	// conflictOnce delivers body with the order's next transaction
	// cancelled: the message must fail, nothing be sent, and its
	// redelivery go through.
	conflictOnce := func(body string) {
		t.Helper()
		tx.Arm("o-n3", 1)
		require.Len(t, f.handle(f.event(body)), 1, "a conflict is redelivered")
		require.Empty(t, f.requests(), "nothing sent for a write not made")
		f.deliver(body)
	}

	conflictOnce(intake("o-n3", "order", f.replyURL))
	reserve := f.request()
	conflictOnce(done(reserve))
	charge := f.request()
	require.Equal(t, 1, charge.Step)
	f.deliver(done(charge))
	ship := f.request()
	conflictOnce(reply(ship, sas.OutcomeFailed, "no carrier"))
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Compensating, sas.Error}, states(), "the undo is claimed")
	refund := f.request()
	require.True(t, refund.Compensation)
	require.Equal(t, 1, refund.Step)
	conflictOnce(done(refund))
	cancel := f.request()
	require.Equal(t, 0, cancel.Step)
	f.deliver(done(cancel))
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Error}, states())
	require.Contains(t, statusList(f.statuses()), "compensated#15000")
}

func mustDefault(t *testing.T) sas.Registry {
	t.Helper()
	reg, err := registry.Default(stepTimeout)
	require.NoError(t, err)
	return reg
}
