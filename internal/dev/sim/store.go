package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/sas-go/sas/internal/memstore"
	"github.com/sas-go/sas/internal/sas"
)

// store is the world's sas.StateStore: the in-memory store, with every
// call stopping the calling task first, and every write checked against
// the legal transitions and turned into the obligations it creates.
//
// An ambiguous commit (faultAmbiguous) is DynamoDB's: the conditional write
// committed, its response was lost, and the SDK's retry of the same request
// failed its condition against the write it had just made. The caller sees
// the retry's answer.
type store struct {
	w   *World
	mem *memstore.Store
}

var _ sas.StateStore = (*store)(nil)

// errUnavailable is a store call's error in an outage (Faults.Store,
// Faults.Outage): transient, nothing done.
var errUnavailable = errors.New("sim: the store is unavailable (injected)")

// write runs one conditional write with its faults, checks every record it
// changed, and returns the answer the caller sees.
func write[T any](ctx context.Context, s *store, name string, keys []sas.StepKey, do func() (T, error)) (T, error) {
	c := stop(ctx, opWrite, "%s %v", name, keys)
	if c.fault == faultUnavailable {
		var zero T
		return zero, errUnavailable
	}
	before := s.snapshot(keys)
	res, err := do()
	committed := err == nil
	var after []sas.StepRecord
	if committed {
		after = s.snapshot(keys)
		s.w.wrote(ctx, name, before, after)
	}
	if c.fault == faultAmbiguous && committed {
		s.w.tracef("  %s committed; its response is lost and the retry answers", name)
		res, err = do()
		// A second Submit of the same order, and a second Start of the same
		// pick-up (its deadline moves only later), are no-ops by contract.
		// So is the retry of a write whose commit changed nothing (seed
		// 8246: two sweeps at one instant both moved a give-up's recheck
		// to the same moment, the second write leaving the record as the
		// first had): it cannot do anything twice.
		if err == nil && name != "Submit" && name != "Start" && !reflect.DeepEqual(before, after) {
			// A write that succeeds twice is not fenced: the second must lose.
			s.w.violate("unfenced write", "%s %v succeeded twice in a row on the same parameters", name, keys)
		}
	}
	return res, err
}

func (s *store) snapshot(keys []sas.StepKey) []sas.StepRecord {
	out := make([]sas.StepRecord, len(keys))
	for i, k := range keys {
		r, err := s.mem.GetStep(context.Background(), k)
		if err == nil {
			out[i] = r
		}
	}
	return out
}

func (s *store) Submit(ctx context.Context, p sas.SubmitParams) (sas.SubmitResult, error) {
	s.earlyStart(&p)
	if p.Run != nil {
		return s.submitRun(ctx, p) // schedules.go
	}
	return s.submit(ctx, p)
}

func (s *store) submit(ctx context.Context, p sas.SubmitParams) (sas.SubmitResult, error) {
	keys := make([]sas.StepKey, len(p.Order.Steps))
	for i := range keys {
		keys[i] = sas.StepKey{OrderID: p.Order.OrderID, Step: i}
	}
	return write(ctx, s, "Submit", keys, func() (sas.SubmitResult, error) { return s.mem.Submit(ctx, p) })
}

func (s *store) Claim(ctx context.Context, p sas.ClaimParams) (sas.StepRecord, error) {
	s.earlyTimer(p.Key, &p, p.Now)
	if s.w.cfg.Sabotage == SabotageUndoEarly {
		p.Siblings = nil // the fence believes the sabotaged read (branches.go)
	}
	return write(ctx, s, "Claim", []sas.StepKey{p.Key}, func() (sas.StepRecord, error) {
		r, err := s.mem.Claim(ctx, p)
		if err != nil {
			return s.unfencedElementClaim(p, err) // fanout.go
		}
		return r, nil
	})
}

