package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sasctl"
)

func writeOutputs(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outputs.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"SasStack": {
		"IntakeQueueUrl": "http://localhost:4566/000000000000/intake",
		"OrdersTableName": "orders", "StateTableName": "state",
		"AgentQueues": "{\"payments\":{\"url\":\"http://localhost:4566/000000000000/p\"}}"}}`), 0o644))
	return path
}

func TestEnvPrintsTheStacksExports(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-outputs", writeOutputs(t), "env"}, &out))
	require.Equal(t, `export SAS_INTAKE_QUEUE_URL=http://localhost:4566/000000000000/intake
export SAS_ORDERS_TABLE=orders
export SAS_STATE_TABLE=state
export SAS_AGENT_QUEUES='{"payments":{"url":"http://localhost:4566/000000000000/p"}}'
`, out.String())

	out.Reset()
	require.NoError(t, run(context.Background(), []string{"-outputs", writeOutputs(t), "-stack", "SasStack", "env"}, &out))
	require.Contains(t, out.String(), "export SAS_ORDERS_TABLE=orders")
}

func TestEnvNeedsAStack(t *testing.T) {
	var out bytes.Buffer
	require.ErrorIs(t, run(context.Background(), []string{"env"}, &out), sasctl.ErrUsage)
	err := run(context.Background(), []string{"-outputs", writeOutputs(t), "-stack", "Other", "env"}, &out)
	require.ErrorContains(t, err, "no outputs for stack Other (stacks: SasStack)")
	err = run(context.Background(), []string{"-outputs", filepath.Join(t.TempDir(), "none.json"), "env"}, &out)
	require.ErrorContains(t, err, "reading the stack outputs")
}

// Without -outputs or -stack the variables must come from the environment,
// and the error says how to get them.
func TestMissingVariablesSayHowToGetThem(t *testing.T) {
	t.Setenv("SAS_ORDERS_TABLE", "")
	t.Setenv("SAS_STATE_TABLE", "")
	var out bytes.Buffer
	err := run(context.Background(), []string{"show", "o-1"}, &out)
	require.ErrorContains(t, err, "missing configuration: SAS_ORDERS_TABLE, SAS_STATE_TABLE")
	require.ErrorContains(t, err, "sasctl -outputs infra/outputs.json env")
}

func TestLambdaThere(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	require.True(t, lambdaThere(env()), "AWS")
	require.True(t, lambdaThere(env("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")), "MiniStack, LocalStack")
	require.False(t, lambdaThere(env("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:1", "AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:2")), "make dev")
	require.True(t, lambdaThere(env("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:2", "AWS_ENDPOINT_URL_LAMBDA", "http://127.0.0.1:3")))
}
