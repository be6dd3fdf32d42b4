package scheduler_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// elementIndex is the index of an element's request; -1 for a step's.
func elementIndex(r sas.AgentRequest) int {
	if !sas.IsElement(r.Step) {
		return -1
	}
	_, i := sas.ElementOf(r.Step)
	return i
}

// element reads the record of element i of step 1 (reserve).
func (f *fixture) element(id string, i int) sas.StepRecord {
	f.t.Helper()
	e, err := f.mem.GetStep(f.ctx, sas.StepKey{OrderID: id, Step: sas.ElementStep(1, i)})
	require.NoError(f.t, err)
	return e
}

// runUntil runs the fan-out of order id, answering each element below
// stop done with its SKU, until every element below stop is done and the
// elements requested from stop on are held: it returns them by index.
func runUntil(t *testing.T, f *fixture, stop int) map[int]sas.AgentRequest {
	t.Helper()
	held := map[int]sas.AgentRequest{}
	for {
		reqs := f.requests()
		if len(reqs) == 0 {
			return held
		}
		for _, r := range reqs {
			i := elementIndex(r)
			require.GreaterOrEqual(t, i, 0, "only elements run: %s", r.StepName)
			require.False(t, r.Compensation)
			if i >= stop {
				_, dup := held[i]
				require.False(t, dup, "element %d requested twice", i)
				held[i] = r
				continue
			}
			f.deliver(doneWith(r, fmt.Sprintf(`{"held":"SKU-%d"}`, i)))
		}
	}
}

// undoAll answers every undo request in turn, one at a time as they come,
// and returns the order they came in (element indices; -1 for quote's).
func undoAll(t *testing.T, f *fixture, id string) ([]int, []sas.AgentRequest) {
	t.Helper()
	var order []int
	var reqs []sas.AgentRequest
	for {
		rs := f.requests()
		if len(rs) == 0 {
			return order, reqs
		}
		require.Len(t, rs, 1, "one undo at a time")
		r := rs[0]
		require.True(t, r.Compensation, "only undos after the failure: %s %d", r.StepName, r.Step)
		order = append(order, elementIndex(r))
		reqs = append(reqs, r)
		f.deliver(done(r))
	}
}

// A fan-out of 25 under a window of 4 whose element 13 is refused: no
// element past the window starts, the ones in flight settle (a success, a
// refusal, a transient failure: no next attempt) before any undo, then
// every element that took effect or may have is undone, highest index
// first, each once, under its own undo key and seeing its element and its
// own result; then quote. The order is compensated, one alert.
func TestAFanOutWhoseElementIsRefusedUndoesItsElementsHighestFirst(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 4)
	const id = "o-refused"
	f.deliver(linesIntake(id, 25, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	held := runUntil(t, f, 13)
	require.Len(t, held, 4, "13 and the three after it are in flight")
	for i := 13; i < 17; i++ {
		require.Contains(t, held, i)
	}

	f.deliver(reply(held[13], sas.OutcomeFailed, "out of stock"))
	require.Empty(t, f.requests(), "nothing starts, and nothing is undone while elements are in flight")
	step := f.view(id).Steps[1]
	require.Equal(t, 1, transitions(step, sas.Error), "the fan-out failed")
	require.Contains(t, step.LastError, "element 13 failed: out of stock")
	require.Equal(t, sas.Error, step.ProcessState, "its undo waits for its elements")
	for i := 14; i < 17; i++ {
		e := f.element(id, i)
		require.Equal(t, sas.Processing, e.ProcessState)
		require.True(t, e.Cancelled, "element %d in flight is marked", i)
	}

	f.deliver(doneWith(held[14], `{"held":"SKU-14"}`))
	require.Empty(t, f.requests(), "a success in flight settles: nothing claimed after it, nothing undone yet")
	require.Equal(t, sas.Processed, f.element(id, 14).ProcessState)
	f.deliver(reply(held[15], sas.OutcomeTransient, "timeout"))
	require.Empty(t, f.requests(), "a transient failure in flight gets no next attempt")
	require.Equal(t, sas.Error, f.element(id, 15).ProcessState)
	f.deliver(reply(held[16], sas.OutcomeFailed, "no such sku"))

	order, undos := undoAll(t, f, id)
	want := []int{}
	for i := 16; i >= 0; i-- {
		want = append(want, i)
	}
	want = append(want, -1) // quote
	require.Equal(t, want, order, "every element undone once, highest first, then quote")
	for _, u := range undos[:len(undos)-1] {
		i := elementIndex(u)
		require.Equal(t, fmt.Sprintf("%s:1:i%d:undo", id, i), u.IdempotencyKey)
		var line struct {
			SKU string `json:"sku"`
		}
		require.NoError(t, json.Unmarshal(u.Item, &line))
		require.Equal(t, fmt.Sprintf("SKU-%d", i), line.SKU, "the undo sees its element")
		if i < 13 || i == 14 {
			require.JSONEq(t, fmt.Sprintf(`{"held":"SKU-%d"}`, i), string(u.Results["reserve"]), "the undo sees its own result")
		} else {
			require.NotContains(t, u.Results, "reserve", "an element that failed has no result")
		}
		require.JSONEq(t, `{"quote":"Q-1"}`, string(u.Results["quote"]))
	}
	for i := 17; i < 25; i++ {
		_, err := f.mem.GetStep(f.ctx, sas.StepKey{OrderID: id, Step: sas.ElementStep(1, i)})
		require.ErrorIs(t, err, sas.ErrNotFound, "element %d never started", i)
	}
	for i := 0; i < 17; i++ {
		require.Equal(t, sas.Compensated, f.element(id, i).ProcessState, "element %d", i)
	}
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending}, f.states(id))
	ss := f.statuses()
	require.Equal(t, sas.StatusCompensated, ss[len(ss)-1].Status)
	ids := map[string]bool{}
	for _, a := range f.alerts.all() {
		ids[a.ID] = true
	}
	require.Len(t, ids, 1, "the refusal pages once (a repeat carries its id): %v", f.alerts.all())
}

