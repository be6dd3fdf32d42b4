package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/msgctx"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// Intake handles an application's order (docs/protocol.md, "intake"): the
// order and its state records are written in one transaction with the first
// step already claimed, then the first request is sent and "received"
// posted. A redelivered intake finds the order and repeats the side effects;
// an invalid one, or one reusing an order id with other content, is rejected.
func (s *Service) Intake(ctx context.Context, body []byte) error {
	return s.run(ctx, func(u *outbox.Unit) error { return s.intake(ctx, u, body, Origin{Source: FromIntake}) })
}

// intake handles one intake message from from: its SQS message id, which
// a rejection echoes so that a caller can match it to what it sent, and its
// sender, whose order it is (sas.Order.Submitter).
func (s *Service) intake(ctx context.Context, u *outbox.Unit, body []byte, from Origin) error {
	messageID, submitter := from.MessageID, sas.SubmitterOf(from.SenderID)
	replyTo := func(url string) bool { return s.cfg.SubmitterReplyTo(submitter, url) }
	in, err := sas.ParseIntake(body, sas.IntakeRules{Workflows: s.cfg.Workflows.Has, ReplyToAllowed: replyTo})
	if err != nil {
		return s.reject(ctx, u, in, messageID, submitter, err)
	}
	// The id alone says whose it may be, before any read: a sender learns
	// nothing of another tenant's orders (docs/trust.md, "Tenants").
	if err := s.cfg.Tenants.CheckOrderID(submitter, in.OrderID); err != nil {
		return s.reject(ctx, u, in, messageID, submitter, err)
	}
	for decisions := 1; ; decisions++ {
		run, err := s.decideRun(ctx, in, submitter)
		switch {
		case errors.Is(err, sas.ErrInvalid):
			return s.reject(ctx, u, in, messageID, submitter, err)
		case err != nil:
			return err
		case run.skip != "":
			return s.skipRun(ctx, in, run.skip)
		}
		err = s.submit(ctx, u, in, messageID, submitter, run.claim)
		if run.claim == nil || !run.claim.Exclusive || !errors.Is(err, sas.ErrLostRace) || decisions == maxRunDecisions {
			return err
		}
		// Another run of the schedule started since the read: decide again.
	}
}