func (s *store) Complete(ctx context.Context, p sas.CompleteParams) ([]sas.StepRecord, error) {
	if s.w.cfg.Sabotage == SabotageRunSkipped {
		p = runSkipped(p)
	}
	if p.Next != nil {
		next := *p.Next
		s.earlyTimer(next.Key, &next, p.Now)
		p.Next = &next
		more := append([]sas.ClaimParams(nil), p.More...)
		for i := range more {
			s.earlyTimer(more[i].Key, &more[i], p.Now)
		}
		p.More = more
	}
	keys := []sas.StepKey{p.Key}
	for _, n := range p.Claims() {
		keys = append(keys, n.Key)
	}
	for _, k := range p.Skip {
		keys = append(keys, sas.StepKey{OrderID: p.Key.OrderID, Step: k.Step})
	}
	return write(ctx, s, "Complete", keys, func() ([]sas.StepRecord, error) {
		out, err := s.mem.Complete(ctx, p)
		if forced, ok := s.unfencedCompletion(p.Key, p.Owner, p.Attempt, err, &p, nil); ok { // callbacks.go
			return forced, nil
		}
		return out, err
	})
}

func (s *store) Fail(ctx context.Context, p sas.FailParams) (sas.StepRecord, error) {
	if s.w.cfg.Sabotage == SabotagePageRejections {
		p.Rejected = false // a store that forgets the rejection: the order is paged about
	}
	return write(ctx, s, "Fail", []sas.StepKey{p.Key}, func() (sas.StepRecord, error) {
		r, err := s.mem.Fail(ctx, p)
		if forced, ok := s.unfencedCompletion(p.Key, p.Owner, p.Attempt, err, nil, &p); ok { // callbacks.go
			return forced[0], nil
		}
		return r, err
	})
}

func (s *store) Rescue(ctx context.Context, p sas.RescueParams) (sas.StepRecord, error) {
	name := "Rescue"
	if p.Holder != "" {
		name = rescueByHolder // a scheduler on its agent's transient outcome
		if s.w.cfg.Sabotage == SabotageIgnoreTransient {
			return s.dropReported(ctx, name, p.Key)
		}
	}
	p = s.w.sabotageUnclaimed(p) // goodput.go
	return write(ctx, s, name, []sas.StepKey{p.Key}, func() (sas.StepRecord, error) { return s.mem.Rescue(ctx, p) })
}

// dropReported is SabotageIgnoreTransient: a scheduler's count of a
// reported failure (a Rescue or GiveUp fenced on the held lease) is refused
// as a lost race against the record as it stands, so the scheduler
// acknowledges the transient outcome without counting it, and the attempt
// stays held past its deadline.
func (s *store) dropReported(ctx context.Context, name string, key sas.StepKey) (sas.StepRecord, error) {
	stop(ctx, opWrite, "%s %v (sabotaged: dropped)", name, key)
	cur, err := s.mem.GetStep(context.Background(), key)
	if err != nil {
		return sas.StepRecord{}, &sas.RaceError{Op: name, Key: key}
	}
	return sas.StepRecord{}, &sas.RaceError{Op: name, Key: key, Current: &cur}
}

// rescueByHolder names a Rescue with a Holder: the attempt ended on its
// agent's word (issue 19), the next attempt to be claimed by the same task.
const rescueByHolder = "Rescue by holder"

func (s *store) GiveUp(ctx context.Context, p sas.GiveUpParams) (sas.StepRecord, error) {
	if p.Holder != "" && s.w.cfg.Sabotage == SabotageIgnoreTransient {
		return s.dropReported(ctx, "GiveUp", p.Key)
	}
	return write(ctx, s, "GiveUp", []sas.StepKey{p.Key}, func() (sas.StepRecord, error) { return s.mem.GiveUp(ctx, p) })
}

func (s *store) Wait(ctx context.Context, p sas.WaitParams) (sas.StepRecord, error) {
	return write(ctx, s, "Wait", []sas.StepKey{p.Key}, func() (sas.StepRecord, error) { return s.mem.Wait(ctx, p) })
}

func (s *store) Start(ctx context.Context, p sas.StartParams) (sas.StepRecord, error) {
	return write(ctx, s, "Start", []sas.StepKey{p.Key}, func() (sas.StepRecord, error) { return s.mem.Start(ctx, p) })
}

