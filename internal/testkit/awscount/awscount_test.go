package awscount

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// TestCountsDynamoDBRequestsAndCapacity pins what the emulator reports for
// the hot-path writes of a single-step order, the numbers the cost budget
// is built on.
func TestCountsDynamoDBRequestsAndCapacity(t *testing.T) {
	cfg := emulator.Require(t)
	ctx := context.Background()
	c := New("IdxPK", "IdxSK")
	c.Attach(&cfg)
	db := dynamodb.NewFromConfig(cfg, awsenv.DynamoDBOptions)
	tc := dynamostore.Config{OrdersTable: emulator.UniqueName(t, "orders"), StateTable: emulator.UniqueName(t, "state"), Shards: 8}
	require.NoError(t, dynamostore.CreateTables(ctx, db, tc))
	st, err := dynamostore.New(db, tc)
	require.NoError(t, err)
	t0 := time.Now().UTC()

	before := c.Snapshot()
	_, err = st.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-1", Workflow: "payment", Payload: []byte(`{"amount":1}`), Steps: []string{"charge"}},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(30 * time.Second)}})
	require.NoError(t, err)
	submit := c.Snapshot().Sub(before)
	t.Logf("submit+claim: %s", submit)
	require.Equal(t, map[string]int{"DynamoDB.TransactWriteItems": 1}, submit.Requests)
	require.Equal(t, 5.0, submit.WCU, "2 items × 2 (transactional) + 1 index entry")
	require.Equal(t, 1.0, submit.IndexWCU)

	before = c.Snapshot()
	_, err = st.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-1"}, Owner: "s", Attempt: 1, Now: t0.Add(time.Second)})
	require.NoError(t, err)
	complete := c.Snapshot().Sub(before)
	t.Logf("complete: %s", complete)
	require.Equal(t, map[string]int{"DynamoDB.UpdateItem": 1}, complete.Requests)
	require.Equal(t, 2.0, complete.WCU, "the item, and removing its index entry")
	require.Equal(t, 1.0, complete.IndexWCU)
	require.Zero(t, complete.RCU+submit.RCU, "the hot path reads nothing")

	// Reads are counted as reads: DynamoDB Local reports only their total
	// CapacityUnits, which must not pass for writes (nor for nothing).
	before = c.Snapshot()
	_, err = st.GetOrder(ctx, "o-1")
	require.NoError(t, err)
	read := c.Snapshot().Sub(before)
	t.Logf("get order: %s", read)
	require.Equal(t, map[string]int{"DynamoDB.GetItem": 1, "DynamoDB.Query": 1}, read.Requests)
	require.Equal(t, 2.0, read.RCU, "two strongly consistent reads of items under 4 KB")
	require.Zero(t, read.WCU)
	require.Zero(t, read.ReportedWCU)
}