// An element rejected (agent.Reject) ends the order Rejected, unpaged,
// its effects undone as for a refusal.
func TestAFanOutWhoseElementIsRejectedEndsRejected(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 2)
	const id = "o-rejected"
	f.deliver(linesIntake(id, 3, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	held := runUntil(t, f, 1)
	require.Len(t, held, 2)
	rej := signedReply(held[1], sas.OutcomeFailed, "over the customer's limit")
	rej.Rejected = true
	f.deliver(sas.Encode(rej))
	f.deliver(doneWith(held[2], `{"held":"SKU-2"}`))
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{2, 1, 0, -1}, order)
	require.Equal(t, sas.Rejected, f.view(id).State())
	ss := f.statuses()
	require.Equal(t, sas.StatusRejected, ss[len(ss)-1].Status)
	require.Empty(t, f.alerts.all(), "a rejection pages nobody")
}

// A transient failure of an element is retried as a step's (its retry
// policy: the next attempt under the same key), and the fan-out goes on.
func TestAnElementsTransientFailureIsRetried(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 2)
	const id = "o-transient"
	f.deliver(linesIntake(id, 3, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	reqs := f.requests()
	require.Len(t, reqs, 2)
	f.deliver(reply(reqs[0], sas.OutcomeTransient, "timeout"))
	f.clock.Advance(time.Hour)
	again := f.requests()
	require.Len(t, again, 1, "the next attempt")
	require.Equal(t, reqs[0].Step, again[0].Step)
	require.Equal(t, 2, again[0].Attempt)
	require.Equal(t, reqs[0].IdempotencyKey, again[0].IdempotencyKey)
	require.JSONEq(t, string(reqs[0].Item), string(again[0].Item), "the next attempt carries its element")
	e := f.element(id, 0)
	require.Equal(t, 1, e.FailureCount)
	f.deliver(doneWith(again[0], `"a"`), doneWith(reqs[1], `"b"`))
	third := f.request()
	f.deliver(doneWith(third, `"c"`))
	ship := f.request()
	require.Equal(t, "ship", ship.StepName)
	require.JSONEq(t, `["a","b","c"]`, string(ship.Results["reserve"]))
}

// An element that fails transiently at its last attempt is given up: the
// fan-out fails, and what took effect is undone.
func TestAnElementGivenUpAfterItsLastAttemptStopsTheFanOut(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 1)
	const id = "o-lastattempt"
	f.deliver(linesIntake(id, 3, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	f.deliver(doneWith(f.request(), `"a"`))
	r := f.request()
	require.Equal(t, 1, elementIndex(r))
	for {
		f.deliver(reply(r, sas.OutcomeTransient, "timeout"))
		f.clock.Advance(time.Hour)
		rs := f.requests()
		require.Len(t, rs, 1)
		if rs[0].Compensation {
			require.Equal(t, 1, elementIndex(rs[0]), "the given-up element is undone first: it may have taken effect")
			f.deliver(done(rs[0]))
			break
		}
		r = rs[0]
	}
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{0, -1}, order)
	require.Equal(t, sas.Compensated, f.element(id, 1).ProcessState)
	require.Equal(t, sas.Compensated, f.view(id).Steps[1].ProcessState)
}

// elementKey is the key of element i of step 1 of order id.
func elementKey(id string, i int) sas.StepKey {
	return sas.StepKey{OrderID: id, Step: sas.ElementStep(1, i)}
}

// An element held past its deadline is rescued as a step is: the
// supervisor's retry re-claims it and its request is sent again with its
// element and key. At its last chance it is given up: the supervisor's
// compensate names it, the fan-out stops, its element in flight settles,
// and every element is undone, the given-up one included (it may have
// taken effect), highest first.
func TestAnElementPastItsDeadlineIsRescuedThenGivenUp(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 2)
	const id = "o-rescue"
	f.deliver(linesIntake(id, 4, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	reqs := f.requests()
	require.Len(t, reqs, 2)
	f.deliver(doneWith(reqs[0], `"a"`))
	third := f.request()
	require.Equal(t, 2, elementIndex(third))

	// Element 1 is lost: past its deadline the supervisor rescues it.
	f.clock.Advance(leaseTime + time.Second)
	e := f.element(id, 1)
	_, indexed := e.Indexed()
	require.True(t, indexed, "an element carries its deadline in the index")
	rescued, err := f.mem.Rescue(f.ctx, sas.RescueParams{Key: e.Key(), From: e.ProcessState, Attempt: e.Attempt, Now: f.clock.Now(),
		PickupBy: f.clock.Now().Add(time.Minute), Actor: "supervisor-1", Reason: "deadline passed"})
	require.NoError(t, err)
	f.deliver(retryMsg(id, rescued.Step, rescued.Attempt))
	again := f.request()
	require.Equal(t, reqs[1].Step, again.Step)
	require.Equal(t, 2, again.Attempt)
	require.Equal(t, reqs[1].IdempotencyKey, again.IdempotencyKey)
	require.JSONEq(t, string(reqs[1].Item), string(again.Item), "the rescued request carries its element")
	require.Equal(t, 1, elementIndex(again), "and its element's index")

	// Lost again, and given up.
	f.clock.Advance(leaseTime + time.Second)
	e = f.element(id, 1)
	gu, err := f.mem.GiveUp(f.ctx, sas.GiveUpParams{Key: e.Key(), From: e.ProcessState, Attempt: e.Attempt, Now: f.clock.Now(),
		Actor: "supervisor-1", Reason: "too many failures", OwedAt: f.clock.Now().Add(time.Minute)})
	require.NoError(t, err)
	f.deliver(sas.Encode(sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: id, Reason: "gave up",
		Actor: "supervisor-1", GivenUp: &sas.GivenUp{Step: gu.Step, Attempt: gu.Attempt}}))
	require.Empty(t, f.requests(), "element 2 is in flight: nothing is undone yet")
	require.True(t, f.element(id, 2).Cancelled)
	require.Equal(t, sas.Error, f.view(id).Steps[1].ProcessState)
	require.Contains(t, f.view(id).Steps[1].LastError, "element 1 given up")

	f.deliver(doneWith(third, `"c"`))
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{2, 1, 0, -1}, order, "element 3 never started")
	_, err = f.mem.GetStep(f.ctx, elementKey(id, 3))
	require.ErrorIs(t, err, sas.ErrNotFound)
	ss := f.statuses()
	require.Equal(t, sas.StatusCompensated, ss[len(ss)-1].Status)
}

