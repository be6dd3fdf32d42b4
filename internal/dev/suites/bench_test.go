package suites_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/awscount"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

const (
	benchOrders = 200 // single-step orders per iteration
	// Scheduler and agent "Lambda instances" per queue: the System's
	// default. More is slower on the rig, not faster: every poller's idle
	// long polls take a share of the SQS emulator (on a 2-CPU machine,
	// about 18, 30, 15 and 13 orders/s with 1, 2, 4 and 8).
	benchInstances = 2
	// The emulator's bound is measured with this many conditional writes
	// from this many goroutines.
	rigWrites      = 2000
	rigWriters     = 32
	rigSQSCycles   = 200 // send, receive, delete: three requests each
	rigSQSWorkers  = 8
	benchBatchSize = 10 // orders per SendMessageBatch, as an application would
)

// BenchmarkEndToEnd pushes single-step orders through the live System (every
// poller and the supervisor running) on the local rig and reports throughput
// and latency, submit to Processed (all orders are submitted at once, so the
// latency is mostly queueing). In the same run it measures the rig's own
// bound: DynamoDB Local's conditional-write throughput divided by the
// conditional writes one order makes (rig_bound_orders_per_s), and the same
// for the SQS emulator's request rate over the SQS requests one order made,
// idle polls included (rig_sqs_<emulator>_bound_orders_per_s), so orders/s
// can be read against the emulators' ceilings.
func BenchmarkEndToEnd(b *testing.B) {
	emulator.Require(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	counter := awscount.New("IdxPK", "IdxSK")
	sys, err := localrun.Start(ctx, localrun.Options{Counter: counter, Instances: benchInstances, StepTimeout: 30 * time.Second, PickupTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer sys.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { sys.Run(runCtx); close(done) }()
	stopped := false
	halt := func() {
		if !stopped {
			stop()
			<-done
			stopped = true
		}
	}
	defer halt()

	var latencies []time.Duration
	var elapsed time.Duration
	before := counter.Snapshot()
	orders := 0
	for i := 0; b.Loop(); i++ {
		lat, took := benchIteration(ctx, b, sys, i)
		latencies = append(latencies, lat...)
		elapsed += took
		orders += benchOrders
	}
	d := counter.Snapshot().Sub(before)
	var msgs, invocations int
	for _, p := range sys.Pollers {
		st := p.Stats()
		msgs += st.Messages
		invocations += st.Invocations
	}
	b.Logf("%d orders; AWS requests (idle polls included): %s", orders, d)
	writesPerOrder := float64(dynamoWrites(d)) / float64(orders)
	// Idle long polls included: they load the emulator as much as busy ones.
	sqsPerOrder := float64(d.Total("SQS")) / float64(orders)

	// The rig's own bound, measured with the system stopped: its idle long
	// polls would take a share of the SQS emulator.
	halt()
	writesPerSecond, err := conditionalWriteRate(ctx, sys.AWS)
	if err != nil {
		b.Fatal(err)
	}
	sqsPerSecond, err := sqsRequestRate(ctx, sys.AWS)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(orders)/elapsed.Seconds(), "orders/s")
	b.ReportMetric(float64(percentile(latencies, 50).Milliseconds()), "p50_ms")
	b.ReportMetric(float64(percentile(latencies, 99).Milliseconds()), "p99_ms")
	b.ReportMetric(float64(msgs)/float64(max(invocations, 1)), "msgs/invocation")
	b.ReportMetric(writesPerOrder, "ddb_writes/order")
	b.ReportMetric(writesPerSecond, "rig_cond_writes/s")
	b.ReportMetric(writesPerSecond/writesPerOrder, "rig_bound_orders_per_s")
	// The SQS emulator's bound, the same way: its request rate (send,
	// receive, delete in equal parts) over the SQS requests one order made.
	// The units name the emulator: the figures differ tenfold between them.
	sqsName := sqsEmulator()
	b.Logf("SQS served by %s: %.0f requests/s", sqsName, sqsPerSecond)
	b.ReportMetric(sqsPerOrder, "sqs_requests/order")
	b.ReportMetric(sqsPerSecond, "rig_sqs_"+sqsName+"_requests/s")
	b.ReportMetric(sqsPerSecond/sqsPerOrder, "rig_sqs_"+sqsName+"_bound_orders_per_s")
}

// sqsEmulator names what serves SQS for metric units: "elasticmq", "moto"
// (from the rig's SAS_EMULATOR_NAME, "dynamodb-local+elasticmq"), else the
// emulator package's description with the characters units cannot hold
// replaced.
func sqsEmulator() string {
	name := emulator.Name()
	if _, sqs, ok := strings.Cut(name, "+"); ok {
		name = sqs
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, name)
}

// benchIteration submits benchOrders orders in batches and waits for the
// scheduler to have handled one reply per order. It returns each order's
// latency (submit to the Processed transition, from the step's history) and
// the time from the first send to the last completion.
func benchIteration(ctx context.Context, b *testing.B, sys *localrun.System, iter int) ([]time.Duration, time.Duration) {
	b.Helper()
	handled := func() int {
		n := 0
		for _, p := range sys.Pollers {
			if p.QueueURL == sys.Config.SchedulerQueueURL {
				n += p.Stats().Deleted
			}
		}
		return n
	}
	base := handled()
	sentAt := map[string]time.Time{}
	var ids []string
	start := time.Now()
	for first := 0; first < benchOrders; first += benchBatchSize {
		var batch []sas.Intake
		for i := first; i < min(first+benchBatchSize, benchOrders); i++ {
			id := fmt.Sprintf("bench-%d-%d", iter, i)
			ids = append(ids, id)
			batch = append(batch, sas.Intake{OrderID: id, Workflow: registry.Payment, Payload: []byte(`{"amount":10}`)})
		}
		now := time.Now()
		if err := sys.Submit(ctx, batch...); err != nil {
			b.Fatal(err)
		}
		for _, in := range batch {
			sentAt[in.OrderID] = now
		}
	}
	// One reply handled per single-step order (no faults: no retries). The
	// poller's counters are in-process: watching them adds no load.
	for handled()-base < benchOrders {
		if ctx.Err() != nil {
			b.Fatalf("%d of %d orders handled: %v", handled()-base, benchOrders, ctx.Err())
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.StopTimer()
	defer b.StartTimer()
	lat := make([]time.Duration, 0, len(ids))
	var last time.Time
	for _, id := range ids {
		v, err := sys.Store.GetOrder(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if v.State() != sas.Processed {
			b.Fatalf("order %s is %s: %+v", id, v.State(), v.Steps)
		}
		doneAt := processedAt(v)
		lat = append(lat, doneAt.Sub(sentAt[id]))
		if doneAt.After(last) {
			last = doneAt
		}
	}
	return lat, last.Sub(start)
}

func processedAt(v sas.OrderView) time.Time {
	var at time.Time
	for _, h := range v.History {
		if h.To == sas.Processed && h.At.After(at) {
			at = h.At
		}
	}
	return at
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(0, min(i-1, len(sorted)-1))]
}

// dynamoWrites counts the DynamoDB write requests (each one conditional on
// the hot path).
func dynamoWrites(s awscount.Snapshot) int {
	return s.Requests["DynamoDB.TransactWriteItems"] + s.Requests["DynamoDB.UpdateItem"] + s.Requests["DynamoDB.PutItem"] + s.Requests["DynamoDB.DeleteItem"]
}

// conditionalWriteRate measures the emulator's throughput of conditional
// UpdateItems on distinct items, from many goroutines (no contention: the
// best case for the emulator, so the bound is generous).
func conditionalWriteRate(ctx context.Context, cfg aws.Config) (float64, error) {
	db := dynamodb.NewFromConfig(cfg, awsenv.DynamoDBOptions)
	table := "sas-rigbench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &table,
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		return 0, fmt.Errorf("creating the rig table: %w", err)
	}
	defer func() {
		_, _ = db.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: &table})
	}()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, rigWriters)
	start := time.Now()
	for range rigWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > rigWrites {
					return
				}
				// Like a claim: conditional on the item not being held.
				_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName:                 &table,
					Key:                       map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: strconv.FormatInt(i, 10)}},
					UpdateExpression:          aws.String("SET #lb = :me, #at = :one"),
					ConditionExpression:       aws.String("attribute_not_exists(#lb)"),
					ExpressionAttributeNames:  map[string]string{"#lb": "LockedBy", "#at": "Attempt"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":me": &types.AttributeValueMemberS{Value: "bench"}, ":one": &types.AttributeValueMemberN{Value: "1"}},
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("conditional write: %w", err)
	}
	return float64(rigWrites) / took.Seconds(), nil
}

