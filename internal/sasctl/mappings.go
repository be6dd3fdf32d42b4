package sasctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// LambdaAPI is the part of the Lambda client a LambdaMappings uses.
type LambdaAPI interface {
	ListEventSourceMappings(ctx context.Context, in *lambda.ListEventSourceMappingsInput, opts ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error)
	UpdateEventSourceMapping(ctx context.Context, in *lambda.UpdateEventSourceMappingInput, opts ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
}

var _ LambdaAPI = (*lambda.Client)(nil)

// LambdaMappings switches off and on the Lambda event source mappings that
// feed an agent's function from its queues: in a deployment, that is what
// pausing an agent stops (docs/console.md, "Pausing an agent"). Locally the
// pollers read the pause record instead. It is the MappingSwitch a deployed
// sasctl uses.
type LambdaMappings struct {
	Lambda LambdaAPI
	// QueueARN turns a queue URL into its ARN (sqsqueue.Queue.QueueARN).
	QueueARN func(ctx context.Context, url string) (string, error)
}

// Set enables or disables every event source mapping reading from the
// queues, and says which it changed ("UUID (function)"). A queue no mapping
// reads is not an error: there may be none (an agent hosted elsewhere).
func (s LambdaMappings) Set(ctx context.Context, queueURLs []string, enabled bool) ([]string, error) {
	var changed []string
	for _, url := range queueURLs {
		arn, err := s.QueueARN(ctx, url)
		if err != nil {
			return changed, err
		}
		var marker *string
		for {
			out, err := s.Lambda.ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{EventSourceArn: aws.String(arn), Marker: marker})
			if err != nil {
				return changed, fmt.Errorf("listing the event source mappings of %s: %w", arn, err)
			}
			for _, m := range out.EventSourceMappings {
				state := strings.ToLower(aws.ToString(m.State))
				if enabled == (state == "enabled" || state == "enabling") {
					continue
				}
				if _, err := s.Lambda.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: m.UUID, Enabled: aws.Bool(enabled)}); err != nil {
					return changed, fmt.Errorf("switching the event source mapping %s: %w", aws.ToString(m.UUID), err)
				}
				changed = append(changed, fmt.Sprintf("%s (%s)", aws.ToString(m.UUID), aws.ToString(m.FunctionArn)))
			}
			if marker = out.NextMarker; marker == nil || *marker == "" {
				break
			}
		}
	}
	return changed, nil
}