// A duplicate or late reply of an element, or of an element's undo,
// changes nothing: no request, no write, no undo twice.
func TestDuplicateElementFailuresAndUndoRepliesChangeNothing(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 2)
	const id = "o-dupfail"
	f.deliver(linesIntake(id, 3, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	reqs := f.requests()
	require.Len(t, reqs, 2)
	refusal := reply(reqs[0], sas.OutcomeFailed, "out of stock")
	f.deliver(refusal)
	require.Empty(t, f.requests())
	f.deliver(doneWith(reqs[1], `"b"`))
	u1 := f.request()
	require.Equal(t, 1, elementIndex(u1))
	require.True(t, u1.Compensation)

	// The refusal and the success again, late: nothing moves.
	alerts := len(f.alerts.all())
	before := []sas.StepRecord{f.view(id).Steps[1], f.element(id, 0), f.element(id, 1)}
	require.Empty(t, f.handle(f.duplicate(refusal)))
	require.Empty(t, f.handle(f.duplicate(doneWith(reqs[1], `"b"`))))
	for _, r := range f.requests() {
		// A redelivery may send the undo in flight again (no pick-up
		// reported): the same attempt, the same key; never another.
		require.Equal(t, u1.Step, r.Step)
		require.Equal(t, u1.Attempt, r.Attempt)
		require.Equal(t, u1.IdempotencyKey, r.IdempotencyKey)
	}
	require.Equal(t, before, []sas.StepRecord{f.view(id).Steps[1], f.element(id, 0), f.element(id, 1)}, "no record moved")
	require.Len(t, f.alerts.all(), alerts, "the same alert id at most: %v", f.alerts.all())

	undone := done(u1)
	f.deliver(undone)
	u0 := f.request()
	require.Equal(t, 0, elementIndex(u0), "the refused element is undone too")
	f.calls.take()
	require.Empty(t, f.handle(f.duplicate(undone)))
	for _, r := range f.requests() {
		require.Equal(t, u0.IdempotencyKey, r.IdempotencyKey, "at most element 0's undo in flight again")
		require.Equal(t, u0.Attempt, r.Attempt)
	}
	calls, _ := f.calls.take()
	require.Zero(t, calls["Claim"], "and claims nothing: %v", calls)
	// A forged undo reply of another attempt changes nothing either.
	stale := u0
	stale.Attempt++
	require.Empty(t, f.handle(f.duplicate(done(stale))))
	require.Equal(t, sas.Compensating, f.element(id, 0).ProcessState)

	f.deliver(done(u0))
	q := f.request()
	require.Equal(t, "quote", q.StepName)
	f.deliver(done(q))
	require.Empty(t, f.requests())
	for i := 0; i < 2; i++ {
		require.Equal(t, 1, transitions(f.element(id, i), sas.Compensated), "element %d undone once", i)
	}
	_, err := f.mem.GetStep(f.ctx, elementKey(id, 2))
	require.ErrorIs(t, err, sas.ErrNotFound, "element 2 never started")
}

// A cancel mid-fan-out marks the fan-out and its elements in flight: none
// starts after it, those in flight settle, then what took effect is undone
// highest first; the order ends Cancelled, nobody is paged.
func TestACancelMidFanOut(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 3)
	const id = "o-cxfan"
	f.deliver(linesIntake(id, 10, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	held := runUntil(t, f, 4)
	require.Len(t, held, 3, "4, 5 and 6 in flight")
	f.operatorCancel(id)
	require.Empty(t, f.requests(), "nothing starts, nothing is undone while elements are in flight")
	require.True(t, f.view(id).Steps[1].Cancelled)
	for i := 4; i < 7; i++ {
		require.True(t, f.element(id, i).Cancelled, "element %d is marked", i)
	}
	f.deliver(doneWith(held[4], `{"held":"SKU-4"}`))
	f.deliver(reply(held[5], sas.OutcomeTransient, "timeout"))
	require.Empty(t, f.requests(), "no next attempt, no element after the cancel, no undo yet")
	f.deliver(doneWith(held[6], `{"held":"SKU-6"}`))
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{6, 5, 4, 3, 2, 1, 0, -1}, order)
	require.Equal(t, sas.Cancelled, f.view(id).State())
	ss := f.statuses()
	require.Equal(t, sas.StatusCancelled, ss[len(ss)-1].Status)
	require.Empty(t, f.alerts.all(), "a cancel pages nobody")
	_, err := f.mem.GetStep(f.ctx, elementKey(id, 7))
	require.ErrorIs(t, err, sas.ErrNotFound)
}

// The same when the handler of the transient outcome that failed a marked
// element dies reading the fan-out's elements (after the element's
// failure is written): the outcome's redelivery goes on from there, and
// the cancellation ends (the simulator's deep sweep seed 32446).
func TestACancelledElementsTransientRedeliveredDrivesTheCancelOn(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 3)
	const id = "o-cxfan-died"
	f.deliver(linesIntake(id, 10, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	held := runUntil(t, f, 4)
	f.operatorCancel(id)
	f.deliver(doneWith(held[4], `{"held":"SKU-4"}`))
	f.deliver(doneWith(held[6], `{"held":"SKU-6"}`))
	ev := f.event(reply(held[5], sas.OutcomeTransient, "timeout"))
	f.failLists(1)
	require.Len(t, f.handle(ev), 1, "its handler dies after the element's failure, reading the elements")
	require.Equal(t, sas.Error, f.element(id, 5).ProcessState)
	require.Empty(t, f.requests(), "no undo yet")

	require.Empty(t, f.handle(ev), "the outcome's redelivery")
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{6, 5, 4, 3, 2, 1, 0, -1}, order)
	require.Equal(t, sas.Cancelled, f.view(id).State())
	require.Empty(t, f.alerts.all(), "a cancel pages nobody")
}

// A fan-out claimed by the step before's success, whose handler died
// before the start, then marked by a cancel: the success's redelivery
// finds the mark (sas.StartFanOut refuses it) and fails the step as
// cancelled before its start, which the cancellation's undos follow. When
// that handler stops before an undo's request goes out, the next
// redelivery finds the fan-out failed at its start all the same, cancelled
// and undone since, and drives the cancellation on (the simulator's deep
// sweep seed 48481, the order otherwise left with its quote never undone).
func TestAFanOutCancelledBeforeItsStartIsDrivenOnByTheRedelivery(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 3)
	const id = "o-cx-unstarted"
	f.deliver(linesIntake(id, 4, f.replyURL))
	quote := f.request()
	now := f.clock.Now()
	_, err := f.mem.Complete(f.ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: id, Step: 0}, Owner: quote.LockedBy, Attempt: quote.Attempt, Now: now,
		Result: []byte(`{"quote":"Q-1"}`),
		Next:   &sas.ClaimParams{Key: sas.StepKey{OrderID: id, Step: 1}, Owner: owner, Now: now, CompleteBy: now.Add(stepTimeout)}})
	require.NoError(t, err, "the success's handler claimed the fan-out, then died before its start")
	f.operatorCancel(id)
	require.True(t, f.step(id, 1).Cancelled)
	f.clock.Advance(time.Second)

	ev := f.event(doneWith(quote, `{"quote":"Q-1"}`))
	require.Empty(t, f.handle(ev), "its first copy here: a duplicate, which sends nothing")
	// The redelivery: the fan-out fails as cancelled, its own undo (no
	// element) is done at once, the quote's undo is claimed, and its send
	// fails.
	undoSentByTheRedelivery(t, f, ev, id, []sas.ProcessState{sas.Compensating, sas.Compensated, sas.Pending}, 0)
	require.Equal(t, sas.Cancelled, f.view(id).State())
	require.Zero(t, f.step(id, 1).ForEachCount, "no element started")
}

