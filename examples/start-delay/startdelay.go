// Package startdelay is Temporal's start-delay sample, ported: an order is
// submitted now to start later ("run the payroll at 09:00 on Monday"). The
// intake's startAt (docs/intake.md, "Starting later") stores the order at
// once and starts its first step at that time, never before; nothing polls
// meanwhile, and the wait survives any deploy or instance dying. With the
// test kit, Env.RunAt submits such an order and the kit's virtual clock
// runs the delay in milliseconds.
package startdelay

import (
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/workflow"
)

// Workflows are the application's workflows.
func Workflows() []workflow.Workflow {
	return []workflow.Workflow{{Name: "payroll", Steps: []workflow.Step{
		{Name: "pay", Agent: "payroll", Action: "pay", Timeout: workflow.Duration(10 * time.Second)},
	}}}
}

// Run is an order's payload: which payroll.
type Run struct {
	Period string `json:"period"`
}

// Bank is the service the agent calls, at most once per idempotency key.
type Bank interface {
	Pay(ctx context.Context, key, period string, at time.Time) error
}

// Payroll is the agent of the payment; it tells the bank when it ran, by
// the agent's clock (agent.Request.Now).
func Payroll(b Bank) *agent.Agent {
	return agent.New("payroll").Step("pay", func(ctx context.Context, req agent.Request) (any, error) {
		var r Run
		if err := req.DecodePayload(&r); err != nil || r.Period == "" {
			return nil, agent.Permanent(fmt.Errorf("no period: %v", err))
		}
		return nil, b.Pay(ctx, req.IdempotencyKey, r.Period, req.Now())
	}, nil)
}

// NextMonday0900 is the next Monday at 09:00 in loc after now: when the
// payroll starts.
func NextMonday0900(now time.Time, loc *time.Location) time.Time {
	t := now.In(loc)
	d := time.Date(t.Year(), t.Month(), t.Day(), 9, 0, 0, 0, loc)
	for d.Weekday() != time.Monday || !d.After(t) {
		d = d.AddDate(0, 0, 1)
	}
	return d
}
