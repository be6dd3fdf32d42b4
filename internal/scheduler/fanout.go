package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/condition"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// Fan-out over a list (docs/workflows.md, "Fan-out over a list";
// docs/decisions.md, "Fan-out elements are records of their own"). The
// fan-out step is claimed as any step; instead of a request, its claim's
// dispatch evaluates the list and starts the fan-out (startFanOut): the
// step records the count and the first window of elements is claimed in
// the same write, each element a record and a request of its own. An
// element's done reply completes it, counts it on the step and claims the
// element one window further, in one write (elementReply); the reply that
// counts the last element completes the step with the elements' results
// in index order, as the agent's reply of a plain step would
// (finishFanOut), so its successors are claimed as any completion's.
//
// An empty list completes the step at once with []; a list that cannot be
// evaluated fails it for good, as a condition's. An element's failure,
// the undo of elements, their rescue and cancellation are in
// fanoutstop.go.

// fanOutStore is the store's fan-out port, or an error naming its absence.
func (s *Service) fanOutStore() (sas.FanOutStore, error) {
	fs, ok := s.cfg.Store.(sas.FanOutStore)
	if !ok {
		return nil, fmt.Errorf("the state store %T keeps no fan-out elements", s.cfg.Store)
	}
	return fs, nil
}

// forEachItems evaluates the list of fan-out step def of o: its elements,
// or the reason it fails the step. It reads the results the step sees.
func (s *Service) forEachItems(ctx context.Context, o *order, step int, def sas.StepDef) ([]sas.Item, string, error) {
	results, err := s.resultsFor(ctx, o, step, false)
	if err != nil {
		return nil, "", err
	}
	items, why := def.ForEach.Eval(condition.Input{Payload: o.ord.Payload, Results: results, OrderID: o.id(), Workflow: o.ord.Workflow})
	return items, why, nil
}

// settleStep turns an outcome the scheduler reached for fan-out step r
// itself (its list, its last element) into the reply its agent would have
// sent, applied as any.
func (s *Service) settleStep(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, r sas.StepRecord, rep sas.AgentReply) error {
	rep.V, rep.Kind, rep.OrderID, rep.Step, rep.Attempt, rep.LockedBy = sas.MessageVersion, sas.KindAgentReply, o.id(), r.Step, r.Attempt, r.LockedBy
	rep.Workflow, rep.Version, rep.Payload, rep.ReplyTo = o.ord.Workflow, o.ord.Version, o.ord.Payload, o.ord.ReplyTo
	rep.Priority, rep.StepName, rep.Generation, rep.Trace = o.ord.Priority, def.Name, r.Generation, o.ord.Trace
	if rep.Outcome == sas.OutcomeFailed || rep.Compensation {
		o.steps = nil // its effects read the order after the write, as any failure's and undo's
	}
	return s.apply(ctx, u, o, rep, false)
}

// dispatchFanOut is the dispatch of claimed fan-out step r: its start, or
// its undo, which is its elements'. A fan-out that never started (its list
// could not be evaluated) has no element to undo: its undo is done at once.
func (s *Service) dispatchFanOut(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, r sas.StepRecord) error {
	switch {
	case r.ProcessState == sas.Processing:
		return s.startFanOut(ctx, u, o, def, r)
	case r.ProcessState == sas.Compensating && r.ForEachCount == 0:
		return s.settleStep(ctx, u, o, def, r, sas.AgentReply{Outcome: sas.OutcomeDone, Compensation: true})
	case r.ProcessState == sas.Compensating:
		return s.undoElements(ctx, u, o, def, r) // fanoutstop.go
	}
	return drop(nil, "order %s step %d: a fan-out is dispatched to start or to be undone, not %s", o.id(), r.Step, r.ProcessState)
}