// In a graph, a branch that fails while a fan-out runs in another stops
// its window as an element's failure would: no element starts after it,
// those in flight settle, then everything is undone, the fan-out's
// elements highest first.
func TestABranchsFailureStopsAFanOutBesideIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	step := func(name string, after ...int) sas.StepDef {
		return sas.StepDef{Name: name, Agent: "x", Action: "POST /" + name, Undo: "POST /" + name + "/cancel", Timeout: stepTimeout, After: after}
	}
	reserve := step("reserve", 0)
	reserve.ForEach = &sas.ForEach{Items: "payload.lines", Concurrency: 2}
	reg, err := sas.NewRegistry(sas.Workflow{Name: "lines", Steps: []sas.StepDef{step("quote"), reserve, step("charge", 0), step("ship", 1, 2)}})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	const id = "o-branch"
	f.deliver(linesIntake(id, 5, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	var charge sas.AgentRequest
	elems := map[int]sas.AgentRequest{}
	for _, r := range f.requests() {
		if r.StepName == "charge" {
			charge = r
			continue
		}
		elems[elementIndex(r)] = r
	}
	require.Equal(t, "charge", charge.StepName)
	require.Len(t, elems, 2)
	f.deliver(doneWith(elems[0], `"a"`))
	e2 := f.request()
	require.Equal(t, 2, elementIndex(e2))

	f.deliver(reply(charge, sas.OutcomeFailed, "card declined"))
	require.Empty(t, f.requests(), "nothing starts, nothing is undone while elements 1 and 2 are in flight")
	require.True(t, f.element(id, 1).Cancelled)
	require.True(t, f.element(id, 2).Cancelled)
	f.deliver(doneWith(elems[1], `"b"`))
	require.Empty(t, f.requests())
	f.deliver(doneWith(e2, `"c"`))
	var undone []string
	for rs := f.requests(); len(rs) > 0; rs = f.requests() {
		require.Len(t, rs, 1, "one undo at a time")
		r := rs[0]
		require.True(t, r.Compensation)
		name := r.StepName
		if i := elementIndex(r); i >= 0 {
			name = fmt.Sprintf("%s[%d]", name, i)
		}
		undone = append(undone, name)
		f.deliver(done(r))
	}
	require.Contains(t, [][]string{
		{"charge", "reserve[2]", "reserve[1]", "reserve[0]", "quote"},
		{"reserve[2]", "reserve[1]", "reserve[0]", "charge", "quote"},
	}, undone, "every effect undone once, the fan-out's highest first")
	_, err = f.mem.GetStep(f.ctx, elementKey(id, 3))
	require.ErrorIs(t, err, sas.ErrNotFound, "no element started after the failure")
	ss := f.statuses()
	require.Equal(t, sas.StatusCompensated, ss[len(ss)-1].Status)
}

// An element's undo that fails transiently is retried under its undo's
// policy; one that fails for good fails the fan-out's undo: the chain
// stops there (CompensationFailed), an operator is paged, nothing after
// it is undone.
func TestAnElementsUndoRetriesThenFailsTheFanOutsUndo(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 3)
	const id = "o-undofail"
	f.deliver(linesIntake(id, 3, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	reqs := f.requests()
	require.Len(t, reqs, 3)
	f.deliver(doneWith(reqs[0], `"a"`), doneWith(reqs[1], `"b"`))
	f.deliver(reply(reqs[2], sas.OutcomeFailed, "out of stock"))
	u2 := f.request()
	require.Equal(t, 2, elementIndex(u2))
	f.deliver(done(u2))
	u1 := f.request()
	require.Equal(t, 1, elementIndex(u1))
	f.deliver(reply(u1, sas.OutcomeTransient, "refund service down"))
	f.clock.Advance(time.Hour)
	again := f.request()
	require.True(t, again.Compensation)
	require.Equal(t, u1.IdempotencyKey, again.IdempotencyKey, "the same undo again")
	require.Equal(t, u1.Attempt+1, again.Attempt)
	require.JSONEq(t, `"b"`, string(again.Results["reserve"]), "still seeing its own result")
	f.deliver(reply(again, sas.OutcomeFailed, "refund refused"))
	require.Empty(t, f.requests(), "the chain stops: neither element 0 nor quote is undone")
	require.Equal(t, sas.CompensationFailed, f.element(id, 1).ProcessState)
	require.Equal(t, sas.Processed, f.element(id, 0).ProcessState)
	st := f.view(id).Steps[1]
	require.Equal(t, sas.CompensationFailed, st.ProcessState)
	require.Contains(t, st.LastError, "the undo of element 1 failed: refund refused")
	var undoAlert bool
	for _, a := range f.alerts.all() {
		undoAlert = undoAlert || a.State == sas.CompensationFailed
	}
	require.True(t, undoAlert, "an operator is paged: %v", f.alerts.all())
}

// An element's late pick-up is recorded as a step's: its deadline counts
// from the pick-up, and the fan-out goes on.
func TestAnElementsLatePickUpIsRecorded(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 1)
	const id = "o-started"
	f.deliver(linesIntake(id, 2, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	r := f.request()
	before := f.element(id, 0)
	require.True(t, before.StartedAt.IsZero())
	f.clock.Advance(time.Minute)
	f.deliver(reply(r, sas.OutcomeStarted, ""))
	after := f.element(id, 0)
	require.Equal(t, f.clock.Now(), after.StartedAt, "the pick-up is recorded on the element")
	require.True(t, after.CompleteBy.After(before.CompleteBy), "its deadline counts from the pick-up")
	require.Empty(t, f.requests())
	f.deliver(doneWith(r, `"a"`))
	f.deliver(doneWith(f.request(), `"b"`))
	require.Equal(t, "ship", f.request().StepName)
}

// quoted runs order id of "lines" over n lines (window concurrency) past
// quote: its fan-out started.
func quoted(t *testing.T, window int, id string, lines int) *fixture {
	t.Helper()
	f := fanOutFixture(t, window)
	f.deliver(linesIntake(id, lines, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	return f
}

// requireEnded requires that the last status posted is status.
func requireEnded(t *testing.T, f *fixture, status string) {
	t.Helper()
	ss := f.statuses()
	require.NotEmpty(t, ss)
	require.Equal(t, status, ss[len(ss)-1].Status)
}

// claimedAgain reports whether element e was ever claimed past its first
// attempt for its forward leg.
func claimedAgain(e sas.StepRecord) bool {
	for _, h := range e.History {
		if h.To == sas.Processing && h.Attempt > 1 {
			return true
		}
	}
	return false
}

// stopDies runs order id of "lines" over n lines until its first window
// (of window elements) is held, then refuses element 0 in a delivery whose
// handler dies after the fan-out's stop, before its marks (its read of the
// elements fails). It returns the held requests by index and that event.
func stopDies(t *testing.T, window int, id string, n int) (*fixture, map[int]sas.AgentRequest, events.SQSEvent) {
	t.Helper()
	f := quoted(t, window, id, n)
	held := runUntil(t, f, 0)
	require.Len(t, held, window)
	f.failLists(1)
	ev := f.event(reply(held[0], sas.OutcomeFailed, "out of stock"))
	require.Len(t, f.handle(ev), 1, "the stop's handler dies after the step's failure, before the marks")
	require.Equal(t, sas.Error, f.view(id).Steps[1].ProcessState, "the fan-out stopped")
	for i := 1; i < window; i++ {
		require.False(t, f.element(id, i).Cancelled, "element %d is not marked yet", i)
	}
	return f, held, ev
}

// A stop whose handler died between the step's failure and its marks (its
// read of the elements failed) is driven again by the failure's
// redelivery: the elements in flight are marked then, the refusal is paged
// once, and the order is undone as after a stop that ran whole.
func TestAStopWhoseHandlerDiedBeforeTheMarksIsDrivenAgain(t *testing.T) {
	t.Parallel()
	const id = "o-stopdied"
	f, held, ev := stopDies(t, 3, id, 5)
	require.Empty(t, f.alerts.all())

	require.Empty(t, f.handle(ev), "the failure's redelivery")
	for i := 1; i < 3; i++ {
		e := f.element(id, i)
		require.Equal(t, sas.Processing, e.ProcessState)
		require.True(t, e.Cancelled, "element %d in flight is marked by the stop driven again", i)
	}
	require.Len(t, f.alerts.all(), 1, "the refusal is paged")
	require.Empty(t, f.requests(), "nothing starts, nothing is undone while elements are in flight")

	f.deliver(doneWith(held[1], `{"held":"SKU-1"}`))
	f.deliver(reply(held[2], sas.OutcomeTransient, "timeout"))
	require.False(t, claimedAgain(f.element(id, 2)), "a marked element gets no next attempt")
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{2, 1, 0, -1}, order)
	requireEnded(t, f, sas.StatusCompensated)
	ids := map[string]bool{}
	for _, a := range f.alerts.all() {
		ids[a.ID] = true
	}
	require.Len(t, ids, 1, "paged once (a repeat carries its id)")
}

// An element handed back for its next attempt after its fan-out stopped,
// before the stop's marks reached it (here the stop's handler died first),
// is not claimed again: its claim is fenced on its fan-out running
// (sas.ClaimParams.Fences). It is turned away instead, and undone with the
// rest (its first attempt may have taken effect).
func TestNoElementIsClaimedAfterItsFanOutStopped(t *testing.T) {
	t.Parallel()
	const id = "o-fenced"
	f, held, _ := stopDies(t, 2, id, 4)

	f.deliver(reply(held[1], sas.OutcomeTransient, "timeout"))
	e := f.element(id, 1)
	require.True(t, e.Cancelled, "turned away")
	require.Equal(t, 1, transitions(e, sas.Error), "turned away")
	require.False(t, claimedAgain(e), "no next attempt claimed")
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{1, 0, -1}, order, "no element's request but undos, each undone once")
	require.Equal(t, sas.Compensated, f.view(id).Steps[1].ProcessState)
}

// The handling that started a fan-out died before its elements' requests
// went out; one element was refused meanwhile (its request had gone), so
// the fan-out stopped with the others held and unsent. The redelivery of
// the message that started it sends them again (the simulator's seed 607):
// nothing else would before their delivery horizon, and the order's
// compensation waits for them.
func TestARedeliveryAfterTheStopSendsTheElementsNeverSent(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 3)
	const id = "o-unsent"
	f.deliver(linesIntake(id, 5, f.replyURL))
	quote := f.request()
	unsentAfterStop(t, f, id, 1, doneWith(quote, `{"quote":"Q-1"}`))
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{2, 1, 0, -1}, order)
	requireEnded(t, f, sas.StatusCompensated)
}

// The handling of an element's undo reply that completed its fan-out's
// undo claimed the order's next undo (quote's) and died before its
// request; the reply's redelivery sends it (the simulator's seed 817).
func TestARedeliveredElementUndoSendsTheNextUndo(t *testing.T) {
	t.Parallel()
	const id = "o-nextundo"
	f := quoted(t, 1, id, 1)
	f.deliver(reply(f.request(), sas.OutcomeFailed, "out of stock"))
	undo := f.request()
	require.True(t, undo.Compensation)
	require.Equal(t, 0, elementIndex(undo))

	f.failNextSends(f.agentURL, 1)
	ev := f.event(done(undo))
	require.Len(t, f.handle(ev), 1, "quote's undo request is not sent")
	require.Equal(t, sas.Compensated, f.view(id).Steps[1].ProcessState)
	require.Equal(t, sas.Compensating, f.view(id).Steps[0].ProcessState)
	require.Empty(t, f.handle(ev), "the redelivery")
	next := f.request()
	require.True(t, next.Compensation)
	require.Equal(t, "quote", next.StepName)
	f.deliver(done(next))
	requireEnded(t, f, sas.StatusCompensated)
}

// An element's undo that fails fails its fan-out's undo; when that
// handling's alert fails, the undo reply's redelivery tells the fan-out's
// failed undo again, under the same id (the simulator's deep sweep seed
// 53430).
func TestARedeliveredElementUndoFailureTellsTheFanOutsFailedUndo(t *testing.T) {
	t.Parallel()
	const id = "o-undofailed"
	f := quoted(t, 1, id, 1)
	f.deliver(reply(f.request(), sas.OutcomeFailed, "out of stock"))
	undo := f.request()
	require.True(t, undo.Compensation)
	alerted := len(f.alerts.all())

	ev := f.event(reply(undo, sas.OutcomeFailed, "cannot unreserve"))
	f.alerts.mu.Lock()
	f.alerts.fail = 1
	f.alerts.mu.Unlock()
	require.Len(t, f.handle(ev), 1, "the alert failed: the undo reply is redelivered")
	require.Equal(t, sas.CompensationFailed, f.view(id).Steps[1].ProcessState)
	require.Len(t, f.alerts.all(), alerted)

	require.Empty(t, f.handle(ev), "the redelivery")
	al := f.alerts.all()
	require.Len(t, al, alerted+1, "the fan-out's failed undo is told")
	require.Equal(t, sas.CompensationFailed, al[len(al)-1].State)
	require.Equal(t, 1, al[len(al)-1].Step)
}

// The handling of an element's failure claimed its undo (its fan-out's
// compensation) and died before the undo's request; the failure's
// redelivery, finding the element being undone, sends it (the simulator's
// seed 136).
func TestARedeliveredElementFailureSendsItsUndo(t *testing.T) {
	t.Parallel()
	const id = "o-elemundo"
	f := quoted(t, 1, id, 1)
	el := f.request()
	f.failNextSends(f.agentURL, 1)
	ev := f.event(reply(el, sas.OutcomeFailed, "out of stock"))
	require.Len(t, f.handle(ev), 1, "the element's undo request is not sent")
	require.Equal(t, sas.Compensating, f.element(id, 0).ProcessState)
	require.Empty(t, f.requests())

	require.Empty(t, f.handle(ev), "the redelivery")
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{0, -1}, order)
}

