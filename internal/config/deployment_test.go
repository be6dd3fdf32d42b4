package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "workflows.json")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	return p
}

// The construct's file: queue names resolved against the scheduler queue's
// URL, full URLs kept, limits taken from the file.
func TestLoadDeploymentSection(t *testing.T) {
	t.Parallel()
	p := writeFile(t, `{"deployment": {
		"agents": {"payments": {"queue": "s-payments", "priorityQueue": "s-payments-lane", "replies": "s-payments-replies"},
		           "mail": {"queue": "http://127.0.0.1:9324/000000000000/mail"}},
		"limits": {"maxFailures": 5, "stepTimeout": "20s", "pickupTimeout": "2m", "waitLimit": "10m", "indexShards": 4}}}`)
	c, err := Load(env(map[string]string{
		"SAS_WORKFLOWS_FILE":      p,
		"SAS_SCHEDULER_QUEUE_URL": "https://sqs.eu-west-1.amazonaws.com/111122223333/SasStack-SchedulerQueue-ABC",
	}))
	require.NoError(t, err)
	require.Equal(t, map[string]sas.AgentQueue{
		"payments": {URL: "https://sqs.eu-west-1.amazonaws.com/111122223333/s-payments", PriorityURL: "https://sqs.eu-west-1.amazonaws.com/111122223333/s-payments-lane",
			RepliesURL: "https://sqs.eu-west-1.amazonaws.com/111122223333/s-payments-replies"},
		"mail": {URL: "http://127.0.0.1:9324/000000000000/mail"},
	}, c.AgentQueues.ByAgent)
	require.Equal(t, 5, c.MaxFailures)
	require.Equal(t, 4, c.IndexShards)
	require.Equal(t, 20*time.Second, c.StepTimeout)
	require.Equal(t, 2*time.Minute, c.PickupTimeout)
	require.Equal(t, 10*time.Minute, c.WaitLimit)
	require.False(t, c.ReplyToAllowed("https://sqs.eu-west-1.amazonaws.com/111122223333/s-payments-lane"), "an agent's lane is the deployment's own queue")
}

// A setting in both places is refused naming both; a bad section is refused
// with the file and the field, the message the construct gives at synth.
func TestLoadDeploymentRefusals(t *testing.T) {
	t.Parallel()
	p := writeFile(t, `{"deployment": {"agents": {"payments": {"queue": "q"}}, "limits": {"maxFailures": 5}}}`)
	_, err := Load(env(map[string]string{"SAS_WORKFLOWS_FILE": p, "SAS_SCHEDULER_QUEUE_URL": "http://x/1/s", "SAS_MAX_FAILURES": "3"}))
	require.EqualError(t, err, "SAS_MAX_FAILURES and "+p+": deployment.limits.maxFailures are both set: keep one")
	_, err = Load(env(map[string]string{"SAS_WORKFLOWS_FILE": p, "SAS_SCHEDULER_QUEUE_URL": "http://x/1/s", "SAS_AGENT_QUEUES": `{"a":{"url":"http://x/1/a"}}`}))
	require.ErrorContains(t, err, "SAS_AGENT_QUEUES and "+p+": deployment.agents are both set")
	_, err = Load(env(map[string]string{"SAS_WORKFLOWS_FILE": p}))
	require.ErrorContains(t, err, "deployment.agents.payments.queue: the queue name \"q\" needs SAS_SCHEDULER_QUEUE_URL")

	bad := writeFile(t, `{"deployment": {"agents": {"payments": {"queue": "no spaces"}}}}`)
	_, err = Load(env(map[string]string{"SAS_WORKFLOWS_FILE": bad}))
	require.ErrorContains(t, err, "SAS_WORKFLOWS_FILE: "+bad+": deployment.agents.payments.queue: \"no spaces\": want a queue URL")
}
