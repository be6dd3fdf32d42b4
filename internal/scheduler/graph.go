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
// step in flight as read (its state, and a cancel's mark or its absence:
// sas.StepSeen). Two branches that complete at once cannot both miss
// their join (the second write finds the first's step moved and plans
// again), and no step starts after a branch failed (the failure moved a
// step the fence holds) or a cancel marked one (cancel.go). When a step of the order has failed, the reply
// only records its step: nothing new starts, and once no step is in flight
// the compensation starts (undoOnceSettled).

// graphPlanTries bounds how often a completion plans again after a sibling
// moved under it; each try reads the order once.
const graphPlanTries = 5

// doneInGraph records a forward step's done reply in a workflow with
// branches (see above) and makes its effects. elapsed makes it the end of
// a wait step, fenced on its due time as in a straight line (timer.go).
func (s *Service) doneInGraph(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, elapsed bool, now time.Time) error {
	key := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	for tries := 1; ; tries++ {
		if o.steps == nil || tries > 1 { // read already by boundResult for a step after the first
			if err := s.read(ctx, &o); err != nil {
				return err
			}
		}
		failing := callsForCompensation(o)
		p := sas.CompleteParams{Key: key, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now, Result: rep.Result, Graph: true,
			Elapsed: elapsed, Run: rep.Timing(), By: completerOf(ctx)} // for people (the console), never read back
		var ready []int
		if !failing {
			ready, p.Skip = planInGraph(o, rep.Step, rep.Result)
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
					p.Siblings = append(p.Siblings, sas.SeenOf(r))
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
		if want := 1 + len(ready) + len(p.Skip); len(recs) != want {
			return fmt.Errorf("completing step %s: the store returned %d records, not %d", key, len(recs), want)
		}
		for _, r := range recs {
			o.put(r)
		}
		s.log.InfoContext(ctx, "step done", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "started", ready)
		for _, k := range p.Skip {
			s.log.InfoContext(ctx, "step not run", "order", rep.OrderID, "step", k.Step, "state", k.To(), "reason", k.Reason)
		}
		s.emitStep(ctx, o, rep.Step, false, now, metrics.StepsDone)
		if o.allDone(rep.Step) {
			s.emitOrder(ctx, metrics.OrdersProcessed, o.id(), o.ord.Workflow, now)
		}
		for _, c := range recs[1 : 1+len(ready)] {
			s.dispatch(ctx, u, o, o.wf.Steps[c.Step], c)
		}
		s.stepDone(ctx, u, o, rep, now)
		if len(p.Skip) == 1 && p.Skip[0].Failed {
			r, _ := o.step(p.Skip[0].Step)
			s.log.WarnContext(ctx, "step failed: its condition could not be evaluated", "order", o.id(), "step", r.Step, "reason", r.LastError)
			s.emitStep(ctx, o, r.Step, false, now, metrics.StepsFailed)
			// Told at once: it is never undone itself, and nothing claimed
			// here makes this reply stale (a redelivery tells it again).
			if err := s.tellConditionFailures(ctx, o, now); err != nil {
				return err
			}
			failing = true
		}
		if failing {
			return s.undoOnceSettled(ctx, u, o, now)
		}
		return nil
	}
}

// planInGraph decides what the completion of step done (its result res)
// starts, from the order's records as read: each step ready once done is
// Processed (sas.Ready) is judged by its condition (judge, on the results
// of the steps it follows, directly or not). One that runs is claimed; one
// whose condition is false is skipped, and counts as settled for the steps
// after it, which are decided in turn in the same write (a skipped step
// contributes no result and is never undone); one whose condition cannot
// be evaluated fails alone, and nothing else starts.
func planInGraph(o order, done int, res []byte) (claims []int, skips []sas.Skip) {
	recs := make([]sas.StepRecord, len(o.steps))
	copy(recs, o.steps)
	at := map[int]int{}
	for i, r := range recs {
		at[r.Step] = i
	}
	if i, ok := at[done]; ok {
		recs[i].ProcessState, recs[i].Result = sas.Processed, res
	}
	seen := map[int]bool{}
	for more := true; more; {
		more = false
		for _, j := range sas.Ready(o.wf, recs) {
			if seen[j] {
				continue
			}
			seen[j] = true
			run, k := judge(o, j, sas.ResultsOf(recs, o.wf.Ancestors(j)))
			switch {
			case run:
				claims = append(claims, j)
			case k.Failed:
				return nil, []sas.Skip{k}
			default:
				skips = append(skips, k)
				recs[at[j]].ProcessState = sas.Skipped
				more = true // the steps after it may be ready now
			}
		}
	}
	return claims, skips
}

// duplicateDoneInGraph repeats the effects of a forward step's success
// that another delivery recorded: the requests of the steps its write
// claimed, on a redelivery while no pick-up was reported (resend), the
// statuses, the failure of a step it failed by its condition, and the
// compensation if the order failed meanwhile and has settled.
func (s *Service) duplicateDoneInGraph(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply, now time.Time) error {
	if err := s.read(ctx, &o); err != nil {
		return err
	}
	for _, r := range claimedWith(o, rep.Step) {
		if s.resend(ctx, r, now) {
			s.dispatch(ctx, u, o, o.wf.Steps[r.Step], r)
		}
		if err := s.resendStopped(ctx, u, o, r, now); err != nil { // fanout.go
			return err
		}
	}
	s.stepDone(ctx, u, o, rep, now)
	for _, j := range startedBy(o, rep.Step) {
		if r, ok := o.step(j); ok && r.ProcessState == sas.Error && r.FailedBy == sas.ByCondition && r.Attempt == 0 {
			// Its completion failed a step by its condition: told again.
			if err := s.tellConditionFailures(ctx, o, now); err != nil {
				return err
			}
			break
		}
	}
	if callsForCompensation(o) {
		return s.undoOnceSettled(ctx, u, o, now)
	}
	return nil
}

// claimedWith are the steps the write that completed step claimed, as the
// order's records show them: held at their first attempt (or a fan-out
// stopped since its start: resendStopped), claimed at the moment of that
// completion (one write, one time). Not only its successors: a completion
// claims every step ready (sas.Ready).
func claimedWith(o order, step int) []sas.StepRecord {
	done, ok := o.step(step)
	if !ok || done.ProcessState != sas.Processed {
		return nil
	}
	at := sas.CompletedAt(done)
	var out []sas.StepRecord
	for _, r := range o.steps {
		stopped := r.ProcessState == sas.Error && r.ForEachCount > 0
		if (r.ProcessState != sas.Processing && !stopped) || r.Attempt != 1 {
			continue
		}
		for _, h := range r.History {
			if h.From == sas.Pending && h.To == sas.Processing && h.Attempt == 1 && h.At.Equal(at) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// startedBy are the steps the completion of step may have started or
// decided: those that follow it, and those that follow a step it skipped,
// as the order's records show them.
func startedBy(o order, step int) []int {
	var out []int
	seen := map[int]bool{}
	for queue := []int{step}; len(queue) > 0; queue = queue[1:] {
		for _, j := range o.wf.Succs(queue[0]) {
			if seen[j] {
				continue
			}
			seen[j] = true
			out = append(out, j)
			if r, ok := o.step(j); ok && r.ProcessState == sas.Skipped {
				queue = append(queue, j)
			}
		}
	}
	return out
}

// skippedBy are the steps the completion of step skipped, as the order's
// records show them (what a redelivery tells again): in a straight line
// the Skipped steps after it up to the next that is not; in a graph the
// Skipped steps among those it may have decided (startedBy).
func skippedBy(o order, step int) []sas.Skip {
	if !o.wf.Graph() {
		return skippedAfter(o, step)
	}
	var out []sas.Skip
	for _, j := range startedBy(o, step) {
		if r, ok := o.step(j); ok && r.ProcessState == sas.Skipped {
			out = append(out, sas.Skip{Step: j, Reason: r.LastHistoryReason()})
		}
	}
	return out
}

// undoOnceSettled is "let the steps in flight settle, then undo": the one
// place that decides when a failed order's compensation starts while other
// steps may still be running (a branch of a graph; a cancellation's steps
// in flight, whose last to settle starts it through afterCancel). It reads the order after the caller's write, so that of the
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
	return s.undoIfSettled(ctx, u, o, now)
}

// undoIfSettled is undoOnceSettled on the order as o holds it, read after
// the caller's last write.
func (s *Service) undoIfSettled(ctx context.Context, u *outbox.Unit, o order, now time.Time) error {
	for _, r := range o.steps {
		if inFlight(r) {
			s.log.InfoContext(ctx, "a step in flight settles before anything is undone", "order", o.id(),
				"step", r.Step, "stepName", o.wf.Steps[r.Step].Name, "state", r.ProcessState, "attempt", r.Attempt)
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

// allDone reports whether the order is Processed once step is: in a
// straight line, step is the last or every step after it was skipped
// (ranAfter); in a graph, every other step is Processed or Skipped (its
// records read).
func (o order) allDone(step int) bool {
	if !o.wf.Graph() {
		return ranAfter(o, step) < 0
	}
	if len(o.steps) != o.n() {
		return false
	}
	for _, r := range o.steps {
		if !sas.Passed(r) && r.Step != step {
			return false
		}
	}
	return true
}

// waitsOn returns a step that step follows and that is not Processed or
// Skipped, if any: a retry of a step still waiting for it would run out
// of order.
func (o order) waitsOn(step int) (sas.StepRecord, bool) {
	for _, p := range o.wf.Preds(step) {
		if r, ok := o.step(p); ok && !sas.Passed(r) {
			return r, true
		}
	}
	return sas.StepRecord{}, false
}

// startRoots claims and dispatches the steps of a new order that start
// with it besides the first (a graph's steps that follow none): one Claim
// each. A claim lost to another delivery is that one's to send; a root
// left unclaimed (the intake died here) is claimed by the intake's
// redelivery, or, ready from its submission, handed back by the supervisor
// at its pick-up deadline.
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
