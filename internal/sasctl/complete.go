package sasctl

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sas-go/sas/internal/sas"
)

// complete sends a completion of a waiting callback step (docs/protocol.md,
// "Callback steps") to the control queue: `complete` with a result, `fail`
// with a reason (-reject: a business rejection), `heartbeat`. It reads the
// step the token names first and sends nothing when that step does not
// wait for it, saying why: the scheduler would change nothing, and the
// command must not print success for a message that does nothing. The
// token's signature is the scheduler's to check (sasctl has no key).
func (a *App) complete(outcome sas.Outcome) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		name := string(outcome)
		if outcome == sas.OutcomeDone {
			name = "complete"
		} else if outcome == sas.OutcomeFailed {
			name = "fail"
		}
		fs := a.flags(name)
		token := fs.String("token", "", "the token the step's waiting status handed out")
		result := fs.String("result", "", "complete: the step's result, JSON")
		reason := fs.String("reason", "", "fail: why")
		reject := fs.Bool("reject", false, "fail: a business rejection (the order ends Rejected, nobody is paged)")
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) == 1 && *token == "" {
			*token = pos[0]
		} else if len(pos) > 0 {
			return fmt.Errorf("%s takes the token alone: %w", name, ErrUsage)
		}
		m := sas.Completion{V: sas.MessageVersion, Kind: sas.KindComplete, Token: *token, Outcome: outcome, Reason: *reason, Rejected: *reject, Actor: a.Actor}
		if *result != "" {
			m.Result = json.RawMessage(*result)
		}
		if err := m.Check(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		t, err := sas.PeekToken(*token)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		r, err := a.Store.GetStep(ctx, sas.StepKey{OrderID: t.OrderID, Step: t.Step})
		if err != nil {
			return fmt.Errorf("%s: reading step %d of order %s: %w", name, t.Step, t.OrderID, err)
		}
		if r.ProcessState != sas.Processing || r.Attempt != t.Attempt || r.LockedBy != t.Holder || !a.now().Before(r.CompleteBy) {
			return fmt.Errorf("%s: step %d (%s) of order %s is %s at attempt %d, not waiting for this token (attempt %d): nothing sent",
				name, t.Step, r.StepName, t.OrderID, r.ProcessState, r.Attempt, t.Attempt)
		}
		if a.ControlQueueURL == "" {
			return fmt.Errorf("%s: SAS_CONTROL_QUEUE_URL is not set", name)
		}
		if err := a.send(ctx, a.ControlQueueURL, sas.Encode(m)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(a.Out, "sent %s for step %d (%s) of order %s: the scheduler applies it if the token checks out and the step still waits (sasctl show %s)\n",
			outcome, t.Step, r.StepName, t.OrderID, t.OrderID)
		return nil
	}
}