// submit writes the order of an intake, and, for a schedule's run, its
// schedule's state with it (run).
func (s *Service) submit(ctx context.Context, u *outbox.Unit, in sas.Intake, messageID, submitter string, run *sas.RunClaim) error {
	w := s.cfg.Workflows[in.Workflow]
	if err := s.storeDefinition(ctx, w); err != nil {
		return err
	}
	now := s.cfg.Clock.Now()
	o := sas.Order{
		OrderID: in.OrderID, Workflow: in.Workflow, Payload: in.Payload,
		ReplyTo: in.ReplyTo, Priority: in.Priority, Steps: w.StepNames(), After: w.After(), Submitter: submitter,
		Version: s.defs.Registered(in.Workflow),
		// The submitter's trace, or one started here: every message about
		// the order carries it (docs/observability.md).
		Trace: sas.OrderTrace(in.Trace, sas.NewTrace(in.OrderID, now)),
	}
	ctx = msgctx.WithTrace(ctx, o.Trace)
	// The first steps' conditions, if any, decide which step runs first
	// (choice.go); the others are settled in the same write.
	first := choice{next: 0}
	if w.Steps[0].When != "" {
		first = nextToRun(order{ord: o, wf: w}, 0, nil)
	}
	sp := sas.SubmitParams{Order: o, Now: now, PickupBy: now.Add(s.cfg.PickupTimeout), Skip: first.skips, Run: run}
	later := in.StartAt != nil && in.StartAt.After(now)
	if later {
		// Starting later (startat.go): the first step to run stays
		// unclaimed, its pick-up deadline the start time.
		if in.StartAt.After(now.Add(sas.MaxWait)) {
			return s.reject(ctx, u, in, messageID, submitter, &sas.ValidationError{Field: "startAt",
				Reason: fmt.Sprintf("%s is more than %s ahead", in.StartAt.UTC().Format(time.RFC3339), sas.MaxWait)})
		}
		sp.PickupBy = in.StartAt.UTC()
	}
	if first.next >= 0 && !later {
		// Created already claimed: one transaction instead of submit + claim
		// on the hot path, and no window in which the first step is unowned.
		sp.Claim = &sas.ClaimParams{Owner: s.cfg.Owner, Now: now, CompleteBy: s.leaseEnd(w.Steps[first.next], false, 0, now)}
	}
	res, err := s.cfg.Store.Submit(ctx, sp)
	switch {
	case errors.Is(err, sas.ErrOrderConflict):
		return s.conflict(ctx, u, in, messageID, submitter, err)
	case errors.Is(err, sas.ErrInvalid):
		return s.reject(ctx, u, in, messageID, submitter, err)
	case err != nil:
		// Includes a lost race with a concurrent submission of the same
		// order: the redelivery finds the order and takes the duplicate branch.
		return fmt.Errorf("submitting order %s: %w", in.OrderID, err)
	}
	ord := order{ord: res.View.Order, wf: w, steps: res.View.Steps}
	if !res.Created && !ord.ord.SameSubmitter(submitter) {
		// The same content from another sender: the order is not its own,
		// so it is told nothing, and the owner is not posted to again.
		s.log.WarnContext(ctx, "intake refused: the order id is another submitter's", "order", in.OrderID,
			"submitter", submitter, "ownedBy", ord.ord.Submitter)
		return drop(nil, "intake of order %s from %s: the order id is another submitter's", in.OrderID, submitter)
	}
	if !res.Created {
		// The order may have been submitted before a deploy changed its
		// workflow: it runs on its own version.
		if ord.wf, err = s.workflow(ctx, ord.ord.Workflow, ord.ord.Version); err != nil {
			return fmt.Errorf("order %s: %w", in.OrderID, err)
		}
	}
	if res.Created && later && first.next >= 0 {
		s.log.InfoContext(ctx, "order submitted to start later", "order", o.OrderID, "workflow", o.Workflow, "steps", len(o.Steps), "startAt", sp.PickupBy)
		s.emitOrder(ctx, metrics.OrdersSubmitted, o.OrderID, o.Workflow, now)
		s.post(ctx, u, o, sas.Status{Status: sas.StatusReceived, Sequence: SeqReceived()}, now)
		s.postSkipped(ctx, u, ord, first.skips, now)
		s.startLater(u, ord, first.next, sp.PickupBy, now)
		for _, i := range w.Roots() {
			s.startLater(u, ord, i, sp.PickupBy, now) // a graph's other steps that start with the order
		}
		return nil
	}
	if res.Created && len(first.skips) > 0 {
		s.log.InfoContext(ctx, "order submitted", "order", o.OrderID, "workflow", o.Workflow, "steps", len(o.Steps), "notRun", len(first.skips))
		s.emitOrder(ctx, metrics.OrdersSubmitted, o.OrderID, o.Workflow, now)
		s.post(ctx, u, o, sas.Status{Status: sas.StatusReceived, Sequence: SeqReceived()}, now)
		s.postSkipped(ctx, u, ord, first.skips, now)
		return s.submittedPast(ctx, u, ord, first, now)
	}
	if res.Created {
		first, ok := ord.step(0)
		if !ok {
			return fmt.Errorf("submitting order %s: the store returned no first step", in.OrderID)
		}
		s.dispatch(ctx, u, ord, w.Steps[0], first)
		if err := s.startRoots(ctx, u, ord, now); err != nil {
			return err
		}
		s.log.InfoContext(ctx, "order submitted", "order", o.OrderID, "workflow", o.Workflow, "steps", len(o.Steps))
		s.emitOrder(ctx, metrics.OrdersSubmitted, o.OrderID, o.Workflow, now)
	} else {
		// The stored order's trace, which its requests carry already
		// (none for an order stored before traces: this intake's then).
		o.Trace = sas.OrderTrace(ord.ord.Trace, o.Trace)
		ord.ord.Trace = o.Trace
		ctx = msgctx.WithTrace(ctx, o.Trace)
		s.log.InfoContext(ctx, "duplicate intake: order exists", "order", o.OrderID)
		if err := s.redispatchLive(ctx, u, ord, now); err != nil {
			return err
		}
		if redelivered(ctx) && !later {
			// The first delivery may have stopped before it claimed every
			// step that starts with the order (graph.go). Not before the
			// order's start time (startat.go): the retries or the sweep
			// start them then.
			if err := s.startRoots(ctx, u, ord, now); err != nil {
				return err
			}
		}
		if err := s.resubmitted(ctx, u, ord, now); err != nil {
			return err
		}
	}
	if res.Created || redelivered(ctx) {
		// Posted by the delivery that created the order, and again by its
		// redeliveries (the first may have stopped before posting); a
		// duplicate intake posts nothing (docs/intake.md).
		s.post(ctx, u, o, sas.Status{Status: sas.StatusReceived, Sequence: SeqReceived()}, now)
	}
	return nil
}

