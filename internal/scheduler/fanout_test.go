package scheduler_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// The test stores pass the fan-out port through to the in-memory store.
func (s *faultyStore) StartFanOut(ctx context.Context, p sas.StartFanOutParams) ([]sas.StepRecord, error) {
	s.mu.Lock()
	before := s.beforeStart
	s.beforeStart = nil
	s.mu.Unlock()
	if before != nil {
		before()
	}
	return s.StateStore.(sas.FanOutStore).StartFanOut(ctx, p)
}
func (s *faultyStore) CompleteElement(ctx context.Context, p sas.CompleteElementParams) ([]sas.StepRecord, error) {
	return s.StateStore.(sas.FanOutStore).CompleteElement(ctx, p)
}
func (s *faultyStore) ListElements(ctx context.Context, p sas.ListElementsParams) (sas.ListElementsResult, error) {
	s.mu.Lock()
	fail := s.listFails > 0
	if fail {
		s.listFails--
	}
	s.mu.Unlock()
	if fail {
		return sas.ListElementsResult{}, errors.New("injected: the store is unreachable")
	}
	return s.StateStore.(sas.FanOutStore).ListElements(ctx, p)
}

// failLists fails the next n reads of a fan-out's elements.
func (f *fixture) failLists(n int) {
	f.store.mu.Lock()
	defer f.store.mu.Unlock()
	f.store.listFails = n
}
func (s *countingStore) StartFanOut(ctx context.Context, p sas.StartFanOutParams) ([]sas.StepRecord, error) {
	s.count("StartFanOut")
	return s.StateStore.(sas.FanOutStore).StartFanOut(ctx, p)
}
func (s *countingStore) CompleteElement(ctx context.Context, p sas.CompleteElementParams) ([]sas.StepRecord, error) {
	s.count("CompleteElement")
	return s.StateStore.(sas.FanOutStore).CompleteElement(ctx, p)
}
func (s *countingStore) ListElements(ctx context.Context, p sas.ListElementsParams) (sas.ListElementsResult, error) {
	s.count("ListElements")
	return s.StateStore.(sas.FanOutStore).ListElements(ctx, p)
}

// fanOutFixture runs "lines": quote, then reserve once per line of the
// payload (window concurrency), then ship.
func fanOutFixture(t *testing.T, concurrency int) *fixture {
	t.Helper()
	f := newFixture(t)
	step := func(name string) sas.StepDef {
		return sas.StepDef{Name: name, Agent: "x", Action: "POST /" + name, Undo: "POST /" + name + "/cancel", Timeout: stepTimeout}
	}
	reserve := step("reserve")
	reserve.ForEach = &sas.ForEach{Items: "payload.lines", Concurrency: concurrency}
	reg, err := sas.NewRegistry(sas.Workflow{Name: "lines", Steps: []sas.StepDef{step("quote"), reserve, step("ship")}})
	require.NoError(t, err)
	f.svc = f.newServiceWith(owner, reg, sas.AgentQueues{Default: f.agentURL})
	f.h = schedulerHandler(f.svc)
	return f
}

// linesIntake is an order of workflow "lines" over n lines.
func linesIntake(id string, n int, replyTo string) string {
	lines := make([]map[string]any, n)
	for i := range lines {
		lines[i] = map[string]any{"sku": fmt.Sprintf("SKU-%d", i), "qty": i + 1}
	}
	b, _ := json.Marshal(map[string]any{"v": 1, "orderId": id, "workflow": "lines", "replyTo": replyTo, "payload": map[string]any{"lines": lines}})
	return string(b)
}