func (s *store) Heartbeat(ctx context.Context, p sas.HeartbeatParams) (sas.StepRecord, error) {
	return write(ctx, s, "Heartbeat", []sas.StepKey{p.Key}, func() (sas.StepRecord, error) { return s.mem.Heartbeat(ctx, p) })
}

func (s *store) Resubmit(ctx context.Context, p sas.ResubmitParams) (sas.StepRecord, error) {
	return write(ctx, s, "Resubmit", []sas.StepKey{p.Key}, func() (sas.StepRecord, error) { return s.mem.Resubmit(ctx, p) })
}

func (s *store) NoteEffect(ctx context.Context, p sas.NoteEffectParams) (sas.StepRecord, error) {
	// Noting a step noted already writes nothing, so its retry answers
	// as the first call did: no ambiguous commit to model.
	if stop(ctx, opWrite, "NoteEffect %v", p.Key).fault == faultUnavailable {
		return sas.StepRecord{}, errUnavailable
	}
	before := s.snapshot([]sas.StepKey{p.Key})
	r, err := s.mem.NoteEffect(ctx, p)
	if err == nil {
		s.w.wrote(ctx, "NoteEffect", before, s.snapshot([]sas.StepKey{p.Key}))
	}
	return r, err
}

func (s *store) Settle(ctx context.Context, p sas.SettleParams) (sas.StepRecord, error) {
	return write(ctx, s, "Settle", []sas.StepKey{p.Key}, func() (sas.StepRecord, error) { return s.mem.Settle(ctx, p) })
}

func (s *store) FindDue(ctx context.Context, p sas.FindDueParams) (sas.FindDueResult, error) {
	if stop(ctx, opRead, "FindDue %s", p.State).fault == faultUnavailable {
		return sas.FindDueResult{}, errUnavailable
	}
	res, err := s.mem.FindDue(ctx, p)
	return s.w.sabotageStarted(res), err
}

func (s *store) FindOwed(ctx context.Context, p sas.FindOwedParams) (sas.FindDueResult, error) {
	if stop(ctx, opRead, "FindOwed").fault == faultUnavailable {
		return sas.FindDueResult{}, errUnavailable
	}
	return s.mem.FindOwed(ctx, p)
}

func (s *store) GetStep(ctx context.Context, k sas.StepKey) (sas.StepRecord, error) {
	if stop(ctx, opRead, "GetStep %v", k).fault == faultUnavailable {
		return sas.StepRecord{}, errUnavailable
	}
	return s.mem.GetStep(ctx, k)
}

func (s *store) GetOrder(ctx context.Context, id string) (sas.OrderView, error) {
	if stop(ctx, opRead, "GetOrder %s", id).fault == faultUnavailable {
		return sas.OrderView{}, errUnavailable
	}
	v, err := s.mem.GetOrder(ctx, id)
	if err == nil && s.w.cfg.Sabotage == SabotageStaleResults {
		v = staleResults(v)
	}
	if err == nil {
		v = s.w.inFlightShownDone(v)
	}
	return v, err
}

func (s *store) ListByState(ctx context.Context, p sas.ListByStateParams) (sas.ListByStateResult, error) {
	if stop(ctx, opRead, "ListByState %s", p.State).fault == faultUnavailable {
		return sas.ListByStateResult{}, errUnavailable
	}
	return s.mem.ListByState(ctx, p)
}

func (s *store) PutDefinition(ctx context.Context, wf sas.Workflow) error {
	if stop(ctx, opWrite, "PutDefinition %s", wf.Name).fault == faultUnavailable {
		return errUnavailable
	}
	return s.mem.PutDefinition(ctx, wf)
}

func (s *store) GetDefinition(ctx context.Context, name, version string) (sas.Workflow, error) {
	if stop(ctx, opRead, "GetDefinition %s", name).fault == faultUnavailable {
		return sas.Workflow{}, errUnavailable
	}
	return s.mem.GetDefinition(ctx, name, version)
}

