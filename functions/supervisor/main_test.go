package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestSetupNamesMissingConfiguration(t *testing.T) {
	_, err := setup(t.Context(), env(nil), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.ErrorContains(t, err, "SAS_ORDERS_TABLE, SAS_STATE_TABLE, SAS_SCHEDULER_QUEUE_URL")
}

func TestSetupWiresEverything(t *testing.T) {
	// Building the clients makes no request: this runs offline.
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	h, err := setup(t.Context(), env(map[string]string{
		"SAS_ORDERS_TABLE":           "orders",
		"SAS_STATE_TABLE":            "state",
		"SAS_SCHEDULER_QUEUE_URL":    "https://sqs.eu-west-1.amazonaws.com/123456789012/scheduler",
		"SAS_AGENT_QUEUE_URL":        "https://sqs.eu-west-1.amazonaws.com/123456789012/agent",
		"SAS_CONTROL_QUEUE_URL":      "https://sqs.eu-west-1.amazonaws.com/123456789012/control",
		"SAS_WAIT_LIMIT":             "20m",
		"SAS_STEP_TIMEOUT":           "45s",
		"SAS_ALERT_TOPIC_ARN":        "arn:aws:sns:eu-west-1:123456789012:alerts",
		"SAS_EVENT_BUS_NAME":         "default",
		"SAS_MAX_FAILURES":           "5",
		"AWS_LAMBDA_LOG_STREAM_NAME": "2027/01/15/[$LATEST]abc",
	}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.NotNil(t, h)

	for name, bad := range map[string]string{"SAS_MAX_FAILURES": "many", "SAS_WAIT_LIMIT": "a while"} {
		_, err = setup(t.Context(), env(map[string]string{
			"SAS_ORDERS_TABLE": "orders", "SAS_STATE_TABLE": "state", "SAS_SCHEDULER_QUEUE_URL": "q", "SAS_CONTROL_QUEUE_URL": "c", "SAS_AGENT_QUEUE_URL": "a",
			name: bad,
		}), slog.New(slog.NewTextHandler(io.Discard, nil)))
		require.ErrorContains(t, err, name)
	}
}

func TestSetupNeedsTheAgentQueue(t *testing.T) {
	// The supervisor reads the agent queue's depth to wait on a busy agent
	// instead of failing its held steps.
	_, err := setup(t.Context(), env(map[string]string{
		"SAS_ORDERS_TABLE": "orders", "SAS_STATE_TABLE": "state", "SAS_SCHEDULER_QUEUE_URL": "q", "SAS_CONTROL_QUEUE_URL": "c",
	}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.EqualError(t, err, "missing configuration: SAS_AGENT_QUEUES or SAS_AGENT_QUEUE_URL")

	// One queue per agent serves as well.
	t.Setenv("AWS_REGION", "eu-west-1")
	_, err = setup(t.Context(), env(map[string]string{
		"SAS_ORDERS_TABLE": "orders", "SAS_STATE_TABLE": "state", "SAS_SCHEDULER_QUEUE_URL": "q", "SAS_CONTROL_QUEUE_URL": "c",
		"SAS_AGENT_QUEUES": `{"payments": {"url": "https://sqs.eu-west-1.amazonaws.com/123456789012/payments"}}`,
	}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
}

func TestActor(t *testing.T) {
	t.Parallel()
	require.Equal(t, "supervisor:2027/01/15/[$LATEST]abc", actor(env(map[string]string{"AWS_LAMBDA_LOG_STREAM_NAME": "2027/01/15/[$LATEST]abc"})))
	a, b := actor(env(nil)), actor(env(nil))
	require.NotEqual(t, a, b, "a random id per instance outside Lambda")
}
