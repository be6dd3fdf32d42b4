// Package registry builds the deployment's workflow registry (sas.Registry):
// from a workflow file or Go definitions (package workflow), or else the
// reference workflows a deployment registers by default: "payment" (one
// charge) and "order" (the pattern's e-commerce order: reserve, charge,
// ship). Workflow logic lives with the scheduler (docs/pattern.md §2); an
// agent finds what to call for a step by its agent and step name in the same
// registry (internal/agenthost.RoutesFromRegistry).
package registry

import (
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/workflow"
)

// Names of the reference workflows and of the agent that runs their steps.
const (
	Payment = "payment"
	Order   = "order"

	// PaymentsAgent runs every reference step: the remote simulator serves
	// any POST /<resource> idempotently, so one base URL is enough.
	PaymentsAgent = "payments"
)

// PaymentWorkflow is a single charge, undone by a refund.
func PaymentWorkflow(timeout time.Duration) sas.Workflow {
	return sas.Workflow{Name: Payment, Steps: []sas.StepDef{
		{Name: "charge", Agent: PaymentsAgent, Action: "POST /payments", Undo: "POST /refunds", Timeout: timeout},
	}}
}

// OrderWorkflow is the reference order. Shipping has no undo: it is the last
// step, so nothing after it can fail and ask for it to be taken back.
func OrderWorkflow(timeout time.Duration) sas.Workflow {
	return sas.Workflow{Name: Order, Steps: []sas.StepDef{
		{Name: "reserve", Agent: PaymentsAgent, Action: "POST /reservations", Undo: "POST /reservations/cancel", Timeout: timeout},
		{Name: "charge", Agent: PaymentsAgent, Action: "POST /payments", Undo: "POST /refunds", Timeout: timeout},
		{Name: "ship", Agent: PaymentsAgent, Action: "POST /shipments", Timeout: timeout},
	}}
}

// Default returns the registry of the reference workflows, every step with
// the given time limit (SAS_STEP_TIMEOUT).
func Default(stepTimeout time.Duration) (sas.Registry, error) {
	reg, err := sas.NewRegistry(PaymentWorkflow(stepTimeout), OrderWorkflow(stepTimeout))
	if err != nil {
		return nil, fmt.Errorf("building the default workflows: %w", err)
	}
	return reg, nil
}

// FromDefinitions turns public definitions (package workflow) into the
// registry the actors use. It validates them (workflow.Validate), since a Go
// caller may pass definitions that never went through workflow.Parse.
func FromDefinitions(defs []workflow.Workflow) (sas.Registry, error) {
	if err := workflow.Validate(defs...); err != nil {
		return nil, err
	}
	ws := make([]sas.Workflow, len(defs))
	for i, d := range defs {
		ws[i] = sas.Workflow{Name: d.Name, Steps: make([]sas.StepDef, len(d.Steps))}
		for j, s := range d.Steps {
			def := sas.StepDef{Name: s.Name, Agent: s.Agent, Action: s.Action, Undo: s.Undo,
				Timeout: s.Timeout.D(), WaitLimit: s.WaitLimit.D(), TotalLimit: s.TotalLimit.D(), When: s.When}
			if s.Retry != nil {
				r := s.Retry.Policy() // the older names read as the new ones
				def.MaxFailures, def.Tries = r.MaximumAttempts, r.Tries
				def.BaseBackoff, def.MaxBackoff = r.InitialInterval.D(), r.MaximumInterval.D()
				def.BackoffCoefficient, def.NonRetryable = r.BackoffCoefficient, r.NonRetryableErrors
			}
			if u := s.UndoRetry; u != nil {
				def.UndoRetry = sas.RetryPolicy{MaxAttempts: u.MaximumAttempts, InitialInterval: u.InitialInterval.D(),
					Coefficient: u.BackoffCoefficient, MaxInterval: u.MaximumInterval.D()}
				def.UndoNonRetryable = u.NonRetryableErrors
			}
			def.After = after(d, j)
			if c := s.Callback; c != nil {
				def.Callback = &sas.Callback{Timeout: c.Timeout.D(), Heartbeat: c.Heartbeat.D()}
			}
			if w := s.Wait; w != nil {
				def.Timer = &sas.Timer{For: w.For.D(), Until: w.Until}
			}
			if f := s.ForEach; f != nil {
				// Run an element at a time by the scheduler (docs/decisions.md,
				// "Fan-out elements are records of their own").
				def.ForEach = &sas.ForEach{Items: f.Items, Concurrency: f.Concurrency}
			}
			ws[i].Steps[j] = def
		}
	}
	reg, err := sas.NewRegistry(ws...)
	if err != nil {
		return nil, fmt.Errorf("registering the workflows: %w", err)
	}
	return reg, nil
}

// Load returns the deployment's registry: the workflows of the file at path
// (SAS_WORKFLOWS_FILE), or, with no path, the reference workflows with the
// given step timeout; a file holding only a deployment section (what the
// construct ships without workflows) means the reference workflows too. A
// bad file is refused here, at start-up, with the file, the field and the
// reason.
func Load(path string, stepTimeout time.Duration) (sas.Registry, error) {
	if path == "" {
		return Default(stepTimeout)
	}
	f, err := workflow.LoadFile(path)
	if err != nil {
		return nil, err
	}
	if f.Workflows == nil {
		return Default(stepTimeout)
	}
	return FromDefinitions(f.Workflows)
}

// after is the sas form of step j's After: the indices of the steps it
// follows, or nil when it follows the step before it (the default, written
// or not), so that a definition that spells the default out keeps the
// version of one that does not.
func after(d workflow.Workflow, j int) []int {
	names := d.Steps[j].After
	if names == nil || (j > 0 && len(names) == 1 && names[0] == d.Steps[j-1].Name) || (j == 0 && len(names) == 0) {
		return nil
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		for k, s := range d.Steps {
			if s.Name == n {
				out = append(out, k)
			}
		}
	}
	return out
}