// sqsRequestRate measures the SQS emulator's request rate on the hot path's
// mix: each worker sends one message, receives one and deletes it, so the
// queue stays short (as it does when the pipeline keeps up).
func sqsRequestRate(ctx context.Context, cfg aws.Config) (float64, error) {
	c := sqs.NewFromConfig(cfg)
	q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("sas-rigbench-" + strconv.FormatInt(time.Now().UnixNano(), 36))})
	if err != nil {
		return 0, fmt.Errorf("creating the rig queue: %w", err)
	}
	defer func() { _, _ = c.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) }()
	var next, requests atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, rigSQSWorkers)
	start := time.Now()
	for range rigSQSWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= rigSQSCycles {
				if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(`{"v":1,"kind":"agent.reply","orderId":"bench"}`)}); err != nil {
					errs <- err
					return
				}
				requests.Add(1)
				out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 1, VisibilityTimeout: 60})
				if err != nil {
					errs <- err
					return
				}
				requests.Add(1)
				for _, m := range out.Messages {
					if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: q.QueueUrl, ReceiptHandle: m.ReceiptHandle}); err != nil {
						errs <- err
						return
					}
					requests.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, fmt.Errorf("sqs request: %w", err)
	}
	return float64(requests.Load()) / took.Seconds(), nil
}
