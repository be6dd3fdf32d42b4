package sasctl

import (
	"context"
	"errors"
	"fmt"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
)

func (a *App) resubmit(ctx context.Context, args []string) error {
	fs := a.flags("resubmit")
	step := fs.Int("step", -1, "the step to resubmit (default: every step of the order in Error)")
	all := fs.Bool("all", false, "resubmit every step in Error")
	dry := fs.Bool("dry-run", false, "list what would be resubmitted, change nothing")
	limit := fs.Int("limit", 1000, "at most this many steps with -all")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	var targets []sas.StepRecord
	switch {
	case *all && len(pos) == 0:
		if targets, err = a.collect(ctx, sas.Error, *limit); err != nil {
			return fmt.Errorf("resubmit: %w", err)
		}
	case !*all && len(pos) == 1:
		v, err := a.Store.GetOrder(ctx, pos[0])
		if err != nil {
			return fmt.Errorf("resubmit %s: %w", pos[0], err)
		}
		for _, r := range v.Steps {
			if r.ProcessState == sas.Error && (*step < 0 || r.Step == *step) {
				targets = append(targets, r)
			}
		}
		if len(targets) == 0 {
			return fmt.Errorf("resubmit %s: no step in Error%s: %w", pos[0], stepSuffix(*step), sas.ErrNotFound)
		}
	default:
		return fmt.Errorf("resubmit takes one order id, or -all: %w", ErrUsage)
	}
	var failed, refused int
	for _, r := range targets {
		// The same rule the store applies (sas.CanResubmit), so a dry run
		// shows what the real run will refuse, and why.
		if why := a.refusal(ctx, r); why != nil {
			refused++
			if *dry {
				fmt.Fprintf(a.Out, "would refuse %s step %d (%s): %v\n", r.OrderID, r.Step, r.StepName, why)
			} else {
				fmt.Fprintf(a.Out, "REFUSED %s step %d (%s): %v\n", r.OrderID, r.Step, r.StepName, why)
			}
			continue
		}
		if cur, err := a.Store.GetStep(ctx, r.Key()); err == nil && sas.NewKeyOnResubmit(cur) {
			// A refusal is not proof of no effect: the operator hears which
			// key may carry a twin's effect, before and as it happens (the
			// record read whole: a listing's may not say it was refused).
			fmt.Fprintf(a.Out, "note: %s\n", sas.ResubmitKeyNote(cur.OrderID, cur.Step, cur.Generation+1))
		}
		if *dry {
			fmt.Fprintf(a.Out, "would resubmit %s step %d (%s): %s\n", r.OrderID, r.Step, r.StepName, dash(r.LastError))
			continue
		}
		if err := a.resubmitOne(ctx, r); err != nil {
			failed++
			fmt.Fprintf(a.Out, "FAILED %s step %d: %v\n", r.OrderID, r.Step, err)
			continue
		}
		fmt.Fprintf(a.Out, "resubmitted %s step %d (%s)\n", r.OrderID, r.Step, r.StepName)
	}
	verb := "resubmitted"
	if *dry {
		verb = "would resubmit (dry run)"
	}
	if refused == 0 {
		fmt.Fprintf(a.Out, "%s %d step(s), %d failed\n", verb, len(targets)-failed, failed)
	} else {
		fmt.Fprintf(a.Out, "%s %d step(s), %d failed, %d refused\n", verb, len(targets)-failed-refused, failed, refused)
	}
	switch {
	case *dry:
		return nil
	case failed > 0:
		return fmt.Errorf("resubmit: %d of %d failed, %d refused", failed, len(targets), refused)
	case refused > 0:
		return fmt.Errorf("resubmit: %d of %d refused: %w", refused, len(targets), sas.ErrInvalid)
	}
	return nil
}

// refusal says why a step may not be resubmitted (sas.CanResubmit on its
// order as read now), or nil. A read that fails is a refusal too: nothing
// is written without the check.
func (a *App) refusal(ctx context.Context, r sas.StepRecord) error {
	v, err := a.Store.GetOrder(ctx, r.OrderID)
	if err != nil {
		return fmt.Errorf("reading order %s: %w", r.OrderID, err)
	}
	return sas.CanResubmit(v, r.Step)
}

func stepSuffix(step int) string {
	if step < 0 {
		return ""
	}
	return fmt.Sprintf(" at step %d", step)
}