// runFanOut runs an order of n lines to its ship request, answering each
// element with its SKU in reverse order of the requests at hand, and
// checks that at most window elements are ever in flight and each element
// is requested once. It returns the ship request.
func runFanOut(t *testing.T, f *fixture, id string, n, window int) sas.AgentRequest {
	t.Helper()
	f.deliver(linesIntake(id, n, f.replyURL))
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	requested := map[int]int{}
	inFlight := 0
	for {
		reqs := f.requests()
		var elems []sas.AgentRequest
		for _, r := range reqs {
			if r.StepName == "ship" {
				require.Len(t, reqs, 1, "ship starts alone, once every element is done")
				require.Equal(t, n, len(requested), "every element was requested")
				return r
			}
			require.True(t, sas.IsElement(r.Step), "only elements run before ship: %s", r.StepName)
			step, i := sas.ElementOf(r.Step)
			require.Equal(t, 1, step)
			requested[i]++
			require.Equal(t, 1, requested[i], "element %d requested once", i)
			var line struct {
				SKU string `json:"sku"`
			}
			require.NoError(t, json.Unmarshal(r.Item, &line))
			require.Equal(t, fmt.Sprintf("SKU-%d", i), line.SKU, "each request carries its element")
			require.Equal(t, fmt.Sprintf("%s:1:i%d", id, i), r.IdempotencyKey)
			require.JSONEq(t, `{"quote":{"quote":"Q-1"}}`, string(mustJSON(t, r.Results)), "an element sees what its step sees")
			elems = append(elems, r)
		}
		require.NotEmpty(t, elems, "the fan-out went on")
		inFlight += len(elems)
		require.LessOrEqual(t, inFlight, window, "at most the window runs at once")
		for k := len(elems) - 1; k >= 0; k-- {
			var line struct {
				SKU string `json:"sku"`
			}
			require.NoError(t, json.Unmarshal(elems[k].Item, &line))
			f.deliver(doneWith(elems[k], fmt.Sprintf(`{"held":%q}`, line.SKU)))
			inFlight--
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// heldList is the reserve step's result over n lines: each element's, in
// index order.
func heldList(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"held":"SKU-%d"}`, i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// A fan-out of 3 under a window of 4, and of 25 under a window of 4,
// completes with its elements' results in order, which the step after it
// and the processed status see; each element is one request, with its own
// element and key, and never more than the window at once. The order's
// records are its steps alone: its elements are read apart.
func TestAFanOutCompletesWithItsResultsInOrder(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 25} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			f := fanOutFixture(t, 4)
			id := fmt.Sprintf("o-fan-%d", n)
			ship := runFanOut(t, f, id, n, 4)
			require.JSONEq(t, heldList(n), string(ship.Results["reserve"]))
			f.calls.take()
			f.deliver(done(ship))
			v := f.view(id)
			require.Len(t, v.Steps, 3, "the order's view holds its steps, not its elements")
			require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed, sas.Processed}, f.states(id))
			require.Equal(t, n, v.Steps[1].ForEachCount)
			require.Equal(t, n, v.Steps[1].ForEachDone)
			require.JSONEq(t, heldList(n), string(v.Steps[1].Result))
			ss := f.statuses()
			last := ss[len(ss)-1]
			require.Equal(t, sas.StatusProcessed, last.Status)
			require.JSONEq(t, heldList(n), string(last.Results["reserve"]))
			for i := range n {
				e, err := f.mem.GetStep(f.ctx, sas.StepKey{OrderID: id, Step: sas.ElementStep(1, i)})
				require.NoError(t, err)
				require.Equal(t, sas.Processed, e.ProcessState, "element %d", i)
				require.Equal(t, 1, e.Attempt)
			}
		})
	}
}

// Store calls per element are deterministic: a fan-out of 10 under a
// window of 4 starts in one write, each element's completion is one write,
// and the step's completion reads its elements once.
func TestAFanOutsStoreCalls(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 4)
	f.deliver(linesIntake("o-calls", 10, f.replyURL))
	f.calls.take()
	f.deliver(doneWith(f.request(), `{"quote":"Q-1"}`))
	calls, _ := f.calls.take()
	require.Equal(t, 1, calls["StartFanOut"], "%v", calls)
	completed := 0
	for completed < 10 {
		reqs := f.requests()
		require.NotEmpty(t, reqs, "the fan-out stopped after %d elements", completed)
		for _, r := range reqs {
			f.deliver(doneWith(r, `1`))
			completed++
		}
	}
	calls, _ = f.calls.take()
	require.Equal(t, 10, calls["CompleteElement"], "%v", calls)
	require.Equal(t, 1, calls["ListElements"], "%v", calls)
	require.Equal(t, 1, calls["Complete"], "the step's completion, which claims ship: %v", calls)
	ship := f.request()
	require.Equal(t, "ship", ship.StepName)
	require.JSONEq(t, `[1,1,1,1,1,1,1,1,1,1]`, string(ship.Results["reserve"]))
}

// A list of no element completes the step at once with [], and no
// element is requested.
func TestAnEmptyFanOutCompletesAtOnce(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 4)
	f.deliver(linesIntake("o-empty", 0, f.replyURL))
	f.deliver(done(f.request()))
	ship := f.request()
	require.Equal(t, "ship", ship.StepName)
	require.JSONEq(t, `[]`, string(ship.Results["reserve"]))
	require.Equal(t, 0, f.view("o-empty").Steps[1].ForEachCount)
}

// A list that is not one fails the step for good when it starts, named,
// and the order is compensated: quote is undone, nothing was requested of
// reserve.
func TestAFanOutOverNoListFailsItsStep(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 4)
	b, _ := json.Marshal(map[string]any{"v": 1, "orderId": "o-nolist", "workflow": "lines", "replyTo": f.replyURL, "payload": map[string]any{"lines": "none"}})
	f.deliver(string(b))
	f.deliver(done(f.request()))
	undo := f.request()
	require.Equal(t, "quote", undo.StepName, "reserve ran nothing: its undo is done at once, then quote's")
	require.True(t, undo.Compensation)
	r := f.view("o-nolist").Steps[1]
	require.Equal(t, sas.Compensated, r.ProcessState)
	require.Contains(t, r.LastError, sas.ErrorForEachItems)
	require.Contains(t, r.LastError, "not a list")
	require.Equal(t, 0, r.ForEachCount)
	f.deliver(done(undo))
	ss := f.statuses()
	require.Equal(t, sas.StatusCompensated, ss[len(ss)-1].Status)
}

// A duplicate or late reply of an element changes nothing: no second
// completion, no request sent again, no count moved.
func TestADuplicateElementReplyChangesNothing(t *testing.T) {
	t.Parallel()
	f := fanOutFixture(t, 2)
	f.deliver(linesIntake("o-dup", 3, f.replyURL))
	f.deliver(done(f.request()))
	elems := f.requests()
	require.Len(t, elems, 2)
	first := doneWith(elems[0], `"a"`)
	f.deliver(first)
	third := f.request()
	_, i := sas.ElementOf(third.Step)
	require.Equal(t, 2, i, "element 0's completion claimed element 2")

	f.clock.Advance(time.Second) // a twin arrives later than its first
	f.calls.take()
	require.Empty(t, f.handle(f.duplicate(first)))
	require.Empty(t, f.requests(), "a twin reply sends nothing")
	require.Equal(t, 1, f.view("o-dup").Steps[1].ForEachDone, "and counts nothing")

	// A reply of another attempt (a forged or stale one) changes nothing
	// either.
	stale := elems[1]
	stale.Attempt = 2
	rep := signedReply(stale, sas.OutcomeDone, "")
	require.Empty(t, f.handle(f.duplicate(sas.Encode(rep))))
	require.Equal(t, 1, f.view("o-dup").Steps[1].ForEachDone)
	e, err := f.mem.GetStep(f.ctx, sas.StepKey{OrderID: "o-dup", Step: elems[1].Step})
	require.NoError(t, err)
	require.Equal(t, sas.Processing, e.ProcessState)

	f.deliver(doneWith(elems[1], `"b"`), doneWith(third, `"c"`))
	ship := f.request()
	require.JSONEq(t, `["a","b","c"]`, string(ship.Results["reserve"]))
	// The last element's reply again, later: the step is done, its
	// successor already claimed; nothing moves. (At the very instant of
	// the claim, the twin would take the claim for its own write, made by
	// an ambiguous commit, and send its request again: sas.OwnWrite.)
	f.clock.Advance(time.Second)
	require.Empty(t, f.handle(f.duplicate(doneWith(third, `"c"`))))
	require.Empty(t, f.requests())
	require.Equal(t, sas.Processed, f.view("o-dup").Steps[1].ProcessState)
}

// The redelivery of the reply that completed a fan-out sends the request
// of the step after it when the first delivery's send failed (or it died
// before): the last element's reply, and, for an empty list, the reply of
// the step before it, whose handling completed the fan-out at once
// (the simulator's seeds 241, 657 and 121: that request was never sent).
func TestARedeliveryAfterAFanOutsCompletionSendsTheNextRequest(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 0} {
		f := fanOutFixture(t, 2)
		id := fmt.Sprintf("o-next-%d", n)
		f.deliver(linesIntake(id, n, f.replyURL))
		last := done(f.request())
		if n > 0 {
			f.deliver(last)
		}
		for i, e := range f.requests() {
			b := doneWith(e, fmt.Sprintf("%d", i))
			if i < n-1 {
				f.deliver(b)
			} else {
				last = b
			}
		}
		f.failNextSends(f.agentURL, 1)
		require.NotEmpty(t, f.handle(f.event(last)), "n=%d: the send failed, the message comes back", n)
		require.Empty(t, f.requests())
		require.Equal(t, sas.Processing, f.step(id, 2).ProcessState, "n=%d: ship claimed", n)
		f.clock.Advance(time.Second)
		require.Empty(t, f.handle(f.event(last)))
		ship := f.request()
		require.Equal(t, 2, ship.Step, "n=%d: its redelivery sends ship's request", n)
		want := map[int]string{0: `[]`, 2: `[0,1]`}[n]
		require.JSONEq(t, want, string(ship.Results["reserve"]), "n=%d: with the fan-out's results (the simulator's seed 462)", n)
	}
}
