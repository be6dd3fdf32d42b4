package dynamostore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/emulator"
	"github.com/sas-go/sas/internal/testkit/storetest"
)

// counting wraps the client and counts, below the store, the requests it
// sends and the items DynamoDB reports it read (ScannedCount).
type counting struct {
	*dynamodb.Client
	requests, items atomic.Int64
}

func (c *counting) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.requests.Add(1)
	out, err := c.Client.Query(ctx, in, opts...)
	if err == nil {
		c.items.Add(int64(out.ScannedCount))
	}
	return out, err
}

func (c *counting) stats() sas.ReadStats {
	return sas.ReadStats{Requests: int(c.requests.Load()), ItemsRead: int(c.items.Load())}
}

func TestContract(t *testing.T) {
	cfg := emulator.Require(t)
	client := dynamodb.NewFromConfig(cfg, awsenv.DynamoDBOptions)
	t.Run(emulatorName(), func(t *testing.T) {
		storetest.Run(t, storetest.Harness{New: func(t *testing.T) storetest.Fixture {
			tc := Config{OrdersTable: emulator.UniqueName(t, "orders"), StateTable: emulator.UniqueName(t, "state"), Shards: 8}
			require.NoError(t, CreateTables(context.Background(), client, tc))
			t.Cleanup(func() {
				for _, name := range []string{tc.OrdersTable, tc.StateTable} {
					_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
				}
			})
			c := &counting{Client: client}
			tx := &storetest.Conflicting{DynamoAPI: c}
			st, err := New(tx, tc)
			require.NoError(t, err)
			return storetest.Fixture{Store: st, Shards: tc.Shards, Counted: c.stats, Conflict: func(id string) { tx.Arm(id, 1) },
				Load: func(ctx context.Context, recs []sas.StepRecord) error { return load(ctx, client, tc.StateTable, recs) }}
		}, Large: largeTable(t)})
	})
}

// largeTable is the sweep-cost test's big table: storetest's default, or
// SAS_STORE_CONTRACT_LARGE records. Loading the default 100,000 takes
// seconds on DynamoDB Local and minutes through LocalStack's proxy in
// front of it (make contract-localstack sets 10,000).
func largeTable(t *testing.T) int {
	v := os.Getenv("SAS_STORE_CONTRACT_LARGE")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "SAS_STORE_CONTRACT_LARGE")
	return n
}

// emulatorName names the subtests after where the store runs: the rig's
// "dynamodb-local+moto" is DynamoDB Local as far as the store is concerned.
func emulatorName() string {
	if n := emulator.Name(); n != "" {
		return strings.TrimSuffix(n, "+moto")
	}
	return "dynamodb"
}

// load bulk-writes records with BatchWriteItem, several batches at once.
func load(ctx context.Context, db *dynamodb.Client, table string, recs []sas.StepRecord) error {
	batches := make(chan []sas.StepRecord)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				reqs := make([]types.WriteRequest, len(b))
				for i, r := range b {
					reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: stepItem(r)}}
				}
				pending := map[string][]types.WriteRequest{table: reqs}
				for tries := 0; len(pending[table]) > 0; tries++ {
					if tries == 20 {
						errs <- fmt.Errorf("batch write: %d items still unprocessed", len(pending[table]))
						return
					}
					out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
					if err != nil {
						errs <- fmt.Errorf("batch write: %w", err)
						return
					}
					pending = out.UnprocessedItems
				}
			}
		}()
	}
	for i := 0; i < len(recs); i += 25 {
		batches <- recs[i:min(i+25, len(recs))]
	}
	close(batches)
	wg.Wait()
	close(errs)
	return <-errs
}
