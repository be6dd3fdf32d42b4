package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// Branches in parallel (docs/workflows.md, "Branches in parallel";
// docs/protocol.md, "Branches"). A workflow that is not a graph takes none
// of these paths: its done reply reads nothing and claims the step after
// it in the same write, as it always did.
//
// In a graph, a forward step's done reply reads the order, then writes in
// one transaction: the step Processed, the claims of the steps it makes
// ready (every step they follow Processed), and a fence on every other
// step in flight as read. Two branches that complete at once cannot both
// miss their join (the second write finds the first's step moved and plans
// again), and no step starts after a branch failed (the failure moved a
// step the fence holds). When a step of the order has failed, the reply
// only records its step: nothing new starts, and once no step is in flight
// the compensation starts (undoOnceSettled).

// graphPlanTries bounds how often a completion plans again after a sibling
// moved under it; each try reads the order once.
const graphPlanTries = 5

// doneInGraph records a forward step's done reply in a workflow with
// branches (see above) and makes its effects.
func (s *Service) doneInGraph(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, now time.Time) error {
	key := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	for tries := 1; ; tries++ {
		if o.steps == nil || tries > 1 { // read already by boundResult for a step after the first
			if err := s.read(ctx, &o); err != nil {
				return err
			}
		}
		failing := callsForCompensation(o)
		p := sas.CompleteParams{Key: key, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now, Result: rep.Result,
			Run: rep.Timing()} // for people (the console), never read back
		var ready []int
		if !failing {
			ready = sas.ReadyAfter(o.wf, o.steps, rep.Step)
			for i, j := range ready {
				cp := s.claimParams(o, sas.StepRecord{OrderID: rep.OrderID, Step: j}, sas.Pending, now)
				if i == 0 {
					p.Next = cp
				} else {
					p.More = append(p.More, *cp)
				}
			}
			for _, r := range o.steps {
				if r.Step != rep.Step && inFlight(r) {
					p.Siblings = append(p.Siblings, sas.StepSeen{Step: r.Step, State: r.ProcessState})
				}
			}
		}
		recs, err := s.cfg.Store.Complete(ctx, p)
		var re *sas.RaceError
		if errors.As(err, &re) && re.Key != key && tries < graphPlanTries {
			// Another step of the order moved since the read (a branch
			// completed or failed): plan again from the order as it is.
			s.log.InfoContext(ctx, "a branch moved while the step's completion was planned; planning again", "order", rep.OrderID,
				"step", rep.Step, "moved", re.Key.Step)
			continue
		}
		if err != nil {
			return s.refused(ctx, u, o, rep, err, now)
		}
		if len(recs) != 1+len(ready) {
			return fmt.Errorf("completing step %s: the store returned %d records for %d claims", key, len(recs), len(ready))
		}
		for _, r := range recs {
			o.put(r)
		}
		s.log.InfoContext(ctx, "step done", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "started", ready)
		s.emitStep(ctx, o, rep.Step, false, now, metrics.StepsDone)
		if o.allDone(rep.Step) {
			s.emitOrder(ctx, metrics.OrdersProcessed, o.id(), o.ord.Workflow, now)
		}
		for _, c := range recs[1:] {
			s.dispatch(ctx, u, o, o.wf.Steps[c.Step], c)
		}
		s.stepDone(ctx, u, o, rep, now)
		if failing {
			return s.undoOnceSettled(ctx, u, o, now)
		}
		return nil
	}
}

// duplicateDoneInGraph repeats the effects of a forward step's success
// that another delivery recorded: the requests of the branches it started
// while their leases run, the statuses, and the compensation if the order
// failed meanwhile and has settled.
func (s *Service) duplicateDoneInGraph(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, now time.Time) error {
	if err := s.read(ctx, &o); err != nil {
		return err
	}
	for _, j := range o.wf.Succs(rep.Step) {
		if r, ok := o.step(j); ok && r.ProcessState == sas.Processing && live(r, now) {
			s.dispatch(ctx, u, o, o.wf.Steps[j], r)
		}
	}
	s.stepDone(ctx, u, o, rep, now)
	if callsForCompensation(o) {
		return s.undoOnceSettled(ctx, u, o, now)
	}
	return nil
}

