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
		"SAS_AGENT_ALLOW_HTTP":    "true",
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
		"SAS_AGENT_BASE_URL":      "https://127.0.0.1:9/flights",
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

// Outside an emulator the service is https: an http base URL stops the cold
// start unless SAS_AGENT_ALLOW_HTTP says this is a local run.
func TestBuildRefusesHTTPWithoutTheFlag(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
	env := map[string]string{
		"SAS_SCHEDULER_QUEUE_URL": "http://127.0.0.1:9/000000000000/scheduler",
		"SAS_AGENT_BASE_URL":      "http://payments.internal",
	}
	_, err := build(t.Context(), func(k string) string { return env[k] })
	require.ErrorContains(t, err, "https:// services only")
	require.ErrorContains(t, err, "SAS_AGENT_ALLOW_HTTP=true")
	env["SAS_AGENT_ALLOW_HTTP"] = "true"
	_, err = build(t.Context(), func(k string) string { return env[k] })
	require.NoError(t, err)
}

// The auth header's secret is read at cold start; one that cannot be read
// stops it, naming the variable and the ARN.
func TestBuildReadsTheAuthSecret(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9") // nothing listens: the read fails
	t.Setenv("AWS_MAX_ATTEMPTS", "1")
	arn := "arn:aws:secretsmanager:us-east-1:000000000000:secret:payments-token-AbCdEf"
	env := map[string]string{
		"SAS_SCHEDULER_QUEUE_URL": "http://127.0.0.1:9/000000000000/scheduler",
		"SAS_AGENT_BASE_URL":      "https://payments.example",
		"SAS_AGENT_AUTH_SECRET":   arn,
	}
	_, err := build(t.Context(), func(k string) string { return env[k] })
	require.ErrorContains(t, err, "SAS_AGENT_AUTH_SECRET")
	require.ErrorContains(t, err, arn)

	env["SAS_AGENT_AUTH_SECRET"] = "payments-token"
	_, err = build(t.Context(), func(k string) string { return env[k] })
	require.ErrorContains(t, err, "not an ARN")
}