// startFanOut starts claimed fan-out step r.
func (s *Service) startFanOut(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, r sas.StepRecord) error {
	fs, err := s.fanOutStore()
	if err != nil {
		return err
	}
	items, why, err := s.forEachItems(ctx, &o, r.Step, def)
	if err != nil {
		return err
	}
	switch {
	case r.Cancelled && r.ForEachCount == 0:
		return s.cancelledBeforeStart(ctx, u, o, def, r)
	case why != "":
		// As a condition that cannot be evaluated: for good, nothing ran.
		return s.settleStep(ctx, u, o, def, r, sas.AgentReply{Outcome: sas.OutcomeFailed, Reason: why, ErrorType: sas.ErrorForEachItems})
	case len(items) == 0:
		return s.settleStep(ctx, u, o, def, r, sas.AgentReply{Outcome: sas.OutcomeDone, Result: []byte("[]")})
	}
	now := s.cfg.Clock.Now()
	p := sas.StartFanOutParams{Key: r.Key(), Owner: r.LockedBy, Attempt: r.Attempt, Now: now, Count: len(items), StepName: def.Name, Generation: r.Generation}
	for i := range min(def.ForEach.Window(), len(items)) {
		p.Claims = append(p.Claims, sas.ElementClaim{Index: i, Item: items[i], CompleteBy: s.leaseEnd(def, false, 0, now)})
	}
	recs, err := fs.StartFanOut(ctx, p)
	var re *sas.RaceError
	switch {
	case errors.As(err, &re) && re.Current != nil && re.Current.Key() == r.Key() && re.Current.ForEachCount > 0 &&
		re.Current.Attempt == r.Attempt && re.Current.ProcessState == sas.Processing:
		// Started by this claim's earlier delivery, which may have died
		// before its requests, or by this very write (an ambiguous commit
		// whose retry was refused: its elements' history shows p.Now):
		// those of the elements not picked up go again.
		return s.resendElements(ctx, u, o, def, r.Key(), p.Now)
	case errors.As(err, &re) && re.Current != nil && re.Current.Key() == r.Key() && re.Current.ForEachCount == 0 &&
		re.Current.Cancelled && heldAs(*re.Current, r):
		return s.cancelledBeforeStart(ctx, u, o, def, *re.Current)
	case err != nil:
		return fmt.Errorf("starting the fan-out of step %s: %w", r.Key(), err)
	}
	s.log.InfoContext(ctx, "fan-out started", "order", o.id(), "step", r.Step, "elements", len(items), "window", len(p.Claims))
	for _, e := range recs[1:] {
		s.dispatch(ctx, u, o, def, e)
	}
	return nil
}

// heldAs reports whether cur is still held as r was: the same attempt,
// Processing, by the same holder.
func heldAs(cur, r sas.StepRecord) bool {
	return cur.ProcessState == sas.Processing && cur.Attempt == r.Attempt && cur.LockedBy == r.LockedBy
}

// cancelledBeforeStart settles claimed fan-out step r, which its order's
// cancel marked before its fan-out started (sas.StartFanOut refuses a
// marked step): no element ran, and none starts; the step fails as a
// cancelled step whose attempt failed (no page; its order's compensation,
// in which its undo has no element to undo).
func (s *Service) cancelledBeforeStart(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, r sas.StepRecord) error {
	s.log.InfoContext(ctx, "fan-out cancelled before it started: no element runs", "order", o.id(), "step", r.Step)
	return s.settleStep(ctx, u, o, def, r, sas.AgentReply{Outcome: sas.OutcomeFailed,
		Reason: "cancelled before its fan-out started: no element ran"})
}

// resendElements sends again the requests of step key's elements held and
// not picked up: all of them on a redelivery, those this handler's own
// write at now claimed otherwise (sas.OwnWrite, as resend judges a step's).
func (s *Service) resendElements(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, key sas.StepKey, now time.Time) error {
	els, err := s.elements(ctx, key)
	if err != nil {
		return err
	}
	for _, e := range els {
		if e.ProcessState == sas.Processing && s.resend(ctx, e, now) {
			s.dispatch(ctx, u, o, def, e)
		}
	}
	return nil
}

// resendStopped sends again, on a redelivery of the message whose handling
// claimed fan-out step r, the requests of its elements held and not picked
// up when the fan-out has stopped since (Error): that handling may have died
// after the start's write, before they went out, and nothing else sends
// them (the supervisor waits for a request that may still be queued until
// its delivery horizon, days), while the order's compensation waits for
// them to settle (the simulator's seed 607). They are marked: each settles
// alone, and what took effect is undone with the rest. A running fan-out's
// are sent again by its dispatch (startFanOut).
func (s *Service) resendStopped(ctx context.Context, u *outbox.Unit, o order, r sas.StepRecord, now time.Time) error {
	if r.ProcessState != sas.Error || r.ForEachCount == 0 || !redelivered(ctx) || r.Step >= o.n() || o.wf.Steps[r.Step].ForEach == nil {
		return nil
	}
	return s.resendElements(ctx, u, o, o.wf.Steps[r.Step], r.Key(), now)
}