// undoOnceSettled is "let the steps in flight settle, then undo": the one
// place that decides when a failed order's compensation starts while other
// steps may still be running (a branch of a graph; a cancellation's steps
// in flight). It reads the order after the caller's write, so that of the
// steps that settle at once the last to write sees every other settled: if
// a forward step is still in flight (held, or ready for a claim), nothing
// is undone yet and that step's outcome calls this again; else the
// compensation starts, newest completion first, fenced on the order as
// read (startCompensation). No undo is sent before its step's outcome is
// known, or the supervisor has given the step up at its deadline (an undo
// commutes with what it undoes: docs/protocol.md, "Idempotency keys").
func (s *Service) undoOnceSettled(ctx context.Context, u *outbox.Unit, o order, now time.Time) error {
	if err := s.read(ctx, &o); err != nil {
		return err
	}
	for _, r := range o.steps {
		if inFlight(r) {
			s.log.InfoContext(ctx, "order failed; a step in flight settles before anything is undone", "order", o.id(),
				"step", r.Step, "state", r.ProcessState)
			return nil
		}
	}
	_, err := s.startCompensation(ctx, u, o, false, now)
	return err
}

// undoOrder is the order in which a compensation considers the steps:
// newest first. In a straight line that is the highest step first; in a
// graph, the latest completion (or failure) first, whatever its branch.
func undoOrder(o order) []int {
	out := make([]int, 0, o.n())
	if !o.wf.Graph() {
		for i := o.n() - 1; i >= 0; i-- {
			out = append(out, i)
		}
		return out
	}
	recs := slices.Clone(o.steps)
	sas.NewestFirst(recs)
	for _, r := range recs {
		out = append(out, r.Step)
	}
	return out
}

// allDone reports whether the order is Processed once step is: the last
// step of a straight line, or every step of a graph (its records read).
func (o order) allDone(step int) bool {
	if !o.wf.Graph() {
		return step+1 == o.n()
	}
	if len(o.steps) != o.n() {
		return false
	}
	for _, r := range o.steps {
		if r.ProcessState != sas.Processed && r.Step != step {
			return false
		}
	}
	return true
}

// waitsOn returns a step that step follows and that is not Processed, if
// any: a retry of a step still waiting for it would run out of order.
func (o order) waitsOn(step int) (sas.StepRecord, bool) {
	for _, p := range o.wf.Preds(step) {
		if r, ok := o.step(p); ok && r.ProcessState != sas.Processed {
			return r, true
		}
	}
	return sas.StepRecord{}, false
}

// startRoots claims and dispatches the steps of a new order that start
// with it besides the first (a graph's steps that follow none): one Claim
// each. A claim lost to another delivery is that one's to send; a root
// left unclaimed (the intake died here) is ready from its submission, so
// the supervisor hands it back at its pick-up deadline.
func (s *Service) startRoots(ctx context.Context, u *outbox.Unit, o order, now time.Time) error {
	for _, i := range o.wf.Roots() {
		r, ok := o.step(i)
		if !ok || r.ProcessState != sas.Pending || r.Attempt != 0 {
			continue
		}
		claimed, err := s.cfg.Store.Claim(ctx, *s.claimParams(o, r, sas.Pending, now))
		if errors.Is(err, sas.ErrLostRace) {
			continue
		}
		if err != nil {
			return fmt.Errorf("claiming step %s, which starts with its order: %w", r.Key(), err)
		}
		o.put(claimed)
		s.dispatch(ctx, u, o, o.wf.Steps[i], claimed)
	}
	return nil
}