// resubmitOne puts the step back to Pending (fenced on the attempt the
// operator saw) and tells the schedulers. If the message is lost, the step
// is Pending with a pick-up deadline and the supervisor re-drives it.
func (a *App) resubmitOne(ctx context.Context, r sas.StepRecord) error {
	now := a.Clock.Now()
	rec, err := a.Store.Resubmit(ctx, sas.ResubmitParams{Key: r.Key(), Attempt: r.Attempt, Now: now,
		PickupBy: now.Add(a.PickupTimeout), Actor: a.Actor, Reason: "resubmitted by operator"})
	if own, ok := sas.OwnWrite(err, a.Actor, now, sas.Pending, r.Attempt+1); ok { // a resubmit moves the attempt on
		rec, err = own, nil // committed; the SDK's retry lost to it
	}
	if err != nil {
		return err
	}
	if a.ControlQueueURL == "" {
		return errors.New("SAS_CONTROL_QUEUE_URL is not set (the step is Pending; the supervisor will re-drive it)")
	}
	retry := sas.Retry{V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: rec.OrderID, Step: rec.Step, Attempt: rec.Attempt, Reason: "resubmitted by " + a.Actor}
	if err := a.send(ctx, a.ControlQueueURL, sas.Encode(retry)); err != nil {
		return fmt.Errorf("the step is Pending but the retry message failed (the supervisor will re-drive it): %w", err)
	}
	return nil
}

func (a *App) compensate(ctx context.Context, args []string) error {
	fs := a.flags("compensate")
	reason := fs.String("reason", "requested by operator", "why")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("compensate needs one order id: %w", ErrUsage)
	}
	if err := a.CompensateOrder(ctx, pos[0], *reason); err != nil {
		if errors.Is(err, ErrInFlight) {
			fmt.Fprintf(a.Out, "REFUSED: %v\n", err)
		}
		return err
	}
	fmt.Fprintf(a.Out, "asked the scheduler to compensate %s: no step of it is in flight, so the undos start when it reads the request (`sasctl show %s` follows them)\n", pos[0], pos[0])
	return nil
}

// Refusal says why step r may not be resubmitted now (sas.CanResubmit on
// its order as read now), or nil: the rule every resubmit applies, the
// console's included.
func (a *App) Refusal(ctx context.Context, r sas.StepRecord) error { return a.refusal(ctx, r) }

// ResubmitStep resubmits one step in Error, as `sasctl resubmit` does: the
// fenced write, then the retry on the control queue. Check Refusal first.
func (a *App) ResubmitStep(ctx context.Context, r sas.StepRecord) error {
	if a.PickupTimeout == 0 {
		a.PickupTimeout = sizing.DefaultPickupTimeout
	}
	if a.Clock == nil {
		a.Clock = sas.SystemClock{}
	}
	return a.resubmitOne(ctx, r)
}

// CompensateOrder asks the scheduler, on the control queue, to compensate
// an order, as `sasctl compensate` does.
//
// An order with a step in flight is refused (ErrInFlight) rather than
// sent: the scheduler drops a compensate while a step could still take
// effect, and saying "asked" then would be saying it worked when nothing
// happened. Cancel it instead: the cancel is recorded and takes effect
// when the step settles.
func (a *App) CompensateOrder(ctx context.Context, orderID, reason string) error {
	v, err := a.Store.GetOrder(ctx, orderID)
	if err != nil {
		return fmt.Errorf("compensate %s: %w", orderID, err)
	}
	if why := InFlight(v); why != "" {
		return fmt.Errorf("compensate %s: %s: %w", orderID, why, ErrInFlight)
	}
	if a.ControlQueueURL == "" {
		return errors.New("compensate: SAS_CONTROL_QUEUE_URL is not set")
	}
	msg := sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: orderID, Reason: reason, Actor: a.Actor}
	if err := a.send(ctx, a.ControlQueueURL, sas.Encode(msg)); err != nil {
		return fmt.Errorf("compensate %s: %w", orderID, err)
	}
	return nil
}

// ErrInFlight: a compensate of an order with a step in flight is refused
// (the scheduler would drop it); `sasctl cancel` is what takes effect.
var ErrInFlight = errors.New("the scheduler would drop a compensate now; `sasctl cancel` records the request and takes effect when the step settles")

// InFlight names the order's step that could still take effect (held, or
// ready to be claimed), as the scheduler's compensate checks it; "" when
// none.
func InFlight(v sas.OrderView) string {
	for _, r := range v.Steps {
		if r.InFlight() {
			return fmt.Sprintf("step %d (%s) is %s and could still take effect", r.Step, r.StepName, r.ProcessState)
		}
	}
	return ""
}
