package sasctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sas-go/sas/internal/sas"
)

// cancel is `sasctl cancel ORDER_ID [-reason TEXT] [-dry-run]`: it says
// what it did, never more (issue 28 §4). A step in flight gets the
// cancel's mark in the store, a fenced write, and the scheduler acts when
// the step settles; a step waiting to be claimed is turned away, and the
// scheduler told to undo what took effect.
func (a *App) cancel(ctx context.Context, args []string) error {
	fs := a.flags("cancel")
	reason := fs.String("reason", "requested by operator", "why")
	dry := fs.Bool("dry-run", false, "say what a cancel would do, change nothing")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("cancel needs one order id: %w", ErrUsage)
	}
	id := pos[0]
	if *dry {
		plan, err := a.CancelPlan(ctx, id)
		if errors.Is(err, sas.ErrNotRunning) {
			fmt.Fprintf(a.Out, "would refuse: %v\n", err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("cancel %s: %w", id, err)
		}
		fmt.Fprintf(a.Out, "would cancel %s: %s\n", id, plan)
		return nil
	}
	said, err := a.CancelOrder(ctx, id, *reason)
	if errors.Is(err, sas.ErrNotRunning) {
		fmt.Fprintf(a.Out, "REFUSED: %v\n", err)
		return err
	}
	if err != nil {
		return fmt.Errorf("cancel %s: %w", id, err)
	}
	fmt.Fprintln(a.Out, said)
	return nil
}

// CancelPlan says what a cancel of the order would do now, or why it
// would be refused (sas.ErrNotRunning): the console's dry run.
func (a *App) CancelPlan(ctx context.Context, orderID string) (string, error) {
	v, err := a.Store.GetOrder(ctx, orderID)
	if err != nil {
		return "", err
	}
	targets, err := sas.CancelTargets(v)
	if err != nil {
		return "", err
	}
	if v.Cancelled() {
		return cancelSays(v, firstMarked(targets), false), nil
	}
	says := make([]string, len(targets))
	for i, r := range targets {
		says[i] = cancelSays(v, r, false)
	}
	return strings.Join(says, "; "), nil
}

// firstMarked is the first of a cancelled order's targets that carries the
// mark.
func firstMarked(targets []sas.StepRecord) sas.StepRecord {
	for _, r := range targets {
		if r.Cancelled {
			return r
		}
	}
	return targets[0]
}

// CancelOrder cancels an order as `sasctl cancel` does, and returns what
// happened, in words: each step in flight is marked (a fenced write each;
// several when branches run at once) and the cancel takes effect when they
// settle; a step waiting to be claimed is turned away by the scheduler.
// Either way the scheduler is told, on the control queue: it marks what
// moved meanwhile, turns the waiting steps away and undoes what took
// effect, or ends a waiting callback step's wait at once. An order that is
// not running is refused (sas.ErrNotRunning) with the reason.
func (a *App) CancelOrder(ctx context.Context, orderID, reason string) (string, error) {
	v, err := a.Store.GetOrder(ctx, orderID)
	if err != nil {
		return "", err
	}
	targets, err := sas.CancelTargets(v)
	if err != nil {
		return "", err
	}
	if v.State() == sas.Cancelled {
		return fmt.Sprintf("order %s was cancelled already: it ended Cancelled", orderID), nil
	}
	var marked, waiting []sas.StepRecord
	for _, r := range sas.Unmarked(targets) {
		if r.ProcessState == sas.Pending {
			// A step waiting to be claimed is turned away by the
			// scheduler, in the write that also starts the undos: written
			// here, a lost message would leave the order marked and
			// nothing undone.
			waiting = append(waiting, r)
			continue
		}
		now := a.now()
		p := sas.CancelParams{Key: r.Key(), From: r.ProcessState, Attempt: r.Attempt, Now: now, Actor: a.Actor, Reason: reason}
		m, err := a.Store.Cancel(ctx, p)
		if own, ok := sas.OwnWrite(err, a.Actor, now, p.From, p.Attempt); ok {
			m, err = own, nil // committed; the SDK's retry lost to it
		}
		if err != nil {
			return "", fmt.Errorf("step %d moved while the cancel was written (run the command again to see where it is): %w", r.Step, err)
		}
		marked = append(marked, m)
	}
	// The scheduler is told of a mark too. A step in flight is found
	// marked when its reply comes (or the supervisor hands it back), but a
	// callback step waiting for a completion has no agent to reply: the
	// scheduler ends its wait at once, where the mark alone would leave it
	// to its timeout. A step turned away already has its undos started
	// again (idempotent).
	if err := a.sendCancel(ctx, orderID, reason); err != nil {
		if len(marked) > 0 {
			return "", fmt.Errorf("the cancel is recorded but the scheduler was not told (run the command again): %w", err)
		}
		return "", fmt.Errorf("the cancel was not sent (nothing changed; run the command again): %w", err)
	}
	return cancelDone(v, targets, marked, waiting), nil
}