// redispatchLive re-sends the request of the order's in-flight step on a
// redelivery of its intake, while no pick-up was reported (resend): the
// first delivery may have stopped between the write and the send. So for
// a fan-out it started that stopped since: the elements it claimed and
// never sent (resendStopped; the simulator's seed 19083), and for a
// fan-out it started whose list could not be evaluated: what that failure
// owes (startFailedAgain; seed 1984). A duplicate intake (another message
// for the same order) sends nothing.
func (s *Service) redispatchLive(ctx context.Context, u *outbox.Unit, o order, now time.Time) error {
	first := ranAfter(o, -1) // in a line, the step the intake started
	for _, r := range o.steps {
		if r.Step < o.n() && o.wf.Graph() && len(o.wf.Preds(r.Step)) > 0 {
			continue // in a graph, only the steps that start with the order are the intake's (the others, their completions')
		}
		if s.resend(ctx, r, now) && r.Step < o.n() {
			s.dispatch(ctx, u, o, o.wf.Steps[r.Step], r)
		}
		if err := s.resendStopped(ctx, u, o, r, now); err != nil { // fanout.go
			return err
		}
		if redelivered(ctx) && r.Step < o.n() && (o.wf.Graph() || r.Step == first) && startFailed(o.wf.Steps[r.Step], r) {
			if err := s.startFailedAgain(ctx, u, o, r); err != nil { // fanout.go
				return err
			}
		}
	}
	return nil
}

// conflict rejects an intake that reuses an order id with other content.
// Its rejection goes to the intake's replyTo, unless that is where the
// stored order's statuses go and the intake is not from the order's
// submitter: a sender could otherwise post "rejected" to another's queue
// for the other's running order (docs/trust.md, "Submitters").
func (s *Service) conflict(ctx context.Context, u *outbox.Unit, in sas.Intake, messageID, submitter string, cause error) error {
	v, err := s.cfg.Store.GetOrder(ctx, in.OrderID)
	if err != nil {
		return fmt.Errorf("reading order %s, whose id an intake with other content reuses: %w", in.OrderID, err)
	}
	if sas.ReplyQueueURL(in.ReplyTo) == v.Order.ReplyTo && !v.Order.SameSubmitter(submitter) {
		s.log.WarnContext(ctx, "intake rejected without a status: it reuses another submitter's order id and names its replyTo",
			"order", in.OrderID, "submitter", submitter, "ownedBy", v.Order.Submitter)
		return drop(cause, "intake rejected")
	}
	return s.reject(ctx, u, in, messageID, submitter, cause)
}

// reject tells the submitter (when it named a queue the deployment allows)
// and drops the message: a poison message is never retried.
func (s *Service) reject(ctx context.Context, u *outbox.Unit, in sas.Intake, messageID, submitter string, cause error) error {
	reason := cause.Error()
	if errors.Is(cause, sas.ErrOrderConflict) {
		reason = "order id " + in.OrderID + " is already used by an order with different content"
	}
	// ParseIntake may return a replyTo it has not checked yet (the message
	// failed an earlier check): never post to a queue the deployment does
	// not allow.
	in.ReplyTo = sas.ReplyQueueURL(in.ReplyTo) // an ARN, in a message that failed before its check
	if in.ReplyTo != "" && s.cfg.SubmitterReplyTo(submitter, in.ReplyTo) {
		st := sas.Status{Status: sas.StatusRejected, Sequence: SeqRejected, Reason: reason, MessageID: messageID}
		o := sas.Order{OrderID: in.OrderID, ReplyTo: in.ReplyTo}
		s.post(ctx, u, o, st, s.cfg.Clock.Now())
	}
	return drop(cause, "intake rejected")
}
