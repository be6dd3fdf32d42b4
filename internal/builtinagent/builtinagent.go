// Package builtinagent is the deployment's own agent: an HTTP agent of the
// public SDK (package agent, agent.HTTP) that calls each step's action
// against one service, hosted with agent.NewHandler. The Lambda entry point
// (functions/agent) and the local runs (internal/localrun) build it here,
// so both run the same agent.
//
// It is a user of the SDK like any other; what it adds is configuration:
// the agent's name and base URL, and the routes of the workflow registry
// for requests from an older scheduler that carry no action.
package builtinagent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/agent"
	iagent "github.com/sas-go/sas/internal/agent"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/httpagent"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/workflows"
)

// The environment variables of the built-in agent that internal/config does
// not read.
const (
	// EnvName is the agent name the function serves (default "payments").
	EnvName = "SAS_AGENT_NAME"
	// EnvBaseURL is the service the agent calls; SAS_PAYMENTS_URL when
	// unset, which older deployments set.
	EnvBaseURL = "SAS_AGENT_BASE_URL"
)

// Caller makes one call with retries, backoff, breaker and deadline;
// *httpagent.Caller is the implementation.
type Caller interface {
	Call(ctx context.Context, r httpagent.Request) (httpagent.Result, error)
}

var _ Caller = (*httpagent.Caller)(nil)

// Deps are what the agent needs besides the configuration.
type Deps struct {
	// Queue sends the replies (FromConfig only).
	Queue sas.Queue
	// Caller makes the HTTP calls. Required.
	Caller Caller
	Clock  sas.Clock    // default sas.SystemClock
	Logger *slog.Logger // default slog.Default()
	// Registry is the workflows whose steps' routes the agent falls back on;
	// default: loaded from cfg (SAS_WORKFLOWS_FILE, or the reference ones).
	Registry sas.Registry
	// ReplyLinger: see agent.HandlerConfig.ReplyLinger.
	ReplyLinger time.Duration
	// Name is the agent's name (SAS_AGENT_NAME); default "payments".
	Name string
	// BaseURL is the service's base URL (SAS_AGENT_BASE_URL); default
	// cfg.PaymentsURL (SAS_PAYMENTS_URL).
	BaseURL string
}

// Agent builds the HTTP agent: named d.Name, calling d.BaseURL, with the
// registry's routes for the steps that name it.
func Agent(cfg config.Config, d Deps) (*agent.Agent, error) {
	name, base := d.Name, d.BaseURL
	if name == "" {
		name = workflows.PaymentsAgent
	}
	if base == "" {
		base = cfg.PaymentsURL
	}
	if base == "" {
		return nil, fmt.Errorf("configuring agent %q: %w", name,
			&sas.ValidationError{Field: "environment", Reason: EnvBaseURL + " (or SAS_PAYMENTS_URL) is required"})
	}
	if d.Caller == nil {
		return nil, fmt.Errorf("configuring agent %q: %w", name, &sas.ValidationError{Field: "Caller", Reason: "required"})
	}
	reg := d.Registry
	if reg == nil {
		var err error
		if reg, err = workflows.Load(cfg.WorkflowsFile, cfg.StepTimeout); err != nil {
			return nil, fmt.Errorf("configuring agent %q: %w", name, err)
		}
	}
	byStep, err := iagent.RoutesFromRegistry(reg, name)
	if err != nil {
		return nil, fmt.Errorf("configuring agent %q: %w", name, err)
	}
	routes := make([]agent.Route, 0, len(byStep))
	for step, r := range byStep {
		routes = append(routes, agent.Route{Step: step, Action: r.Action, Undo: r.Undo})
	}
	slices.SortFunc(routes, func(a, b agent.Route) int { return strings.Compare(a.Step, b.Step) })
	a := agent.HTTP(name, base, callerDoer{d.Caller}, routes...)
	if err := a.Err(); err != nil {
		return nil, fmt.Errorf("configuring agent %q: %w", name, err)
	}
	return a, nil
}

// FromConfig builds the handler local runs host: Agent, replying on
// SAS_SCHEDULER_QUEUE_URL, with the agent's queue (SAS_AGENT_QUEUE_URL) and
// priority lane (SAS_AGENT_PRIORITY_QUEUE_URL) known for the redelivery
// backoff when they are set.
func FromConfig(cfg config.Config, d Deps) (*agent.Handler, error) {
	if cfg.SchedulerQueueURL == "" {
		return nil, fmt.Errorf("configuring the agent: %w",
			&sas.ValidationError{Field: "environment", Reason: "SAS_SCHEDULER_QUEUE_URL is required"})
	}
	a, err := Agent(cfg, d)
	if err != nil {
		return nil, err
	}
	hc := agent.HandlerConfig{
		Agents: []*agent.Agent{a}, SchedulerQueueURL: cfg.SchedulerQueueURL,
		QueueURL: cfg.AgentQueueURL, PriorityQueueURL: cfg.AgentPriorityQueueURL,
		Queue: d.Queue, Logger: d.Logger, ReplyLinger: d.ReplyLinger,
	}
	if d.Clock != nil {
		hc.Clock = d.Clock
	}
	return agent.NewHandler(hc)
}

// callerDoer makes a Caller the SDK's agent.HTTPDoer. The caller's errors
// pass through unchanged: the HTTP agent reads their classes.
type callerDoer struct{ c Caller }

func (d callerDoer) Do(ctx context.Context, call agent.HTTPCall) (agent.HTTPResponse, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return agent.HTTPResponse{}, agent.Permanent(fmt.Errorf("calling %s %s%s: %w", call.Method, call.Endpoint, call.Path,
			&sas.ValidationError{Field: "ctx", Reason: "a context with a deadline is required"}))
	}
	res, err := d.c.Call(ctx, httpagent.Request{
		Endpoint: call.Endpoint, Method: call.Method, Path: call.Path, Body: call.Body,
		IdempotencyKey: call.IdempotencyKey, Deadline: deadline, Header: call.Header,
	})
	return agent.HTTPResponse{Status: res.Status, Body: res.Body, Truncated: res.Truncated, Tries: res.Attempts}, err
}