// An element's success after its fan-out stopped completes it alone; the
// last to settle starts the compensation, whose first claim is that
// element's undo: the handling died before the undo's request. The
// success's redelivery, finding the element being undone, sends it (the
// simulator's seed 3310).
func TestARedeliveredElementSuccessSendsItsUndo(t *testing.T) {
	t.Parallel()
	const id = "o-doneundo"
	f := quoted(t, 2, id, 3)
	held := runUntil(t, f, 0)
	f.deliver(reply(held[0], sas.OutcomeFailed, "out of stock"))
	require.True(t, f.element(id, 1).Cancelled)
	f.failNextSends(f.agentURL, 1)
	ev := f.event(doneWith(held[1], `{"held":"SKU-1"}`))
	require.Len(t, f.handle(ev), 1, "element 1's undo request is not sent")
	require.Equal(t, sas.Compensating, f.element(id, 1).ProcessState)
	require.Empty(t, f.requests())

	require.Empty(t, f.handle(ev), "the redelivery")
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{1, 0, -1}, order)
	requireEnded(t, f, sas.StatusCompensated)
}

// A cancel that marks the fan-out step between its claim and its start
// (here, just before the start's write): no element starts, the step fails
// as cancelled with nothing of it to undo, and the order is undone and
// ends Cancelled, unpaged.
func TestAFanOutMarkedBeforeItStartsStartsNoElement(t *testing.T) {
	t.Parallel()
	const id = "o-markedstart"
	f := fanOutFixture(t, 2)
	f.deliver(linesIntake(id, 3, f.replyURL))
	quote := f.request()
	f.store.mu.Lock()
	f.store.beforeStart = func() {
		now := f.clock.Now()
		_, err := f.mem.Cancel(f.ctx, sas.CancelParams{Key: sas.StepKey{OrderID: id, Step: 1}, From: sas.Processing, Attempt: 1, Now: now,
			Actor: "operator", Reason: "changed my mind"})
		require.NoError(t, err)
	}
	f.store.mu.Unlock()
	f.deliver(doneWith(quote, `{"quote":"Q-1"}`))
	_, err := f.mem.GetStep(f.ctx, elementKey(id, 0))
	require.ErrorIs(t, err, sas.ErrNotFound, "no element started")
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{-1}, order, "quote's undo alone")
	require.Equal(t, sas.Cancelled, f.view(id).State())
	requireEnded(t, f, sas.StatusCancelled)
	require.Empty(t, f.alerts.all())
}

