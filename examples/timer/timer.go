// Package timer is Temporal's timer sample, ported: a customer signs up
// for a trial, 72 hours pass, and a reminder goes out. The 72 hours are a
// wait step (docs/workflows.md, "Wait steps"): nothing polls while it
// waits, it never ends early, and it survives any deploy or instance dying
// (it is a record in the store). The reminder says how long the trial has
// run, by the agent's clock (agent.Request.Now): under the test kit, its
// virtual clock.
package timer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/workflow"
)

// Trial is how long a trial runs before its reminder.
const Trial = 72 * time.Hour

// Workflows are the application's workflows.
func Workflows() []workflow.Workflow {
	return []workflow.Workflow{{Name: "trial", Steps: []workflow.Step{
		{Name: "sign-up", Agent: "crm", Action: "sign up", Timeout: workflow.Duration(10 * time.Second)},
		{Name: "trial", Wait: &workflow.Wait{For: workflow.Duration(Trial)}},
		{Name: "remind", Agent: "crm", Action: "remind", Timeout: workflow.Duration(10 * time.Second)},
	}}}
}

// Customer is an order's payload.
type Customer struct {
	Email string `json:"email"`
}

// SignUp is what the sign-up step returns: when the trial started.
type SignUp struct {
	At time.Time `json:"at"`
}

// Mailer is the service the agent calls. Each effect is made at most once
// per idempotency key.
type Mailer interface {
	Welcome(ctx context.Context, key, email string) error
	Remind(ctx context.Context, key, email, text string) error
}

// CRM is the agent of the sign-up and the reminder.
func CRM(m Mailer) *agent.Agent {
	return agent.New("crm").
		Step("sign-up", func(ctx context.Context, req agent.Request) (any, error) {
			var c Customer
			if err := req.DecodePayload(&c); err != nil || c.Email == "" {
				return nil, agent.Permanent(fmt.Errorf("no customer's email: %v", err))
			}
			if err := m.Welcome(ctx, req.IdempotencyKey, c.Email); err != nil {
				return nil, err
			}
			return SignUp{At: req.Now()}, nil
		}, nil).
		Step("remind", func(ctx context.Context, req agent.Request) (any, error) {
			var c Customer
			var s SignUp
			if err := req.DecodePayload(&c); err != nil {
				return nil, agent.Permanent(err)
			}
			if err := req.DecodeResult("sign-up", &s); err != nil || s.At.IsZero() {
				return nil, agent.Permanent(errors.New("no sign-up time in the sign-up's result"))
			}
			text := fmt.Sprintf("your trial started %s ago", req.Now().Sub(s.At).Round(time.Hour))
			return nil, m.Remind(ctx, req.IdempotencyKey, c.Email, text)
		}, nil)
}