// elementReply handles a trusted reply for an element of a fan-out.
func (s *Service) elementReply(ctx context.Context, u *outbox.Unit, o order, rep sas.AgentReply) error {
	step, index := sas.ElementOf(rep.Step)
	if step >= o.n() || o.wf.Steps[step].Name != rep.StepName || o.wf.Steps[step].ForEach == nil {
		return drop(nil, "reply for order %s: element %d of step %d of workflow %q, which is not the fan-out %q", rep.OrderID, index, step, o.wf.Name, rep.StepName)
	}
	def := o.wf.Steps[step]
	now := s.cfg.Clock.Now()
	switch {
	case rep.Outcome == sas.OutcomeStarted:
		return s.started(ctx, o, rep, now) // a step's (started.go)
	case rep.Outcome == sas.OutcomeTransient:
		return s.transient(ctx, u, o, rep, now) // a step's (transient.go)
	case rep.Compensation:
		return s.elementUndoReply(ctx, u, o, rep, now) // fanoutstop.go
	case rep.Outcome == sas.OutcomeFailed:
		return s.elementFailed(ctx, u, o, rep, now)
	}
	fs, err := s.fanOutStore()
	if err != nil {
		return err
	}
	result, err := sas.CompactResult(rep.Result)
	if err != nil || len(result) > sas.MaxResultBytes {
		// Its effect happened: the element fails, named, and is undone
		// with the rest (as a step's result over its bound).
		why := fmt.Sprintf("%s: element %d's result is not JSON or over %d bytes", sas.ErrorResultTooLarge, index, sas.MaxResultBytes)
		if err != nil {
			why = fmt.Sprintf("%s: element %d's result is not JSON: %v", sas.ErrorResultTooLarge, index, err)
		}
		rep.Outcome, rep.Reason, rep.ErrorType, rep.Result, rep.Rejected = sas.OutcomeFailed, why, sas.ErrorResultTooLarge, nil, false
		return s.elementFailed(ctx, u, o, rep, now)
	}
	items, why, err := s.forEachItems(ctx, &o, step, def)
	if err != nil {
		return err
	}
	if why != "" || index >= len(items) {
		// The list was evaluated when the step started: the same inputs
		// give the same list.
		return drop(nil, "reply for order %s element %d of step %d: its list no longer has it (%s)", rep.OrderID, index, step, why)
	}
	p := sas.CompleteElementParams{Key: sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}, Owner: rep.LockedBy, Attempt: rep.Attempt,
		Now: now, Result: result, Run: rep.Timing(), StepName: def.Name, Generation: rep.Generation}
	if next := index + def.ForEach.Window(); next < len(items) {
		p.Next = &sas.ElementClaim{Index: next, Item: items[next], CompleteBy: s.leaseEnd(def, false, 0, now)}
	}
	recs, err := fs.CompleteElement(ctx, p)
	if err != nil {
		return s.elementRefused(ctx, u, o, def, rep, p, result, err)
	}
	s.log.InfoContext(ctx, "element done", "order", rep.OrderID, "step", step, "element", index, "done", recs[1].ForEachDone, "of", recs[1].ForEachCount)
	if p.Next != nil {
		s.dispatch(ctx, u, o, def, recs[2])
	}
	if recs[1].ForEachDone == recs[1].ForEachCount {
		return s.finishFanOut(ctx, u, o, def, recs[1])
	}
	return nil
}