// cancelDone is what CancelOrder did: the steps it marked, those it left
// the scheduler to turn away, or, with neither, the order's marks as they
// were.
func cancelDone(v sas.OrderView, targets, marked, waiting []sas.StepRecord) string {
	id := v.Order.OrderID
	var b strings.Builder
	switch {
	case len(marked) == 1:
		b.WriteString(cancelSays(v, marked[0], true))
	case len(marked) > 1:
		fmt.Fprintf(&b, "cancel recorded for %s: steps %s are in flight at once; it will take effect when they have settled: "+
			"no later step starts, and what took effect is undone, newest first; the order then ends Cancelled", id, stepList(marked))
	case len(waiting) == 0:
		return cancelSays(v, firstMarked(targets), true) // marked already: the scheduler told again
	}
	if len(waiting) == 0 {
		return b.String()
	}
	if b.Len() == 0 {
		fmt.Fprintf(&b, "asked the scheduler to cancel %s: ", id)
	} else {
		b.WriteString("; and ")
	}
	which := "step " + stepList(waiting) + " waits"
	if len(waiting) > 1 {
		which = "steps " + stepList(waiting) + " wait"
	}
	fmt.Fprintf(&b, "%s to be claimed; the scheduler turns it away when it reads the request "+
		"(or, if a claim took the step first, lets it settle), then undoes what took effect (`sasctl show %s` follows it)", which, id)
	return b.String()
}

// stepList names steps as "1 (reserve), 2 (charge)".
func stepList(rs []sas.StepRecord) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = fmt.Sprintf("%d (%s)", r.Step, r.StepName)
	}
	return strings.Join(names, ", ")
}

// sendCancel sends the scheduler a cancel of the order on the control queue.
func (a *App) sendCancel(ctx context.Context, orderID, reason string) error {
	if a.ControlQueueURL == "" {
		return errors.New("SAS_CONTROL_QUEUE_URL is not set")
	}
	msg := sas.Cancel{V: sas.MessageVersion, Kind: sas.KindCancel, OrderID: orderID, Reason: reason, Actor: a.Actor}
	return a.send(ctx, a.ControlQueueURL, sas.Encode(msg))
}

// cancelSays is what a cancel does (done) or would do to the order, whose
// cancel lands on step r.
func cancelSays(v sas.OrderView, r sas.StepRecord, done bool) string {
	name := r.StepName
	if name == "" && r.Step < len(v.Order.Steps) {
		name = v.Order.Steps[r.Step]
	}
	var b strings.Builder
	switch {
	case r.ProcessState == sas.Processing && done:
		fmt.Fprintf(&b, "cancel recorded for %s: step %d (%s) is in flight (attempt %d); it will take effect when that step settles "+
			"(a callback step waiting for a completion: at once, the scheduler ends its wait): "+
			"no later step starts, and what took effect is undone, newest first; the order then ends Cancelled", v.Order.OrderID, r.Step, name, r.Attempt)
	case r.ProcessState == sas.Processing:
		fmt.Fprintf(&b, "step %d (%s) is in flight (attempt %d): the cancel would be recorded and take effect when that step settles", r.Step, name, r.Attempt)
	case r.ProcessState == sas.Pending:
		fmt.Fprintf(&b, "step %d (%s) waits to be claimed: it would never start, and what took effect would be undone", r.Step, name)
	case done && r.Cancelled:
		fmt.Fprintf(&b, "cancelled %s at step %d (%s): it will not start again; asked the scheduler to undo what took effect, newest first "+
			"(`sasctl show %s` follows it to Cancelled)", v.Order.OrderID, r.Step, name, v.Order.OrderID)
	default:
		fmt.Fprintf(&b, "order %s was cancelled at step %d (%s) already", v.Order.OrderID, r.Step, name)
	}
	return b.String()
}
