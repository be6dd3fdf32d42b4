package storediff

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/memstore"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// The default run is sized for `make test` on two shared cores (-race):
// 50 sequences of about 50 operations. RAPID_CHECKS and RAPID_STEPS (or
// -rapid.checks, -rapid.steps) run more; -rapid.seed=N replays a failure.
// No fail files: a seed is the whole replay, and the tree stays clean.
func TestMain(m *testing.M) {
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	defaults := map[string]string{"rapid.checks": "50", "rapid.steps": "50", "rapid.nofailfile": "true"}
	for name, v := range defaults {
		env := "RAPID_" + strings.ToUpper(strings.TrimPrefix(name, "rapid."))
		if _, ok := os.LookupEnv(env); !set[name] && !ok {
			_ = flag.Set(name, v)
		}
	}
	os.Exit(m.Run())
}

// shards is small so that a handful of records fills index pages and
// per-shard limits bite.
const shards = 2

// TestDifferential applies random sequences of every StateStore operation
// to the in-memory store and to DynamoDB (Local) side by side on a fake
// clock, and requires after each one that both answered the same (records,
// errors by sentinel, the current record of a lost race) and hold the same
// (every field of every record of the orders it touched).
func TestDifferential(t *testing.T) {
	cfg := emulator.Require(t)
	client := dynamodb.NewFromConfig(cfg, awsenv.DynamoDBOptions)
	tc := dynamostore.Config{OrdersTable: emulator.UniqueName(t, "orders"), StateTable: emulator.UniqueName(t, "state"), Shards: shards}
	require.NoError(t, dynamostore.CreateTables(context.Background(), client, tc))
	t.Cleanup(func() {
		for _, name := range []string{tc.OrdersTable, tc.StateTable} {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	dyn, err := dynamostore.New(client, tc)
	require.NoError(t, err)

	start, ops, sequences := time.Now(), 0, 0
	t.Cleanup(func() {
		t.Logf("%d operations in %d sequences (shrinking included) in %s", ops, sequences, time.Since(start).Round(time.Millisecond))
		if t.Failed() {
			t.Logf("replay: go run ./cmd/rig exec -- go test -count=1 -run '^TestDifferential$' ./internal/testkit/storediff/ -args -rapid.seed=N (N as printed above)")
		}
	})
	rapid.Check(t, func(rt *rapid.T) {
		clearTables(rt, client, tc)
		m := newMachine(memstore.New(memstore.Config{Shards: shards}), dyn, &ops)
		rt.Repeat(m.actions())
		sequences++
	})
}

// clearTables empties both tables between sequences: cheaper than new
// tables, and the index queries must see this sequence's records alone.
func clearTables(t *rapid.T, db *dynamodb.Client, tc dynamostore.Config) {
	ctx := context.Background()
	for _, table := range []struct {
		name string
		keys []string
	}{{tc.OrdersTable, []string{"OrderID"}}, {tc.StateTable, []string{"OrderID", "Step"}}} {
		var start map[string]types.AttributeValue
		for {
			out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table.name), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true)})
			if err != nil {
				t.Fatalf("clearing %s: %v", table.name, err)
			}
			for i := 0; i < len(out.Items); i += 25 {
				var reqs []types.WriteRequest
				for _, it := range out.Items[i:min(i+25, len(out.Items))] {
					key := map[string]types.AttributeValue{}
					for _, k := range table.keys {
						key[k] = it[k]
					}
					reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: key}})
				}
				pending := map[string][]types.WriteRequest{table.name: reqs}
				for len(pending[table.name]) > 0 {
					res, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
					if err != nil {
						t.Fatalf("clearing %s: %v", table.name, err)
					}
					pending = res.UnprocessedItems
				}
			}
			if start = out.LastEvaluatedKey; len(start) == 0 {
				break
			}
		}
	}
}