// wrote checks the records a committed write changed and notes what the
// write obliges its task to send.
func (w *World) wrote(ctx context.Context, name string, before, after []sas.StepRecord) {
	for i := range after {
		b, a := before[i], after[i]
		if a.ProcessState != b.ProcessState || a.Attempt != b.Attempt {
			if b.ProcessState == sas.Pending && a.ProcessState == sas.Processing && !sas.IsElement(a.Step) {
				w.checkJoin(a)
			}
			if b.ProcessState != a.ProcessState && !sas.Legal(b.ProcessState, a.ProcessState) {
				w.violate("illegal transition", "%s moved %v from %q to %q", name, a.Key(), b.ProcessState, a.ProcessState)
			}
			w.tracef("  %s: %v %s a%d -> %s a%d", name, a.Key(), orDash(b.ProcessState), b.Attempt, a.ProcessState, a.Attempt)
		}
		// Issue 19: an attempt its agent reported failed, once a scheduler
		// handled the report, is counted, never waited on.
		if name == "Wait" && w.reported[reportedAttempt{a.Key(), a.Attempt}] {
			w.violate("failure taken for a wait", "%v attempt %d was waited on after its agent's transient outcome was handled", a.Key(), a.Attempt)
		}
		w.checkWaited(name, b, a) // issue 31: goodput.go
		w.checkCallbackWrite(ctx, name, i == 0, b, a)
		w.checkTimer(name, b, a)        // issue 28 §2: waits.go
		w.checkStart(name, b, a)        // issue 28 §2: waits.go
		w.checkElementWrite(name, b, a) // issue 27 §4: fanout.go
		// A step that became held at a new attempt owes its request; a
		// rescue owes its retry message.
		t := taskOf(ctx)
		if t == nil {
			continue
		}
		switch {
		case a.ProcessState.Leased() && a.LockedBy != "" && a.Attempt > b.Attempt && w.agentless(a.Key()):
			// A wait step's claim owes no request: its due time ends it.
		case a.ProcessState.Leased() && a.LockedBy != "" && a.Attempt > b.Attempt && w.fanOutStep(a.Key()):
			// Nor a fan-out's: its elements' claims owe theirs (fanout.go);
			// a start never written leaves it held, which "no progress"
			// finds.
		case a.ProcessState.Leased() && a.LockedBy != "" && a.Attempt > b.Attempt:
			t.owes = append(t.owes, obligation{kind: owesRequest, key: a.Key(), attempt: a.Attempt, what: name, since: w.nextMsg})
		case name == rescueByHolder:
			// Issue 19: a failure counted on the agent's word owes the next
			// attempt's claim (whose request it then owes), not a retry
			// message; settled at the task's end if anyone moved the step
			// on (a twin delivery's claim won).
			t.owes = append(t.owes, obligation{kind: owesNextAttempt, key: a.Key(), attempt: a.Attempt, what: name})
		case name == "Rescue" || name == "Resubmit":
			if name == "Resubmit" {
				// The operator acted on the failure: they were told.
				w.resubmitted[failure{key: a.Key(), state: sas.Error, attempt: b.Attempt}.id()] = true
			}
			t.owes = append(t.owes, obligation{kind: owesRetry, key: a.Key(), attempt: a.Attempt, what: name})
		case name == "Fail" && a.ProcessState != b.ProcessState && a.Rejected:
			// A business rejection: no operator is told (results.go).
		case name == "Fail" && stoppedBeside(a):
			// A fan-out stopped by another step's failure, which is the
			// failure told (fanout.go).
		case name == "Fail" && sas.IsElement(a.Step):
			// An element's failure fails its fan-out step, whose alert
			// (that step's, recorded at its own Fail) names the element
			// (fanout.go).
		case (name == "Fail" || name == "Cancel") && a.ProcessState != b.ProcessState && a.Cancelled && a.ProcessState == sas.Error:
			// A cancelled order's step: no operator is told (cancel.go).
		case name == "GiveUp" || (name == "Fail" && a.ProcessState != b.ProcessState) ||
			(a.ProcessState == sas.Error && a.FailedBy == sas.ByCondition && b.ProcessState != sas.Error):
			// (A step failed by its condition, in a Complete or a Submit.)
			w.gaveUp = append(w.gaveUp, failure{key: a.Key(), state: a.ProcessState, attempt: a.Attempt, by: name})
		}
		if name == "GiveUp" {
			w.checkGiveUp(b, a)
		}
	}
}

