package config

import (
	"fmt"
	"strings"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/workflow"
)

// The deployment section of the workflow file (workflow.Deployment) is the
// deployment's configuration where it outgrows the environment: Lambda
// allows 4 KB of variables, and a hundred agents' queue URLs take about
// 26 KB. The construct (infra/sascdk) writes it; the environment then only
// names the file, the tables and the actors' own queues. The same
// workflow.Deployment.Validate checks it at synth and here, at start-up.

// readDeployment reads the deployment section of SAS_WORKFLOWS_FILE, if the
// file has one.
func (c *Config) readDeployment() (*workflow.Deployment, error) {
	if c.WorkflowsFile == "" {
		return nil, nil
	}
	f, err := workflow.LoadFile(c.WorkflowsFile)
	if err != nil {
		return nil, fmt.Errorf("SAS_WORKFLOWS_FILE: %w", err)
	}
	return f.Deployment, nil
}

// applyDeployment takes the agents' queues and the limits from the file's
// deployment section. A setting made both there and in the environment is
// refused, naming both, rather than one silently winning.
func (c *Config) applyDeployment(getenv Getenv, d *workflow.Deployment) error {
	if d == nil {
		return nil
	}
	where := func(field string) string {
		return fmt.Sprintf("%s: deployment.%s", c.WorkflowsFile, field)
	}
	both := func(env, field string) error {
		return fmt.Errorf("%s and %s are both set: keep one", env, where(field))
	}
	if len(d.Agents) > 0 {
		if strings.TrimSpace(getenv("SAS_AGENT_QUEUES")) != "" {
			return both("SAS_AGENT_QUEUES", "agents")
		}
		c.AgentQueues.ByAgent = make(map[string]sas.AgentQueue, len(d.Agents))
		for name, q := range d.Agents {
			url, err := c.queueURL(q.Queue)
			if err != nil {
				return fmt.Errorf("%s: %w", where("agents."+name+".queue"), err)
			}
			lane, err := c.queueURL(q.PriorityQueue)
			if err != nil {
				return fmt.Errorf("%s: %w", where("agents."+name+".priorityQueue"), err)
			}
			replies, err := c.queueURL(q.Replies)
			if err != nil {
				return fmt.Errorf("%s: %w", where("agents."+name+".replies"), err)
			}
			c.AgentQueues.ByAgent[name] = sas.AgentQueue{URL: url, PriorityURL: lane, RepliesURL: replies}
		}
	}
	l := d.Limits
	if l == nil {
		return nil
	}
	// Each limit the file sets, and what setting it does; the same
	// setting in the environment too is refused.
	settings := []struct {
		env, field string
		set        bool
		apply      func()
	}{
		{"SAS_MAX_FAILURES", "limits.maxFailures", l.MaxFailures != 0, func() { c.MaxFailures = l.MaxFailures }},
		{"SAS_INDEX_SHARDS", "limits.indexShards", l.IndexShards != 0, func() { c.IndexShards = l.IndexShards }},
		{"SAS_STEP_TIMEOUT", "limits.stepTimeout", l.StepTimeout != 0, func() { c.StepTimeout = l.StepTimeout.D() }},
		{"SAS_PICKUP_TIMEOUT", "limits.pickupTimeout", l.PickupTimeout != 0, func() { c.PickupTimeout = l.PickupTimeout.D() }},
		{"SAS_WAIT_LIMIT", "limits.waitLimit", l.WaitLimit != 0, func() { c.WaitLimit = l.WaitLimit.D() }},
	}
	for _, f := range settings {
		if !f.set {
			continue
		}
		if getenv(f.env) != "" {
			return both(f.env, f.field)
		}
		f.apply()
	}
	return nil
}

// queueURL is a queue of the file as a URL: a URL as it is, a name
// resolved against the scheduler queue's URL, whose account, region and
// endpoint every queue of the deployment shares.
func (c *Config) queueURL(q string) (string, error) {
	if q == "" || strings.Contains(q, "://") {
		return q, nil
	}
	i := strings.LastIndex(c.SchedulerQueueURL, "/")
	if i < 0 {
		return "", fmt.Errorf("the queue name %q needs SAS_SCHEDULER_QUEUE_URL, the URL it is resolved against", q)
	}
	return c.SchedulerQueueURL[:i+1] + q, nil
}