// A fan-out that started, whose start's handling died before its
// elements' requests, and that its order's cancel marked since: the
// redelivery sends its elements' requests again (they are in flight, to
// settle as the cancel's rule says), and does not take the step for one
// that never started (the simulator's seed 5246).
func TestAStartedFanOutMarkedSinceResendsItsElements(t *testing.T) {
	t.Parallel()
	const id = "o-markedlater"
	f := fanOutFixture(t, 2)
	f.deliver(linesIntake(id, 3, f.replyURL))
	quote := f.request()
	f.failNextSends(f.agentURL, 1)
	ev := f.event(doneWith(quote, `{"quote":"Q-1"}`))
	require.Len(t, f.handle(ev), 1, "the elements' requests are not sent")
	require.Empty(t, f.requests())
	_, err := f.mem.Cancel(f.ctx, sas.CancelParams{Key: sas.StepKey{OrderID: id, Step: 1}, From: sas.Processing, Attempt: 1, Now: f.clock.Now(),
		Actor: "operator", Reason: "changed my mind"})
	require.NoError(t, err)

	require.Empty(t, f.handle(ev), "the redelivery")
	require.Len(t, f.requests(), 2, "both elements of the window are requested again")
	require.Equal(t, sas.Processing, f.view(id).Steps[1].ProcessState, "the fan-out runs until its elements settle")
}

