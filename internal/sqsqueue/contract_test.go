package sqsqueue_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/rig"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/testkit/emulator"
	"github.com/sas-go/sas/internal/testkit/queuetest"
)

// TestQueueContract runs the queue contract against SQS: the emulator the rig
// started, or whatever AWS_ENDPOINT_URL_SQS points at, or AWS; and against
// every further SQS emulator the rig names in SAS_RIG_SQS_EXTRA (make test
// runs the suite on ElasticMQ and on moto).
func TestQueueContract(t *testing.T) {
	t.Parallel()
	cfg := emulator.Require(t)
	name := emulator.Name()
	runContract(t, sqs.NewFromConfig(cfg), backendName(name), quirks(name))

	extra, err := rig.ParseExtraSQS(os.Getenv(rig.EnvSQSExtra))
	require.NoError(t, err)
	for emu, endpoint := range extra {
		client := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
		runContract(t, client, backendName(emu), quirks(emu))
	}
}

func runContract(t *testing.T, client *sqs.Client, name string, quirks map[string]string) {
	q := sqsqueue.New(client)
	queuetest.Run(t, queuetest.Backend{
		Name: name,
		New: func(t *testing.T, s queuetest.Spec) queuetest.Fixture {
			qname := emulator.UniqueName(t, "q")
			created, err := q.CreateQueue(t.Context(), sas.CreateQueueParams{Name: qname, MaxReceiveCount: s.MaxReceiveCount})
			require.NoError(t, err)
			t.Cleanup(func() {
				// t.Context is already cancelled when cleanups run.
				for _, url := range []string{created.URL, created.DLQURL} {
					if url != "" {
						if err := q.DeleteQueue(context.Background(), url); err != nil {
							t.Logf("cleanup: %v", err)
						}
					}
				}
			})
			return queuetest.Fixture{
				Queue:      q,
				URL:        created.URL,
				DLQURL:     created.DLQURL,
				MissingURL: created.URL[:strings.LastIndex(created.URL, "/")+1] + qname + "-never-created",
			}
		},
		Quirks: quirks,
	})
}

// Where an emulator departs from SQS's documented behaviour, measured with
// this suite (docs/decisions.md, "Emulators"). Each departure is a quirk of
// the emulator, not a gap in the adapter: the adapter cannot absorb it
// without misreading what real SQS answers.
const (
	// SQS's DeleteMessage reference: with a receipt handle that is not the
	// most recent one, "the request will succeed, but the message might not
	// be deleted".
	elasticMQSupersededDelete = "ElasticMQ 1.7.1 answers DeleteMessage with a superseded receipt handle " +
		"with ReceiptHandleIsInvalid; SQS documents that such a delete succeeds (and might not delete the message)"
	// SQS refuses a superseded receipt with InvalidParameterValue ("not
	// available for visibility timeout change"), which the adapter reads as a
	// lost race; a malformed one with ReceiptHandleIsInvalid.
	elasticMQSupersededChangeVisibility = "ElasticMQ 1.7.1 answers ChangeMessageVisibility with a superseded receipt handle " +
		"with ReceiptHandleIsInvalid, as for a malformed one; SQS refuses it as a message not available for a visibility change, " +
		"which the adapter reports as a lost race"
	motoSupersededChangeVisibility = "moto 5.2.5 lets a receipt from an earlier receive change the visibility of a message " +
		"received again since (it matches every receipt the message ever had); SQS refuses that receipt"
	// Measured on LocalStack 2026.3.0 (rig localstack, localstack/README.md).
	localStackSupersededChangeVisibility = "LocalStack 2026.3.0 accepts ChangeMessageVisibility with a receipt from an earlier " +
		"receive of a message received again since; SQS refuses that receipt"
	// SQS's BatchResultErrorEntry: SenderFault "specifies whether the error
	// happened due to the caller of the batch API action".
	localStackBatchSenderFault = "LocalStack 2026.3.0 reports a malformed receipt in DeleteMessageBatch as ReceiptHandleIsInvalid " +
		"with SenderFault false; the caller sent it, and SQS marks such entries as the sender's fault"
)

func quirks(emulatorName string) map[string]string {
	switch {
	case strings.Contains(emulatorName, rig.SQSElasticMQ):
		return map[string]string{
			"StaleReceiptDelete":           elasticMQSupersededDelete,
			"DuplicateDelivery":            elasticMQSupersededDelete, // the first consumer deletes with its superseded receipt
			"StaleReceiptChangeVisibility": elasticMQSupersededChangeVisibility,
		}
	case strings.Contains(emulatorName, rig.SQSMoto):
		return map[string]string{"StaleReceiptChangeVisibility": motoSupersededChangeVisibility}
	case strings.Contains(emulatorName, "localstack"):
		return map[string]string{
			"StaleReceiptChangeVisibility": localStackSupersededChangeVisibility,
			"PerEntryFailures":             localStackBatchSenderFault,
		}
	}
	return nil // real SQS, MiniStack: the whole contract
}

// backendName names the subtests by what serves SQS: sqs-elasticmq,
// sqs-moto, sqs-aws, ...
func backendName(emulatorName string) string {
	for _, emu := range []string{rig.SQSElasticMQ, rig.SQSMoto} {
		if strings.Contains(emulatorName, emu) {
			return "sqs-" + emu
		}
	}
	return "sqs-" + strings.NewReplacer("/", "-", ":", "-").Replace(emulatorName)
}
