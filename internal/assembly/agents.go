package assembly

import (
	"fmt"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/agentqueue"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/sas"
)

// BuiltinAttemptTimeout bounds one try of the built-in agent's HTTP calls,
// so a hung connection costs one try and not the whole step: the SDK's
// default. A setting of the design, not of the deployment.
const BuiltinAttemptTimeout = agent.DefaultAttemptTimeout

// Hosting is how an agent handler is run beyond the system's parts; the
// zero value is the deployment's.
type Hosting struct {
	// Middleware wraps every run of a step (agent.HandlerConfig.Middleware):
	// the test kit's, which injects failures and records calls.
	Middleware func(agent.Func) agent.Func
	// ReplyLinger: agent.HandlerConfig.ReplyLinger.
	ReplyLinger time.Duration
}

// AgentQueue is the queue, and priority lane, agent name takes its
// requests from: those an agent function's environment names
// (SAS_AGENT_QUEUE_URL, SAS_AGENT_PRIORITY_QUEUE_URL) when it names them,
// else the agent's own in AgentQueues.
func (s System) AgentQueue(name string) sas.AgentQueue {
	if s.Config.AgentQueueURL != "" {
		return sas.AgentQueue{URL: s.Config.AgentQueueURL, PriorityURL: s.Config.AgentPriorityQueueURL}
	}
	return s.Config.AgentQueues.ByAgent[name]
}

// AgentHandler hosts agents on the SDK's handler (agent.Handler, the agent
// runtime internal/agenthost): their requests come from q, whose queue and
// lane it knows for the redelivery backoff, and their replies go to the
// scheduler queue, through the system's queue, clock, logger and metrics.
func (s System) AgentHandler(q sas.AgentQueue, h Hosting, agents ...*agent.Agent) (*agent.Handler, error) {
	if s.Config.SchedulerQueueURL == "" {
		return nil, fmt.Errorf("configuring the agent: %w",
			&sas.ValidationError{Field: "environment", Reason: "SAS_SCHEDULER_QUEUE_URL is required"})
	}
	hc := agent.HandlerConfig{
		Agents: agents, SchedulerQueueURL: s.Config.SchedulerQueueURL,
		QueueURL: q.URL, PriorityQueueURL: q.PriorityURL,
		Logger: s.Logger, Metrics: s.Metrics,
		Middleware: h.Middleware, ReplyLinger: h.ReplyLinger,
	}
	agentqueue.Use(&hc, s.Queue)
	if s.Clock != nil {
		hc.Clock = s.Clock
	}
	return agent.NewHandler(hc)
}

// BuiltinAgent hosts the built-in HTTP agent (internal/builtinagent) on
// its queue (AgentQueue). d names the agent and its service; what it
// leaves unset comes from the system: the workflows whose routes it
// serves, its logger, and an HTTP client of the deployment's
// (BuiltinClient).
func (s System) BuiltinAgent(d builtinagent.Deps, h Hosting) (*agent.Handler, error) {
	if d.Client == nil {
		client, err := BuiltinClient()
		if err != nil {
			return nil, err
		}
		d.Client = client
	}
	if d.Logger == nil {
		d.Logger = s.Logger
	}
	if d.Registry == nil {
		d.Registry = s.Workflows
	}
	if d.Definitions == nil && s.Store != nil {
		// Where the store is in reach (the local runs, the dev server, the
		// test kit), the agent checks an earlier version's request against
		// that version's definition; the Lambda agent has no store.
		d.Definitions = s.Store
	}
	a, err := builtinagent.Agent(s.Config, d)
	if err != nil {
		return nil, err
	}
	return s.AgentHandler(s.AgentQueue(a.Name()), h, a)
}

// BuiltinClient is the built-in agent's HTTP client as deployed: tries of
// at most BuiltinAttemptTimeout, bodies of at most
// agenthost.MaxResponseBytes, the SDK's defaults otherwise.
func BuiltinClient() (*agent.HTTPClient, error) {
	return agent.NewHTTPClient(agent.HTTPConfig{AttemptTimeout: BuiltinAttemptTimeout, MaxResponseBytes: agenthost.MaxResponseBytes})
}
