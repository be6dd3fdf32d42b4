package sas

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAgentQueuesCheck(t *testing.T) {
	t.Parallel()
	reg, err := NewRegistry(Workflow{Name: "trip", Steps: []StepDef{
		{Name: "flight", Agent: "flights", Action: "book", Timeout: time.Second},
		{Name: "hotel", Agent: "hotels", Action: "book", Timeout: time.Second},
	}})
	require.NoError(t, err)
	q := AgentQueues{ByAgent: map[string]AgentQueue{"flights": {URL: "http://q/flights"}}}
	require.ErrorContains(t, q.Check(reg), "[hotels]")
	q.Default = "http://q/default"
	require.NoError(t, q.Check(reg), "the default queue serves hotels")
	require.Equal(t, "http://q/default", q.URL("hotels", 9))
	require.ErrorContains(t, AgentQueues{ByAgent: map[string]AgentQueue{"flights": {}}}.Check(reg), "url is required")
	require.True(t, AgentQueues{}.Empty())
}
