package rig

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/awsenv"
)

// TestEmulators starts the real emulators through the Go API (installing
// them on first use), drives them with the AWS SDK through the environment
// the rig hands out, and checks that Stop leaves nothing running. It fails,
// never skips, when they cannot start; SAS_NO_EMULATORS=1 skips it on purpose.
func TestEmulators(t *testing.T) {
	if os.Getenv("SAS_NO_EMULATORS") == "1" {
		t.Skip("SAS_NO_EMULATORS=1: skipping the test that starts DynamoDB Local, ElasticMQ and moto")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()

	begin := time.Now()
	// IgnoreEnvironment: under `rig exec` the outer emulators are already in
	// the environment, but this test is about starting our own: both SQS
	// emulators, the second beside the first.
	r, err := Start(ctx, Options{IgnoreEnvironment: true, Log: testLog{t}, SQS: []string{SQSElasticMQ, SQSMoto}})
	if err != nil {
		t.Fatalf("starting the emulators: %v", err)
	}
	t.Cleanup(r.Stop)
	t.Logf("emulators up in %s: DynamoDB %s, SQS (%s) %s, others %v", time.Since(begin).Round(time.Millisecond),
		r.DynamoDBEndpoint, r.SQSEmulator, r.SQSEndpoint, r.ExtraSQS)
	if r.SQSEmulator != SQSElasticMQ || r.ExtraSQS[SQSMoto] == "" {
		t.Fatalf("SQS emulator %q, others %v: want elasticmq serving SQS and moto beside it", r.SQSEmulator, r.ExtraSQS)
	}
	endpoints := []string{r.DynamoDBEndpoint, r.SQSEndpoint, r.ExtraSQS[SQSMoto]}
	for _, ep := range endpoints {
		if !strings.HasPrefix(ep, "http://127.0.0.1:") {
			t.Errorf("endpoint %q is not on 127.0.0.1", ep)
		}
	}

	// Configure the SDK exactly as code under `rig exec` would: from Env.
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	for _, kv := range r.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cfg, err := awsenv.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// DynamoDB Local's error responses carry a CRC32 that does not match
	// (docs/pattern.md §7); the DynamoDB client checks it apart from the generic
	// response checksums that awsenv turns off.
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	t.Run("DynamoDB", func(t *testing.T) { exerciseDynamoDB(ctx, t, db) })
	t.Run("SQS-elasticmq", func(t *testing.T) { exerciseSQS(ctx, t, sqs.NewFromConfig(cfg)) })
	t.Run("SQS-moto", func(t *testing.T) {
		exerciseSQS(ctx, t, sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(r.ExtraSQS[SQSMoto]) }))
	})

	pids := r.PIDs()
	if len(pids) != 3 {
		t.Fatalf("PIDs() = %v, want three", pids)
	}
	select {
	case <-r.Done():
		t.Fatalf("an emulator exited during the test: %v", r.Err())
	default:
	}
	r.Stop()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("emulator pid %d still exists after Stop (kill -0: %v)", pid, err)
		}
	}
	for _, ep := range endpoints {
		if resp, err := http.Get(ep); err == nil {
			resp.Body.Close()
			t.Errorf("%s still answers after Stop", ep)
		}
	}
	if _, err := os.Stat(r.LogDir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("log directory %s left behind (stat: %v)", r.LogDir(), err)
	}
}

func exerciseDynamoDB(ctx context.Context, t *testing.T, db *dynamodb.Client) {
	table := aws.String("rig-test")
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            table,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	put := func(v string) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: table,
			Item: map[string]ddbtypes.AttributeValue{
				"pk": &ddbtypes.AttributeValueMemberS{Value: "job-1"},
				"v":  &ddbtypes.AttributeValueMemberS{Value: v},
			},
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	}
	if err := put("first"); err != nil {
		t.Fatalf("conditional PutItem on a new key: %v", err)
	}
	err = put("second")
	var ccf *ddbtypes.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("conditional PutItem on an existing key: err = %v, want ConditionalCheckFailedException", err)
	}
	if got, ok := ccf.Item["v"].(*ddbtypes.AttributeValueMemberS); !ok || got.Value != "first" {
		t.Errorf("ReturnValuesOnConditionCheckFailure item = %#v, want v=first", ccf.Item)
	}
}

func exerciseSQS(ctx context.Context, t *testing.T, q *sqs.Client) {
	created, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("rig-test")})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: created.QueueUrl, MessageBody: aws.String("hello rig")}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	got, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, MaxNumberOfMessages: 1, WaitTimeSeconds: 2})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if len(got.Messages) != 1 || aws.ToString(got.Messages[0].Body) != "hello rig" {
		t.Fatalf("ReceiveMessage = %+v, want the one message sent", got.Messages)
	}
	if _, err := q.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: created.QueueUrl, ReceiptHandle: got.Messages[0].ReceiptHandle}); err != nil {
		t.Fatalf("DeleteMessage: %v", err)
	}
}

// testLog sends the rig's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
