package sqsqueue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/emulator"
	"github.com/sas-go/sas/internal/queuetest"
	"github.com/sas-go/sas/internal/sqsqueue"
)

// TestQueueContract runs the queue contract against SQS: the emulator the rig
// started, or whatever AWS_ENDPOINT_URL_SQS points at, or AWS.
func TestQueueContract(t *testing.T) {
	t.Parallel()
	cfg := emulator.Require(t)
	q := sqsqueue.New(sqs.NewFromConfig(cfg))
	name := emulator.Name()
	queuetest.Run(t, queuetest.Backend{
		Name: backendName(name),
		New: func(t *testing.T, s queuetest.Spec) queuetest.Fixture {
			qname := emulator.UniqueName(t, "q")
			created, err := q.CreateQueue(t.Context(), sqsqueue.CreateQueueParams{Name: qname, MaxReceiveCount: s.MaxReceiveCount})
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
		// moto 5.2.5 lets a receipt from an earlier receive change the
		// visibility of a message received again since (it matches every
		// receipt the message ever had); SQS refuses that receipt.
		AcceptsSupersededReceipt: strings.Contains(name, "moto"),
	})
}

// backendName names the subtests by what serves SQS: sqs-moto, sqs-aws, ...
func backendName(emulatorName string) string {
	if strings.Contains(emulatorName, "moto") {
		return "sqs-moto"
	}
	return "sqs-" + strings.NewReplacer("/", "-", ":", "-").Replace(emulatorName)
}
