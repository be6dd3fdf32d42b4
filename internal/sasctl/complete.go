package sasctl

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sas-go/sas/internal/sas"
)

// complete sends a completion of a waiting callback step (docs/protocol.md,
// "Callback steps") to the control queue: `complete` with a result, `fail`
// with a reason (-reject: a business rejection), `heartbeat`. The step is
// named by its token, or, as an operator may, by -order and -step (the
// attempt waiting now, read from the store: a completion the control queue
// alone believes, docs/trust.md). It reads the step first and sends nothing
// when that step does not wait, saying why: the scheduler would change
// nothing, and the command must not print success for a message that does
// nothing. The token's signature is the scheduler's to check (sasctl has no
// key).
func (a *App) complete(outcome sas.Outcome) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		name := completionName(outcome)
		fs := a.flags(name)
		token := fs.String("token", "", "the token the step's waiting status handed out")
		order := fs.String("order", "", "instead of a token: the order whose waiting step to complete (an operator's completion)")
		step := fs.Int("step", -1, "with -order: the waiting step's index")
		result := fs.String("result", "", "complete: the step's result, JSON")
		reason := fs.String("reason", "", "fail: why")
		reject := fs.Bool("reject", false, "fail: a business rejection (the order ends Rejected, nobody is paged)")
		pos, err := parse(fs, args)
		if err != nil {
			return err
		}
		if len(pos) == 1 && *token == "" && *order == "" {
			*token = pos[0]
		} else if len(pos) > 0 {
			return fmt.Errorf("%s takes the token alone: %w", name, ErrUsage)
		}
		m := sas.Completion{V: sas.MessageVersion, Kind: sas.KindComplete, Token: *token, Outcome: outcome, Reason: *reason, Rejected: *reject, Actor: a.Actor}
		if *result != "" {
			m.Result = json.RawMessage(*result)
		}
		var r sas.StepRecord
		switch {
		case *order != "" && *token != "":
			return fmt.Errorf("%s: give the token or -order and -step, not both: %w", name, ErrUsage)
		case *order != "" && *step < 0:
			return fmt.Errorf("%s: -order needs -step, the waiting step's index: %w", name, ErrUsage)
		case *order != "":
			var err error
			r, err = a.Store.GetStep(ctx, sas.StepKey{OrderID: *order, Step: *step})
			if err != nil {
				return fmt.Errorf("%s: reading step %d of order %s: %w", name, *step, *order, err)
			}
			if r.ProcessState != sas.Processing {
				return fmt.Errorf("%s: step %d (%s) of order %s is %s at attempt %d, not waiting for this completion: nothing sent",
					name, r.Step, r.StepName, r.OrderID, r.ProcessState, r.Attempt)
			}
			w := sas.WaitingStepOf(r)
			m.Step = &w
			if err := a.sendCompletion(ctx, m, r); err != nil { // the step as just read: no second read
				return err
			}
		default:
			if r, err = a.SendCompletion(ctx, m); err != nil {
				return err
			}
		}
		fmt.Fprintf(a.Out, "sent %s for step %d (%s) of order %s: the scheduler applies it if the step still waits (sasctl show %s)\n",
			outcome, r.Step, r.StepName, r.OrderID, r.OrderID)
		return nil
	}
}

func completionName(outcome sas.Outcome) string {
	switch outcome {
	case sas.OutcomeDone:
		return "complete"
	case sas.OutcomeFailed:
		return "fail"
	}
	return string(outcome)
}

// SendCompletion checks a completion (by token or by step) against the step
// it names, as the store shows it, and sends it to the control queue when
// that step waits for it; otherwise it sends nothing and says why. It
// returns the step's record as read. The console's approvals send theirs
// with it.
func (a *App) SendCompletion(ctx context.Context, m sas.Completion) (sas.StepRecord, error) {
	name := completionName(m.Outcome)
	t, err := completionTarget(m)
	if err != nil {
		return sas.StepRecord{}, err
	}
	r, err := a.Store.GetStep(ctx, sas.StepKey{OrderID: t.OrderID, Step: t.Step})
	if err != nil {
		return r, fmt.Errorf("%s: reading step %d of order %s: %w", name, t.Step, t.OrderID, err)
	}
	return r, a.sendCompletion(ctx, m, r)
}

// sendCompletion sends m when r, the step m names as read, waits for it;
// otherwise it sends nothing and says why.
func (a *App) sendCompletion(ctx context.Context, m sas.Completion, r sas.StepRecord) error {
	name := completionName(m.Outcome)
	t, err := completionTarget(m)
	if err != nil {
		return err
	}
	if r.ProcessState != sas.Processing || r.Attempt != t.Attempt || r.LockedBy != t.Holder || r.Generation != t.Generation || !a.now().Before(r.CompleteBy) {
		return fmt.Errorf("%s: step %d (%s) of order %s is %s at attempt %d, not waiting for this completion (attempt %d): nothing sent",
			name, t.Step, r.StepName, t.OrderID, r.ProcessState, r.Attempt, t.Attempt)
	}
	if a.ControlQueueURL == "" {
		return fmt.Errorf("%s: SAS_CONTROL_QUEUE_URL is not set", name)
	}
	if err := a.send(ctx, a.ControlQueueURL, sas.Encode(m)); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// completionTarget checks m and returns what it names: its step's fields,
// or its token's as the token says (the scheduler checks its MAC).
func completionTarget(m sas.Completion) (sas.Token, error) {
	name := completionName(m.Outcome)
	if err := m.Check(); err != nil {
		return sas.Token{}, fmt.Errorf("%s: %w", name, err)
	}
	if m.Step != nil {
		return m.Step.Token(), nil
	}
	t, err := sas.PeekToken(m.Token)
	if err != nil {
		return sas.Token{}, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}