// elementRefused sorts out an element's done reply whose write was refused:
// a duplicate repeats what its first delivery may not have finished (the
// next element's request, the step's completion); anything else is stale.
// The next element was claimed at p.Now if this very write made it (an
// ambiguous commit whose retry was refused), which resend recognises.
func (s *Service) elementRefused(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, rep sas.AgentReply, p sas.CompleteElementParams, result sas.Item, err error) error {
	var re *sas.RaceError
	switch {
	case errors.Is(err, sas.ErrNotFound):
		return drop(err, "reply for order %s element %d", rep.OrderID, rep.Step)
	case !errors.As(err, &re):
		return fmt.Errorf("recording the reply of element %s attempt %d: %w", p.Key, rep.Attempt, err)
	case re.Current != nil && re.Key == p.Key && re.Current.Cancelled && heldFor(*re.Current, rep),
		re.Current != nil && re.Key.Step == sas.StepOf(p.Key.Step) && (re.Current.ProcessState != sas.Processing || re.Current.Cancelled):
		// Refused by the element's mark, or by its fan-out no longer
		// running (stopped, cancelled): the element settles alone
		// (fanoutstop.go).
		return s.elementDoneStopped(ctx, u, o, rep, result, s.cfg.Clock.Now())
	case re.Current != nil && re.Key == p.Key && undoClaimedSince(*re.Current, rep):
		return s.undoGoesOn(ctx, u, o, rep, s.cfg.Clock.Now()) // fanoutstop.go
	case re.Current == nil || re.Key != p.Key || classify(*re.Current, rep) != replyDoneAgain:
		s.log.InfoContext(ctx, "stale element reply ignored", "order", rep.OrderID, "element", rep.Step, "attempt", rep.Attempt)
		return nil
	}
	s.log.InfoContext(ctx, "duplicate reply: element already done", "order", rep.OrderID, "element", rep.Step, "attempt", rep.Attempt)
	if n := p.Next; n != nil {
		next, err := s.cfg.Store.GetStep(ctx, sas.StepKey{OrderID: rep.OrderID, Step: sas.ElementStep(sas.StepOf(rep.Step), n.Index)})
		switch {
		case err == nil && next.ProcessState == sas.Processing && (s.resend(ctx, next, p.Now) || claimedBy(next, p)):
			s.dispatch(ctx, u, o, def, next)
		case err != nil && !errors.Is(err, sas.ErrNotFound):
			return fmt.Errorf("reading the element after %s: %w", p.Key, err)
		}
	}
	step, err := s.cfg.Store.GetStep(ctx, sas.StepKey{OrderID: rep.OrderID, Step: sas.StepOf(rep.Step)})
	if err != nil {
		return fmt.Errorf("reading the fan-out of element %s: %w", p.Key, err)
	}
	switch {
	case step.ProcessState == sas.Processing && step.ForEachCount > 0 && step.ForEachDone == step.ForEachCount:
		return s.finishFanOut(ctx, u, o, def, step)
	case step.ProcessState == sas.Processed && step.ForEachCount > 0 && !step.Cancelled:
		// The last element's first delivery completed the step, claimed
		// its successors and may have died before their requests (or the
		// order's status): a duplicate of the step's own success repeats
		// them, as any step's (the simulator's seeds 241 and 657).
		return s.fanOutDoneAgain(ctx, u, o, step)
	}
	if step.ProcessState != sas.Processing || step.Cancelled {
		// Stopped or cancelled since: what its settling called for.
		return s.fanOutSettled(ctx, u, o, step.Key(), s.cfg.Clock.Now())
	}
	return nil
}

// fanOutDoneAgain handles a duplicate of completed fan-out step r's success,
// as duplicateDone handles any step's: its successors' requests sent again
// when this delivery may owe them (resend), its status posted again.
func (s *Service) fanOutDoneAgain(ctx context.Context, u *outbox.Unit, o order, r sas.StepRecord) error {
	rep := sas.AgentReply{V: sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: o.id(), Step: r.Step, StepName: r.StepName,
		Attempt: r.Attempt, Generation: r.Generation, Outcome: sas.OutcomeDone}
	o.steps = nil // read before the fan-out's result was written: a request re-sent carries it (the simulator's seed 462)
	return s.duplicateDone(ctx, u, o, rep, s.cfg.Clock.Now())
}

