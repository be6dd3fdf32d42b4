// Package workflows holds the reference workflows a deployment registers by
// default: "payment" (one charge) and "order" (the pattern's e-commerce
// order: reserve, charge, ship). Workflow logic lives with the scheduler
// (docs/pattern.md §2); an agent finds what to call for a step by its agent and step
// name in the same registry (internal/agent.RoutesFromRegistry).
package workflows

import (
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/sas"
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
