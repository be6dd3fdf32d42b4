package sastest

import (
	"github.com/sas-go/sas/internal/sas"
)

// Complete sends the outside world's answer a to the waiting step whose
// token is tok, at once, through the intake queue as package completion
// does: the token a callback step's agent received (agent.Request.Token,
// a step with both an agent and a callback: docs/workflows.md,
// "Agent-issued tokens"). a.Result completes the step, a.Fail fails it
// (a.Reject: a business rejection); After, Heartbeat and Cancel are not
// read. A Func may call it while it runs (the outside system answers
// before the agent does); a fake service that keeps the token may call
// it later, between Runs (the step waits meanwhile). A token that no
// longer names the waiting attempt changes nothing, as deployed.
func (e *Env) Complete(tok string, a Answer) {
	e.t.Helper()
	if tok == "" {
		e.t.Fatalf("sastest: Complete: no token (is the step a callback step with an agent?)")
	}
	e.send(e.intakeURL, sas.Encode(e.completion("the step of a token", tok, a)))
}
