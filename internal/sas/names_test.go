package sas

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQueueName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://sqs.eu-west-1.amazonaws.com/123456789012/orders": "orders",
		"http://127.0.0.1:9324/000000000000/orders-lane/":         "orders-lane",
		"arn:aws:sqs:eu-west-1:123456789012:orders.fifo":          "orders.fifo",
		"orders": "orders",
		"":       "",
		LocalQueueARN("us-east-1", "http://localhost:4566/000000000000/q"): "q",
	} {
		require.Equal(t, want, QueueName(in), in)
	}
	require.Equal(t, "arn:aws:sqs:local:000000000000:q", LocalQueueARN("local", "http://h:1/000000000000/q/"))
}

func TestRandomID(t *testing.T) {
	t.Parallel()
	a, b := RandomID(16), RandomID(16)
	require.Len(t, a, 32)
	require.NotEqual(t, a, b)
	require.Empty(t, RandomID(0))
}
