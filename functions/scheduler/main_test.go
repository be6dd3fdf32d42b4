package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestSetupNamesMissingConfiguration(t *testing.T) {
	_, err := setup(t.Context(), env(nil), discard(), "scheduler-x")
	require.ErrorContains(t, err, "SAS_ORDERS_TABLE, SAS_STATE_TABLE")
	_, err = setup(t.Context(), env(map[string]string{"SAS_ORDERS_TABLE": "orders", "SAS_STATE_TABLE": "state"}), discard(), "scheduler-x")
	require.EqualError(t, err, "missing configuration: SAS_AGENT_QUEUES or SAS_AGENT_QUEUE_URL")
}

func TestSetupWiresEverything(t *testing.T) {
	// Building the clients makes no request: this runs offline.
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	base := map[string]string{
		"SAS_ORDERS_TABLE":         "orders",
		"SAS_STATE_TABLE":          "state",
		"SAS_AGENT_QUEUE_URL":      "https://sqs.eu-west-1.amazonaws.com/123456789012/agent",
		"SAS_CONTROL_QUEUE_URL":    "https://sqs.eu-west-1.amazonaws.com/123456789012/control",
		"SAS_SIGNING_KEY":          "a-signing-key-of-at-least-32-bytes-long",
		"SAS_ALLOWED_REPLY_QUEUES": "https://sqs.eu-west-1.amazonaws.com/123456789012/caller-*",
		"SAS_ALERT_TOPIC_ARN":      "arn:aws:sns:eu-west-1:123456789012:alerts",
		"SAS_EVENT_BUS_NAME":       "default",
		"SAS_STEP_TIMEOUT":         "20s",
	}
	h, err := setup(t.Context(), env(base), discard(), "scheduler-x")
	require.NoError(t, err)
	require.NotNil(t, h)

	base["SAS_STEP_TIMEOUT"] = "soon"
	_, err = setup(t.Context(), env(base), discard(), "scheduler-x")
	require.ErrorContains(t, err, "SAS_STEP_TIMEOUT")

	base["SAS_STEP_TIMEOUT"] = "20s"
	_, err = setup(t.Context(), env(base), discard(), "")
	require.ErrorContains(t, err, "owner")
}

func TestInstanceID(t *testing.T) {
	t.Parallel()
	a, b := instanceID(), instanceID()
	require.True(t, strings.HasPrefix(a, "scheduler-"))
	require.Len(t, a, len("scheduler-")+32)
	require.NotEqual(t, a, b, "a new id per cold start")
}
