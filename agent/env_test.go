package agent_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
)

func TestFromEnv(t *testing.T) {
	// Point the SDK at nothing: building must not need the network, and the
	// handler below sends nothing.
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
	a := agent.New("flights").Step("reserve-flight", func(context.Context, agent.Request) (any, error) { return nil, nil }, nil)

	_, err := agent.FromEnv(t.Context(), func(string) string { return "" }, a)
	require.ErrorContains(t, err, "SAS_SCHEDULER_QUEUE_URL")

	env := map[string]string{
		"SAS_SCHEDULER_QUEUE_URL":      "http://127.0.0.1:9/000000000000/scheduler",
		"SAS_AGENT_QUEUE_URL":          "http://127.0.0.1:9/000000000000/flights",
		"SAS_AGENT_PRIORITY_QUEUE_URL": "http://127.0.0.1:9/000000000000/flights-priority",
	}
	h, err := agent.FromEnv(t.Context(), func(k string) string { return env[k] }, a)
	require.NoError(t, err)
	resp, err := h.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: "not a request"}}})
	require.NoError(t, err)
	require.NotNil(t, resp.BatchItemFailures)
	require.Empty(t, resp.BatchItemFailures)

	_, err = agent.FromEnv(t.Context(), func(k string) string { return env[k] }, agent.New("flights").Step("", nil, nil))
	require.ErrorContains(t, err, "a step needs a name", "the agents' mistakes stop the cold start")
}
