package sasctl

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/stretchr/testify/require"
)

type fakeLambda struct {
	mappings []types.EventSourceMappingConfiguration
	updates  map[string]bool
}

func (f *fakeLambda) ListEventSourceMappings(_ context.Context, in *lambda.ListEventSourceMappingsInput, _ ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error) {
	var out []types.EventSourceMappingConfiguration
	for _, m := range f.mappings {
		if aws.ToString(m.EventSourceArn) == aws.ToString(in.EventSourceArn) {
			out = append(out, m)
		}
	}
	return &lambda.ListEventSourceMappingsOutput{EventSourceMappings: out}, nil
}

func (f *fakeLambda) UpdateEventSourceMapping(_ context.Context, in *lambda.UpdateEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error) {
	f.updates[aws.ToString(in.UUID)] = aws.ToBool(in.Enabled)
	return &lambda.UpdateEventSourceMappingOutput{}, nil
}

func TestSwitchesOnlyTheAgentsMappings(t *testing.T) {
	f := &fakeLambda{updates: map[string]bool{}, mappings: []types.EventSourceMappingConfiguration{
		{UUID: aws.String("a1"), EventSourceArn: aws.String("arn:q:payments"), State: aws.String("Enabled"), FunctionArn: aws.String("fn-payments")},
		{UUID: aws.String("a2"), EventSourceArn: aws.String("arn:q:payments-lane"), State: aws.String("Disabled"), FunctionArn: aws.String("fn-payments")},
		{UUID: aws.String("b1"), EventSourceArn: aws.String("arn:q:flights"), State: aws.String("Enabled"), FunctionArn: aws.String("fn-flights")},
	}}
	s := LambdaMappings{Lambda: f, QueueARN: func(_ context.Context, url string) (string, error) { return "arn:q:" + url, nil }}
	changed, err := s.Set(context.Background(), []string{"payments", "payments-lane"}, false)
	require.NoError(t, err)
	require.Equal(t, []string{"a1 (fn-payments)"}, changed, "the one already disabled is left alone")
	require.Equal(t, map[string]bool{"a1": false}, f.updates, "another agent's mapping is not touched")
}