// emptyFanOutsAgain is the rest of a duplicate of step's success: a fan-out
// after it (directly, or after steps its completion skipped) over an empty
// list completed in the same handling (startFanOut), claiming its own
// successors, whose requests that handling may have died before (the
// simulator's seeds 121 and, behind a skipped step, 8789): its success is
// repeated too. A workflow without a fan-out reads nothing.
func (s *Service) emptyFanOutsAgain(ctx context.Context, u *outbox.Unit, o order, step int) error {
	if !slices.ContainsFunc(o.wf.Steps, func(d sas.StepDef) bool { return d.ForEach != nil }) {
		return nil
	}
	for _, j := range o.wf.Succs(step) {
		r, err := s.cfg.Store.GetStep(ctx, sas.StepKey{OrderID: o.id(), Step: j})
		if err != nil {
			return fmt.Errorf("reading step %s/%d after step %d: %w", o.id(), j, step, err)
		}
		switch {
		case r.ProcessState == sas.Skipped:
			if err := s.emptyFanOutsAgain(ctx, u, o, j); err != nil {
				return err
			}
		case o.wf.Steps[j].ForEach != nil && r.ProcessState == sas.Processed && r.ForEachCount == 0:
			if err := s.fanOutDoneAgain(ctx, u, o, r); err != nil {
				return err
			}
		case startFailed(o.wf.Steps[j], r):
			if err := s.startFailedAgain(ctx, u, o, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// startFailed reports whether fan-out step r failed at its start, in the
// handling that claimed it: its list could not be evaluated (startFanOut),
// or its order's cancel had marked it (cancelledBeforeStart). Nothing of it
// ran. Its compensation may have begun since (Compensating, Compensated),
// from the undo of the fan-out itself, which had no element to undo.
func startFailed(def sas.StepDef, r sas.StepRecord) bool {
	switch r.ProcessState {
	case sas.Error, sas.Compensating, sas.Compensated:
	default:
		return false
	}
	return def.ForEach != nil && r.ForEachCount == 0 && r.FailedBy != "" &&
		(strings.HasPrefix(r.LastError, sas.ErrorForEachItems) || r.Cancelled)
}

// startFailedAgain repeats what the failure of fan-out step r at its start
// (startFailed) owes: the handling that claimed it wrote the failure and
// may have died after (the simulator's seed 71), and no message of the
// step's own carries it, so the redelivery of that handling's message (a
// duplicate of the success before it, the intake, a retry) repeats it. In
// Error, the failure is applied again as its holder, which takes the path
// of a redelivered failure (one alert id, one status sequence, the
// compensation once; for a cancelled one, no page, the cancellation's
// undos: the simulator's deep sweep seed 48481). Once its compensation has
// begun (its own undo, with no element to undo, claimed or done), its
// alert and status were told before that claim (tellBeforeClaim), and the
// compensation is driven on: it may have stopped before an undo's request
// went out, which startCompensation re-sends (the simulator's seeds 234
// and 1984, orders drawn without a list).
func (s *Service) startFailedAgain(ctx context.Context, u *outbox.Unit, o order, r sas.StepRecord) error {
	if r.ProcessState != sas.Error {
		if err := s.read(ctx, &o); err != nil {
			return err
		}
		_, err := s.startCompensation(ctx, u, o, false, s.cfg.Clock.Now())
		return err
	}
	held := r
	held.LockedBy = r.FailedBy
	rep := sas.AgentReply{Outcome: sas.OutcomeFailed, Reason: r.LastError}
	if strings.HasPrefix(r.LastError, sas.ErrorForEachItems) {
		rep.ErrorType = sas.ErrorForEachItems
	}
	return s.settleStep(ctx, u, o, o.wf.Steps[r.Step], held, rep)
}

// claimedBy reports whether element next was claimed by the very write p
// (an ambiguous commit whose retry was refused) and not picked up since.
// resend alone cannot tell: an element is held by its fan-out's holder,
// whichever scheduler completed the element before it.
func claimedBy(next sas.StepRecord, p sas.CompleteElementParams) bool {
	_, own := sas.OwnWrite(&sas.RaceError{Current: &next}, p.Owner, p.Now, sas.Processing, next.Attempt)
	return own && next.StartedAt.IsZero()
}

// finishFanOut completes fan-out step r, all of whose elements are done,
// with their results in index order, as its agent's reply would: a list
// over its bound fails it (ResultTooLarge: its elements took effect).
func (s *Service) finishFanOut(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, r sas.StepRecord) error {
	els, err := s.elements(ctx, r.Key())
	if err != nil {
		return err
	}
	results := make([]sas.Item, 0, r.ForEachCount)
	for _, e := range els {
		if _, i := sas.ElementOf(e.Step); i != len(results) || e.ProcessState != sas.Processed {
			return fmt.Errorf("fan-out %s counted done has element %d %s at position %d", r.Key(), i, e.ProcessState, len(results))
		}
		results = append(results, e.Result)
	}
	if len(results) != r.ForEachCount {
		return fmt.Errorf("fan-out %s counted done has %d elements of %d", r.Key(), len(results), r.ForEachCount)
	}
	list, why := sas.ElementResults(results)
	if why != "" {
		return s.settleStep(ctx, u, o, def, r, sas.AgentReply{Outcome: sas.OutcomeFailed, Reason: why, ErrorType: sas.ErrorResultTooLarge})
	}
	s.log.InfoContext(ctx, "fan-out done", "order", o.id(), "step", r.Step, "elements", r.ForEachCount)
	return s.settleStep(ctx, u, o, def, r, sas.AgentReply{Outcome: sas.OutcomeDone, Result: list})
}
