package completion_test

import (
	"context"
	"fmt"

	"github.com/sas-go/sas/completion"
)

// printer stands in for completion.SQS(client).
type printer struct{}

func (printer) Send(_ context.Context, queueURL, body string) error {
	fmt.Println(queueURL, body)
	return nil
}

func ExampleClient_Complete() {
	c := completion.New(printer{}, "https://sqs.eu-west-1.amazonaws.com/123456789012/sas-intake")
	c.Actor = "alice"
	// The token comes from the step's waiting status.
	if err := c.Complete(context.Background(), "eyJv...~v2.k3Jm.X4_u", map[string]any{"approved": true}); err != nil {
		fmt.Println(err)
	}
	// Output: https://sqs.eu-west-1.amazonaws.com/123456789012/sas-intake {"v":1,"kind":"complete","token":"eyJv...~v2.k3Jm.X4_u","outcome":"done","result":{"approved":true},"actor":"alice"}
}

func ExampleMessage_Body() {
	_, err := completion.Message{Token: "t", Outcome: completion.Heartbeat, Result: []byte(`{}`)}.Body()
	fmt.Println(err)
	// Output: completion not valid: invalid result: only a done completion carries a result
}