// A fan-out whose list cannot be evaluated fails at its start, in the
// handling of the reply that claimed it (the simulator's seed 71: a run's
// payload without the list). When that handling stops after the step's
// failure is written (here its alert fails; a death is the same), the
// reply's redelivery is a duplicate of the step before's success: it tells
// the failure again (the same alert id, the failed status) and compensates
// the order, as a redelivered failure does.
func TestAFanOutWhoseListFailedIsToldAgainByTheRedelivery(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 4)
	const id = "o-no-lines"
	f.deliver(fmt.Sprintf(`{"v":1,"orderId":%q,"workflow":"lines","replyTo":%q,"payload":{"amount":1}}`, id, f.replyURL))
	ev := f.event(doneWith(f.request(), `{"quote":"Q-1"}`))
	f.alerts.mu.Lock()
	f.alerts.fail = 1
	f.alerts.mu.Unlock()
	require.Len(t, f.handle(ev), 1, "the alert failed: the reply is redelivered")
	require.Equal(t, sas.Error, f.view(id).Steps[1].ProcessState, "the fan-out failed at its start")
	require.Empty(t, f.alerts.all())

	require.Empty(t, f.handle(ev))
	al := f.alerts.all()
	require.Len(t, al, 1, "the failure is told by the redelivery")
	require.Equal(t, 1, al[0].Step)
	require.Contains(t, al[0].Reason, sas.ErrorForEachItems)
	require.Contains(t, statusList(f.statuses()), "failed/reserve#4001")
	undo := f.request()
	require.Equal(t, 0, undo.Step, "the order is compensated")
	require.True(t, undo.Compensation)
	f.deliver(done(undo))
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending}, f.states(id), "the fan-out had nothing to undo: its undo was done at once")

	require.Empty(t, f.handle(ev), "a later duplicate changes nothing")
	require.Empty(t, f.requests())
}

// The same, when the handling that failed the list got further: its alert
// and status out, the fan-out's own undo done at once (it had no elements),
// then the undo of the step before claimed and its request not sent. The
// fan-out is no longer in Error, so the redelivery must find the failure
// by its record all the same, and drive the compensation on: the undo
// claimed and never sent is sent (the simulator's seed 234, once orders
// without a list were drawn).
func TestARedeliveryAfterAListFailureSendsTheUndoNeverSent(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 4)
	const id = "o-no-lines-undo"
	f.deliver(fmt.Sprintf(`{"v":1,"orderId":%q,"workflow":"lines","replyTo":%q,"payload":{"amount":1}}`, id, f.replyURL))
	ev := f.event(doneWith(f.request(), `{"quote":"Q-1"}`))
	// The fan-out failed at its start and was undone at once; the step
	// before's undo is claimed.
	undoSentByTheRedelivery(t, f, ev, id, []sas.ProcessState{sas.Compensating, sas.Compensated, sas.Pending}, 1)
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Pending}, f.states(id))
	require.Contains(t, statusList(f.statuses()), "compensated#15000")
}

// The same when the step before the fan-out has no undo: the undo claimed
// and never sent is an earlier step's, and the redelivered success is of
// a step that stays Processed (the simulator's seed 234 itself: a callback
// step's completion, redelivered).
func TestARedeliveryAfterAListFailureSendsAnEarlierUndoNeverSent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	quote := sas.StepDef{Name: "quote", Agent: "x", Action: "POST /quote", Undo: "POST /quote/cancel", Timeout: stepTimeout}
	check := sas.StepDef{Name: "check", Agent: "x", Action: "POST /check", Timeout: stepTimeout}
	reserve := sas.StepDef{Name: "reserve", Agent: "x", Action: "POST /reserve", Undo: "POST /reserve/cancel", Timeout: stepTimeout,
		ForEach: &sas.ForEach{Items: "payload.lines", Concurrency: 2}}
	reg, err := sas.NewRegistry(sas.Workflow{Name: "checked", Steps: []sas.StepDef{quote, check, reserve}})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	const id = "o-no-lines-earlier"
	f.deliver(fmt.Sprintf(`{"v":1,"orderId":%q,"workflow":"checked","replyTo":%q,"payload":{"amount":1}}`, id, f.replyURL))
	f.deliver(done(f.request()))
	ev := f.event(done(f.request()))
	undoSentByTheRedelivery(t, f, ev, id, []sas.ProcessState{sas.Compensating, sas.Processed, sas.Compensated}, 1)
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Processed, sas.Compensated}, f.states(id))
}

// The same for a fan-out the intake starts (its first step): the intake's
// redelivery tells the failure its first delivery wrote and did not tell
// (the simulator's seed 1984, a schedule's run with no list whose first
// step to run was its fan-out).
func TestAnIntakeRedeliveredTellsItsFanOutsListFailure(t *testing.T) {
	t.Parallel()
	f := fanFirstFixture(t)
	const id = "o-no-lines-first"
	body := fmt.Sprintf(`{"v":1,"orderId":%q,"workflow":"fan-first","replyTo":%q,"payload":{"amount":1}}`, id, f.replyURL)
	ev := f.event(body)
	f.alerts.mu.Lock()
	f.alerts.fail = 1
	f.alerts.mu.Unlock()
	require.Len(t, f.handle(ev), 1, "the alert failed: the intake is redelivered")
	require.Empty(t, f.alerts.all())

	require.Empty(t, f.handle(ev))
	al := f.alerts.all()
	require.Len(t, al, 1, "the failure is told by the redelivery")
	require.Contains(t, al[0].Reason, sas.ErrorForEachItems)
	require.Contains(t, statusList(f.statuses()), "failed/reserve#2001")
	require.Empty(t, f.handle(f.event(body)),
		"a later redelivery, the order compensated by now")
	require.Len(t, f.alerts.all(), 1, "told once its compensation began: not again")
	require.Empty(t, f.requests(), "nothing to undo, nothing called")
	require.Equal(t, []sas.ProcessState{sas.Compensated, sas.Pending}, f.states(id))
}

