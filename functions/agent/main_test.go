package main

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"
)

func TestBuildWiresAHandler(t *testing.T) {
	// Point the SDK at nothing: building must not need the network, and the
	// handler below sends nothing.
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
	env := map[string]string{
		"SAS_SCHEDULER_QUEUE_URL": "http://127.0.0.1:9/000000000000/scheduler",
		"SAS_PAYMENTS_URL":        "http://127.0.0.1:9",
	}
	handler, err := build(t.Context(), func(k string) string { return env[k] })
	require.NoError(t, err)

	resp, err := handler(t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: "not a request"}}})
	require.NoError(t, err)
	require.NotNil(t, resp.BatchItemFailures)
	require.Empty(t, resp.BatchItemFailures)
}

func TestBuildNamesMissingConfiguration(t *testing.T) {
	_, err := build(t.Context(), func(string) string { return "" })
	require.ErrorContains(t, err, "SAS_SCHEDULER_QUEUE_URL")
	require.ErrorContains(t, err, "SAS_PAYMENTS_URL")

	_, err = build(t.Context(), func(k string) string {
		return map[string]string{"SAS_SCHEDULER_QUEUE_URL": "http://q", "SAS_PAYMENTS_URL": "http://p", "SAS_STEP_TIMEOUT": "soon"}[k]
	})
	require.ErrorContains(t, err, "SAS_STEP_TIMEOUT")
}

// The served agent and its service come from SAS_AGENT_NAME and
// SAS_AGENT_BASE_URL; SAS_PAYMENTS_URL is no longer needed then.
func TestBuildServesTheNamedAgent(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
	env := map[string]string{
		"SAS_SCHEDULER_QUEUE_URL": "http://127.0.0.1:9/000000000000/scheduler",
		"SAS_AGENT_NAME":          "flights",
		"SAS_AGENT_BASE_URL":      "http://127.0.0.1:9/flights",
	}
	handler, err := build(t.Context(), func(k string) string { return env[k] })
	require.NoError(t, err)
	resp, err := handler(t.Context(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: "not a request"}}})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)

	env["SAS_AGENT_BASE_URL"] = "flights.local"
	_, err = build(t.Context(), func(k string) string { return env[k] })
	require.ErrorContains(t, err, "baseURL", "a bad base URL stops the cold start")
}
