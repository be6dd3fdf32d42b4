package agent

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/workflows"
)

// MaxResponseBytes is how much of a success's body the deployed agent reads
// (httpagent.Config.MaxResponseBytes; ten calls run at once). A longer body
// is still a success, and a reply carries at most sqslimits.MaxResultBytes
// of a result either way. The Lambda and the local runs share it.
const MaxResponseBytes = 128 << 10

// Deps are what FromConfig cannot build from the configuration alone.
type Deps struct {
	Queue  sas.Queue
	Caller Caller
	Clock  sas.Clock    // default sas.SystemClock
	Logger *slog.Logger // default slog.Default()
	// Registry is the workflows whose steps the agents serve; default
	// workflows.Default, the scheduler's.
	Registry sas.Registry
	// ReplyLinger: see Config.ReplyLinger.
	ReplyLinger time.Duration
}

// FromConfig builds the Service this deployment runs: the payments agent
// against SAS_PAYMENTS_URL for every step the registry gives it, replying on
// SAS_SCHEDULER_QUEUE_URL, and shortening the visibility of requests left for
// redelivery on SAS_AGENT_QUEUE_URL when it is set. The Lambda entry point and local runs share it,
// so both host the same agents.
func FromConfig(cfg config.Config, d Deps) (*Service, error) {
	if cfg.SchedulerQueueURL == "" || cfg.PaymentsURL == "" {
		return nil, fmt.Errorf("configuring agent service: %w",
			&sas.ValidationError{Field: "environment", Reason: "SAS_SCHEDULER_QUEUE_URL and SAS_PAYMENTS_URL are required"})
	}
	reg := d.Registry
	if reg == nil {
		var err error
		if reg, err = workflows.Load(cfg.WorkflowsFile, cfg.StepTimeout); err != nil {
			return nil, fmt.Errorf("configuring agent service: %w", err)
		}
	}
	routes, err := RoutesFromRegistry(reg, workflows.PaymentsAgent)
	if err != nil {
		return nil, fmt.Errorf("configuring agent service: %w", err)
	}
	payments, err := NewHTTPRunner(HTTPRunnerConfig{
		Agent: workflows.PaymentsAgent, Endpoint: cfg.PaymentsURL, Routes: routes, Caller: d.Caller,
	})
	if err != nil {
		return nil, fmt.Errorf("configuring agent service: %w", err)
	}
	return New(Config{
		Queue: d.Queue, ReplyQueueURL: cfg.SchedulerQueueURL,
		// Optional: with it, a request left without an outcome comes back
		// after a short backoff, not the queue's visibility timeout.
		RequestQueueURL: cfg.AgentQueueURL,
		Agents:          map[string]Runner{workflows.PaymentsAgent: payments},
		Clock:           d.Clock, Logger: d.Logger, ReplyLinger: d.ReplyLinger,
	})
}