// The same for a fan-out a retry claims (an operator's resubmit, a
// supervisor's re-drive, an order that starts later): the retry's
// redelivery tells the failure its first delivery wrote and did not tell
// (the simulator's deep sweep seed 13852, a resubmitted fan-out whose
// order still had no list).
func TestARetryRedeliveredTellsItsFanOutsListFailure(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	check := sas.StepDef{Name: "check", Agent: "x", Action: "POST /check", Timeout: stepTimeout}
	reserve := sas.StepDef{Name: "reserve", Agent: "x", Action: "POST /reserve", Timeout: stepTimeout,
		ForEach: &sas.ForEach{Items: "payload.lines", Concurrency: 2}}
	reg, err := sas.NewRegistry(sas.Workflow{Name: "checked", Steps: []sas.StepDef{check, reserve}})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	const id = "o-no-lines-retry"
	f.deliver(fmt.Sprintf(`{"v":1,"orderId":%q,"workflow":"checked","replyTo":%q,"payload":{"amount":1}}`, id, f.replyURL))
	f.deliver(done(f.request()))
	require.Equal(t, sas.Error, f.step(id, 1).ProcessState, "the fan-out failed at its start: nothing to undo")
	require.Len(t, f.alerts.all(), 1)

	again := f.resubmit(id, 1) // an operator, the list still missing
	ev := f.event(retryMsg(id, 1, again.Attempt))
	f.alerts.mu.Lock()
	f.alerts.fail = 1
	f.alerts.mu.Unlock()
	require.Len(t, f.handle(ev), 1, "the alert failed: the retry is redelivered")
	require.Equal(t, sas.Error, f.step(id, 1).ProcessState)
	require.Len(t, f.alerts.all(), 1, "not told yet")

	require.Empty(t, f.handle(ev))
	al := f.alerts.all()
	require.Len(t, al, 2, "the redelivery tells the failure of the resubmitted attempt")
	require.Equal(t, fmt.Sprintf("%s/1/Error/%d", id, again.Attempt+1), al[1].ID)
	require.Contains(t, al[1].Reason, sas.ErrorForEachItems)
}

// The same as TestARedeliveryAfterTheStopSendsTheElementsNeverSent for a
// fan-out the intake starts (its first step): the intake's redelivery,
// finding the fan-out stopped since, sends the elements it claimed and
// never sent (the simulator's deep sweep seed 19083, a schedule's run whose
// fan-out came first after skipped steps).
func TestAnIntakeRedeliveredAfterTheStopSendsTheElementsNeverSent(t *testing.T) {
	t.Parallel()
	f := fanFirstFixture(t)
	const id = "o-unsent-first"
	unsentAfterStop(t, f, id, 0, fmt.Sprintf(`{"v":1,"orderId":%q,"workflow":"fan-first","replyTo":%q,"payload":{"lines":[{"sku":"A"},{"sku":"B"},{"sku":"C"},{"sku":"D"}]}}`, id, f.replyURL))
	order, _ := undoAll(t, f, id)
	require.Equal(t, []int{2, 1, 0}, order)
}

// unsentAfterStop delivers body, the message that starts fan-out step of
// order id (a window of 3), with the requests of elements 1 and 2 failing
// to send; element 0 then fails, stopping the fan-out; body's redelivery
// must send elements 1 and 2 again, which then settle (1 done, 2 failed).
func unsentAfterStop(t *testing.T, f *fixture, id string, step int, body string) {
	t.Helper()
	f.failEntries(func(url, body string) bool {
		var r sas.AgentRequest
		return url == f.agentURL && json.Unmarshal([]byte(body), &r) == nil && elementIndex(r) > 0
	})
	ev := f.event(body)
	require.Len(t, f.handle(ev), 1, "elements 1 and 2's requests are not sent")
	f.failEntries(nil)
	reqs := f.requests()
	require.Len(t, reqs, 1)
	require.Equal(t, 0, elementIndex(reqs[0]))
	f.deliver(reply(reqs[0], sas.OutcomeFailed, "out of stock"))
	require.Equal(t, sas.Error, f.view(id).Steps[step].ProcessState)
	require.Empty(t, f.requests())

	require.Empty(t, f.handle(ev), "the redelivery of the message that started the fan-out")
	again := map[int]sas.AgentRequest{}
	for _, r := range f.requests() {
		require.False(t, r.Compensation)
		again[elementIndex(r)] = r
	}
	require.Len(t, again, 2, "elements 1 and 2 are requested again")
	f.deliver(doneWith(again[1], `{"held":"SKU-1"}`))
	f.deliver(reply(again[2], sas.OutcomeFailed, "no such sku"))
}

// fanFirstFixture runs workflow "fan-first": a fan-out over payload.lines
// (a window of 3, undoable) as its first step, then ship.
func fanFirstFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	reserve := sas.StepDef{Name: "reserve", Agent: "x", Action: "POST /reserve", Undo: "POST /reserve/cancel", Timeout: stepTimeout,
		ForEach: &sas.ForEach{Items: "payload.lines", Concurrency: 3}}
	ship := sas.StepDef{Name: "ship", Agent: "x", Action: "POST /ship", Timeout: stepTimeout}
	reg, err := sas.NewRegistry(sas.Workflow{Name: "fan-first", Steps: []sas.StepDef{reserve, ship}})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	return f
}

// undoSentByTheRedelivery handles ev with every undo's request failing to
// send, requires order id's states to be claimed, then handles ev again:
// step 0's undo, claimed and never sent, must be sent by the redelivery,
// and alerts alerts out (the failure told once, or a cancel's none). It
// answers the undo done.
func undoSentByTheRedelivery(t *testing.T, f *fixture, ev events.SQSEvent, id string, claimed []sas.ProcessState, alerts int) {
	t.Helper()
	f.failEntries(func(url, body string) bool {
		var r sas.AgentRequest
		return url == f.agentURL && json.Unmarshal([]byte(body), &r) == nil && r.Compensation
	})
	require.Len(t, f.handle(ev), 1, "the undo's request failed to send: the message is redelivered")
	f.failEntries(nil)
	require.Equal(t, claimed, f.states(id))
	require.Len(t, f.alerts.all(), alerts)
	require.Empty(t, f.requests())

	require.Empty(t, f.handle(ev))
	undo := f.request()
	require.Equal(t, 0, undo.Step, "the undo claimed and never sent is sent")
	require.True(t, undo.Compensation)
	require.Len(t, f.alerts.all(), alerts, "the failure was told once (a cancel pages nobody)")
	f.deliver(done(undo))
}