// checkGiveUp holds a supervisor's give-up to the limits of the definition
// the step's order runs on: its failure threshold reached, or its overall
// limit passed (within the supervisors' clock skew). A deploy that changes
// a limit must not change it for orders in flight.
func (w *World) checkGiveUp(before, after sas.StepRecord) {
	o, err := w.view(after.OrderID)
	if err != nil {
		return // "order lost" says so
	}
	def, ok := w.defs[o.Order.Version]
	if !ok || after.Step >= len(def.Steps) {
		return // "unknown version" and "wrong definition" say so
	}
	lim := def.Steps[after.Step].Limits()
	if lim.Outside {
		return // a callback step is given up at its deadline, its first failure (callbacks.go)
	}
	maxFailures := lim.MaxFailures
	if maxFailures == 0 {
		maxFailures = supervisorMaxFailures
	}
	forward := before.ProcessState == sas.Processing || before.ProcessState == sas.Pending
	if before.ProcessState == sas.Compensating {
		// An undo's own policy, never the step's.
		maxFailures = lim.Undo.Or(undoRetry).MaxAttempts
	}
	if before.FailureCount+1 >= maxFailures {
		return
	}
	if forward && lim.TotalLimit > 0 && !w.clock.Now().Add(maxSkew).Before(before.CreatedAt.Add(lim.TotalLimit)) {
		return
	}
	w.violate("wrong limits", "%v gave up at failure %d, %s after it was created; its version %.8s allows %d failures and a total limit of %s",
		after.Key(), before.FailureCount+1, w.clock.Now().Sub(before.CreatedAt), o.Order.Version, maxFailures, lim.TotalLimit)
}

func orDash(s sas.ProcessState) string {
	if s == "" {
		return "-"
	}
	return string(s)
}

// obligation is a message a task's committed write obliges it to send
// before it ends: a claim its agent request, a rescue its retry. A task
// that ends without sending it, neither dying nor having a send fail, has
// lost work the supervisor must then find (and count as a failure).
type obligation struct {
	kind    obligationKind
	key     sas.StepKey
	attempt int
	what    string
	// since is the number of the last message sent before the write: a
	// request a twin sent after it discharges owesRequest too.
	since int
}

type obligationKind int

const (
	owesRequest obligationKind = iota
	owesRetry
	owesNextAttempt
)

func (o obligation) String() string {
	what := "the agent request"
	switch o.kind {
	case owesRetry:
		what = "the retry message"
	case owesNextAttempt:
		what = "the claim of the next attempt"
	}
	return fmt.Sprintf("%s for %v attempt %d (after %s)", what, o.key, o.attempt, o.what)
}

func (f failure) id() string { return sas.AlertID(f.key, f.state, f.attempt) }

// failure is a step moved to Error or CompensationFailed: an operator must
// be told of each.
type failure struct {
	key     sas.StepKey
	state   sas.ProcessState
	attempt int
	by      string
}

// loseSuccessor is SabotageLoseSuccessor: it reports whether body is an
// agent request its task owes after a Complete, which the sabotaged world
// then drops.
func (w *World) loseSuccessor(ctx context.Context, body string) bool {
	t := taskOf(ctx)
	if w.cfg.Sabotage != SabotageLoseSuccessor || t == nil {
		return false
	}
	var h struct {
		Kind    sas.Kind `json:"kind"`
		OrderID string   `json:"orderId"`
		Step    int      `json:"step"`
		Attempt int      `json:"attempt"`
	}
	if json.Unmarshal([]byte(body), &h) != nil || h.Kind != sas.KindAgentRequest {
		return false
	}
	k := sas.StepKey{OrderID: h.OrderID, Step: h.Step}
	for _, o := range t.owes {
		if o.kind == owesRequest && o.what == "Complete" && o.key == k && o.attempt == h.Attempt {
			w.tracef("  sabotaged: the request for %v attempt %d is dropped", k, h.Attempt)
			return true
		}
	}
	return false
}
