package judge_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/judge"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

var t0 = clocktest.T0

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// givenUpPayment is a single-step order the supervisor rescued twice and gave
// up on at the third failure (windows ending at 10 s, 20 s and 30 s).
func givenUpPayment(id string) sas.OrderView {
	h := []sas.HistoryEntry{
		{At: at(0), From: "", To: sas.Pending, Actor: "submit"},
		{At: at(0), From: sas.Pending, To: sas.Processing, Attempt: 1, Actor: "scheduler-0"},
		{At: at(10), From: sas.Processing, To: sas.Pending, Attempt: 1, Actor: "supervisor-0"},
		{At: at(12), From: sas.Pending, To: sas.Processing, Attempt: 2, Actor: "scheduler-1"},
		{At: at(20), From: sas.Processing, To: sas.Pending, Attempt: 2, Actor: "supervisor-1"},
		{At: at(22), From: sas.Pending, To: sas.Processing, Attempt: 3, Actor: "scheduler-0"},
		{At: at(30), From: sas.Processing, To: sas.Error, Attempt: 3, Actor: "supervisor-0"},
	}
	r := sas.StepRecord{OrderID: id, Step: 0, StepName: "charge", ProcessState: sas.Error, Attempt: 3, FailureCount: 3, History: h}
	return sas.OrderView{Order: sas.Order{OrderID: id, Workflow: registry.Payment}, Steps: []sas.StepRecord{r}, History: h}
}

func refusedPayment(id string) sas.OrderView {
	h := []sas.HistoryEntry{
		{At: at(0), From: "", To: sas.Processing, Attempt: 1, Actor: "scheduler-0"},
		{At: at(1), From: sas.Processing, To: sas.Error, Attempt: 1, Actor: "scheduler-0"},
	}
	r := sas.StepRecord{OrderID: id, Step: 0, StepName: "charge", ProcessState: sas.Error, Attempt: 1, History: h}
	return sas.OrderView{Order: sas.Order{OrderID: id, Workflow: registry.Payment}, Steps: []sas.StepRecord{r}, History: h}
}

func judgeOne(t *testing.T, v sas.OrderView, calls []remotesim.Call, harness []judge.HarnessFault) judge.Verdict {
	t.Helper()
	reg, err := registry.Default(8 * time.Second)
	require.NoError(t, err)
	id := v.Order.OrderID
	alerts := []sas.Alert{}
	for _, r := range v.Steps {
		for _, h := range r.History {
			if h.To == sas.Error || h.To == sas.CompensationFailed {
				alerts = append(alerts, sas.Alert{OrderID: id, Step: r.Step, State: h.To, Attempts: h.Attempt})
			}
		}
	}
	return judge.Judge(judge.Evidence{
		IDs: []string{id}, Views: map[string]sas.OrderView{id: v}, Registry: reg,
		Calls:   map[string][]remotesim.Call{sas.IdempotencyKey(id, 0, 0, false): calls},
		Harness: func(string) []judge.HarnessFault { return harness }, Alerts: alerts,
	}, judge.JudgeRules{})
}

func TestJudgeRefusalNeedsAPermanentFault(t *testing.T) {
	t.Parallel()
	v := judgeOne(t, refusedPayment("o-1"), []remotesim.Call{{Key: "o-1:0", At: at(0.5), Fault: remotesim.FaultPermanent}}, nil)
	require.Empty(t, v.Defects)
	require.True(t, v.OK(), v.Problems())

	require.Equal(t, 1, v.RefusedForGood)
	require.Equal(t, 1.0, v.ProcessedShare(), "an order its remote refused for good could not be processed: not held to the share")

	v = judgeOne(t, refusedPayment("o-1"), []remotesim.Call{{Key: "o-1:0", At: at(0.5), Outcome: "effect"}}, nil)
	require.Len(t, v.Defects, 1, "a failed reply without an injected refusal is a defect")
	require.False(t, v.Defects[0].Waited)
	require.Zero(t, v.RefusedForGood)
	require.Zero(t, v.ProcessedShare(), "an unexplained failure counts against the share")
}

func TestJudgeGiveUpNeedsAStallInEveryWindow(t *testing.T) {
	t.Parallel()
	hang := func(s float64) remotesim.Call {
		return remotesim.Call{Key: "o-2:0", At: at(s), Fault: remotesim.FaultHang}
	}
	v := judgeOne(t, givenUpPayment("o-2"), []remotesim.Call{hang(1), hang(13), hang(23)}, nil)
	require.Empty(t, v.Defects, "a hang in each of the three windows explains the give-up")

	kill := judge.HarnessFault{OrderID: "o-2", Step: 0, Kind: judge.FaultKilled, At: at(14)}
	v = judgeOne(t, givenUpPayment("o-2"), []remotesim.Call{hang(1), hang(23)}, []judge.HarnessFault{kill})
	require.Empty(t, v.Defects, "a kill holding the step's message stalls its window too")

	v = judgeOne(t, givenUpPayment("o-2"), []remotesim.Call{hang(1), hang(23)}, nil)
	require.Len(t, v.Defects, 1, "the second window saw no fault")
	require.True(t, v.Defects[0].Waited)
	require.Equal(t, 1, v.FailedByWaiting)

	var transients []remotesim.Call
	for i := range 4 {
		transients = append(transients, remotesim.Call{Key: "o-2:0", At: at(13 + float64(i)), Fault: remotesim.FaultTransient})
	}
	v = judgeOne(t, givenUpPayment("o-2"), append([]remotesim.Call{hang(1), hang(23)}, transients...), nil)
	require.Len(t, v.Defects, 1, "four transient answers do not exhaust a call's five tries")
	require.False(t, v.Defects[0].Waited)
	transients = append(transients, remotesim.Call{Key: "o-2:0", At: at(18), Fault: remotesim.FaultLost, LostMode: remotesim.LostError})
	v = judgeOne(t, givenUpPayment("o-2"), append([]remotesim.Call{hang(1), hang(23)}, transients...), nil)
	require.Empty(t, v.Defects, "five transient answers do")
}

func TestJudgeInvariants(t *testing.T) {
	t.Parallel()
	reg, err := registry.Default(8 * time.Second)
	require.NoError(t, err)
	v := refusedPayment("o-3")
	v.Steps[0].History[1].From = sas.Pending // Pending is not what the record was
	got := judge.Judge(judge.Evidence{
		IDs: []string{"o-3", "o-4"}, Views: map[string]sas.OrderView{"o-3": v}, Registry: reg,
		Calls:   map[string][]remotesim.Call{"o-3:0": {{Key: "o-3:0", Fault: remotesim.FaultPermanent}}},
		Effects: []remotesim.Effect{{Key: "o-5:0", OrderID: "o-5"}, {Key: "o-5:0", OrderID: "o-5"}},
	}, judge.JudgeRules{})
	require.Len(t, got.Lost, 1, "o-4 was never created")
	require.NotEmpty(t, got.Illegal)
	require.Len(t, got.Alerts, 1, "the Error step has no alert")
	require.Len(t, got.DoubleEffects, 1)
	require.False(t, got.OK())
}

// An order still running when the run ends is lost, once: its alerts are not
// compared with a history that has not ended (an alert for an Error the
// order's history does have is not a mismatch, whatever state it is in now).
func TestJudgeUnsettledOrderIsLostNotMisalerted(t *testing.T) {
	t.Parallel()
	reg, err := registry.Default(8 * time.Second)
	require.NoError(t, err)
	v := refusedPayment("o-6")
	v.Steps[0].ProcessState = sas.Compensating
	v.Steps[0].History = append(v.Steps[0].History,
		sas.HistoryEntry{At: at(2), From: sas.Error, To: sas.Compensating, Attempt: 1, Actor: "scheduler-0"})
	got := judge.Judge(judge.Evidence{
		IDs: []string{"o-6"}, Views: map[string]sas.OrderView{"o-6": v}, Registry: reg,
		Alerts: []sas.Alert{{OrderID: "o-6", Step: 0, State: sas.Error, Attempts: 1}},
	}, judge.JudgeRules{})
	require.Len(t, got.Lost, 1)
	require.Contains(t, got.Lost[0], "not terminal")
	require.Empty(t, got.Alerts)
	require.False(t, got.OK())

	// The same alert on a settled order whose history never entered Error
	// at that attempt is a mismatch.
	settled := refusedPayment("o-7")
	got = judge.Judge(judge.Evidence{
		IDs: []string{"o-7"}, Views: map[string]sas.OrderView{"o-7": settled}, Registry: reg,
		Calls: map[string][]remotesim.Call{"o-7:0": {{Key: "o-7:0", Fault: remotesim.FaultPermanent}}},
		Alerts: []sas.Alert{
			{OrderID: "o-7", Step: 0, State: sas.Error, Attempts: 1},
			{OrderID: "o-7", Step: 0, State: sas.Error, Attempts: 2},
		},
	}, judge.JudgeRules{})
	require.Len(t, got.Alerts, 1)
	require.Contains(t, got.Alerts[0], "at attempt 2, which its history never entered")
}

// compensatedOrder is a three-step order whose ship step was refused and
// whose reserve and charge were undone.
func compensatedOrder(id string, chargeNotedLate bool) sas.OrderView {
	steps := []sas.StepRecord{
		{OrderID: id, Step: 0, StepName: "reserve", ProcessState: sas.Compensated, Attempt: 1, History: []sas.HistoryEntry{
			{At: at(0), To: sas.Processing, Attempt: 1, Actor: "scheduler-0"},
			{At: at(1), From: sas.Processing, To: sas.Processed, Attempt: 1, Actor: "scheduler-0"},
			{At: at(5), From: sas.Processed, To: sas.Compensating, Attempt: 1, Actor: "scheduler-0"},
			{At: at(6), From: sas.Compensating, To: sas.Compensated, Attempt: 1, Actor: "scheduler-0"},
		}},
		{OrderID: id, Step: 1, StepName: "charge", ProcessState: sas.Compensated, Attempt: 1},
		{OrderID: id, Step: 2, StepName: "ship", ProcessState: sas.Error, Attempt: 1, History: []sas.HistoryEntry{
			{At: at(2), From: sas.Pending, To: sas.Processing, Attempt: 1, Actor: "scheduler-0"},
			{At: at(3), From: sas.Processing, To: sas.Error, Attempt: 1, Actor: "scheduler-0"},
		}},
	}
	charge := []sas.HistoryEntry{{At: at(1), From: sas.Pending, To: sas.Processing, Attempt: 1, Actor: "scheduler-0"}}
	if chargeNotedLate {
		charge = append(charge,
			sas.HistoryEntry{At: at(2), From: sas.Processing, To: sas.Error, Attempt: 1, Actor: "scheduler-0", Reason: "declined"},
			sas.HistoryEntry{At: at(7), From: sas.Error, To: sas.Error, Attempt: 1, Actor: "scheduler-1", Reason: "a done reply for attempt 1 arrived while the step was Error: its effect may exist"},
			sas.HistoryEntry{At: at(8), From: sas.Error, To: sas.Compensating, Attempt: 1, Actor: "scheduler-1"},
		)
	} else {
		charge = append(charge,
			sas.HistoryEntry{At: at(2), From: sas.Processing, To: sas.Processed, Attempt: 1, Actor: "scheduler-0"},
			sas.HistoryEntry{At: at(4), From: sas.Processed, To: sas.Compensating, Attempt: 1, Actor: "scheduler-0"},
		)
	}
	charge = append(charge, sas.HistoryEntry{At: at(9), From: sas.Compensating, To: sas.Compensated, Attempt: 1, Actor: "scheduler-1"})
	steps[1].History = charge
	return sas.OrderView{Order: sas.Order{OrderID: id, Workflow: registry.Order}, Steps: steps}
}

func TestJudgeCompensationOrderAndTiming(t *testing.T) {
	t.Parallel()
	reg, err := registry.Default(8 * time.Second)
	require.NoError(t, err)
	run := func(v sas.OrderView, effects ...remotesim.Effect) []string {
		id := v.Order.OrderID
		calls := map[string][]remotesim.Call{sas.IdempotencyKey(id, 2, 0, false): {{Fault: remotesim.FaultPermanent}}}
		alerts := []sas.Alert{{OrderID: id, Step: 2, State: sas.Error, Attempts: 1}}
		if notedLate := v.Steps[1].History[1].To == sas.Error; notedLate {
			calls[sas.IdempotencyKey(id, 1, 0, false)] = []remotesim.Call{{Fault: remotesim.FaultPermanent}}
			alerts = append(alerts, sas.Alert{OrderID: id, Step: 1, State: sas.Error, Attempts: 1})
		}
		return judge.Judge(judge.Evidence{
			IDs: []string{id}, Views: map[string]sas.OrderView{id: v}, Registry: reg,
			Effects: effects, Calls: calls, Alerts: alerts,
		}, judge.JudgeRules{}).Compensation
	}
	eff := func(id string, step int, undo bool, s float64) remotesim.Effect {
		return remotesim.Effect{Key: sas.IdempotencyKey(id, step, 0, undo), OrderID: id, At: at(s)}
	}

	// Newest first: the charge (step 1) refunded before the reservation.
	require.Empty(t, run(compensatedOrder("c-1", false), eff("c-1", 0, false, 1), eff("c-1", 1, false, 2), eff("c-1", 1, true, 4.5), eff("c-1", 0, true, 5.5)))
	// Oldest first is a defect...
	got := run(compensatedOrder("c-2", false), eff("c-2", 0, false, 1), eff("c-2", 1, false, 2), eff("c-2", 0, true, 4.5), eff("c-2", 1, true, 5.5))
	require.Len(t, got, 1)
	require.Contains(t, got[0], "step 0 was undone before step 1")
	// ...unless the later step's effect became known only after the chain
	// had passed it (a success after its refusal).
	require.Empty(t, run(compensatedOrder("c-3", true), eff("c-3", 0, false, 1), eff("c-3", 1, false, 6.5), eff("c-3", 0, true, 5.5), eff("c-3", 1, true, 8.5)))
	// An effect that landed after its undo remains: a defect.
	got = run(compensatedOrder("c-4", false), eff("c-4", 0, false, 1), eff("c-4", 1, false, 5), eff("c-4", 1, true, 4.5), eff("c-4", 0, true, 5.5))
	require.Len(t, got, 1)
	require.Contains(t, got[0], "step 1 (charge): took effect after its undo")
}

// A rejected order is counted apart: not failed, no alert owed, and not
// held against the processed share (issue 27 §5).
func TestJudgeCountsARejectionApart(t *testing.T) {
	t.Parallel()
	v := refusedPayment("o-rej")
	v.Steps[0].Rejected = true
	reg, err := registry.Default(8 * time.Second)
	require.NoError(t, err)
	got := judge.Judge(judge.Evidence{
		IDs: []string{"o-rej"}, Views: map[string]sas.OrderView{"o-rej": v}, Registry: reg,
		Calls: map[string][]remotesim.Call{"o-rej:0": {{Key: "o-rej:0"}}},
	}, judge.JudgeRules{})
	require.Equal(t, 1, got.Rejected)
	require.Zero(t, got.Failed)
	require.Empty(t, got.Alerts, "no alert is owed for a rejection")
	require.Empty(t, got.Defects)
	require.Equal(t, 1.0, got.ProcessedShare())
	require.True(t, got.OK(), "%v", got.Problems())
}

// With branches the undos go newest completion first, whatever the step
// index (docs/protocol.md, "Branches"): a split order whose charge (step 1)
// completed before its reservation (step 0) undoes the reservation first.
func TestJudgeCompensationWithBranchesIsNewestCompletionFirst(t *testing.T) {
	t.Parallel()
	line, err := registry.Default(8 * time.Second)
	require.NoError(t, err)
	ord := line[registry.Order]
	split := sas.Workflow{Name: "split", Steps: append([]sas.StepDef(nil), ord.Steps...)}
	split.Steps[1].After = []int{}
	split.Steps[2].After = []int{0, 1}
	graph, err := sas.NewRegistry(split)
	require.NoError(t, err)
	run := func(reg sas.Registry, wf, id string, firstUndone int) []string {
		v := compensatedOrder(id, false)
		v.Order.Workflow = wf
		v.Steps[0].History[1].At = at(2.5) // reserve completes after charge (at 2)
		v.Steps[2].History[0].At, v.Steps[2].History[1].At = at(2.6), at(3)
		second := 1 - firstUndone
		effects := []remotesim.Effect{
			{Key: sas.IdempotencyKey(id, 0, 0, false), OrderID: id, At: at(1)},
			{Key: sas.IdempotencyKey(id, 1, 0, false), OrderID: id, At: at(2)},
			{Key: sas.IdempotencyKey(id, firstUndone, 0, true), OrderID: id, At: at(4.5)},
			{Key: sas.IdempotencyKey(id, second, 0, true), OrderID: id, At: at(5.5)},
		}
		return judge.Judge(judge.Evidence{
			IDs: []string{id}, Views: map[string]sas.OrderView{id: v}, Registry: reg, Effects: effects,
			Calls:  map[string][]remotesim.Call{sas.IdempotencyKey(id, 2, 0, false): {{Fault: remotesim.FaultPermanent}}},
			Alerts: []sas.Alert{{OrderID: id, Step: 2, State: sas.Error, Attempts: 1}},
		}, judge.JudgeRules{}).Compensation
	}
	require.Empty(t, run(graph, "split", "b-1", 0), "the reservation, completed last, undone first")
	got := run(graph, "split", "b-2", 1)
	require.Len(t, got, 1, "the charge undone first, though it completed first")
	require.Contains(t, got[0], "step 1 was undone before step 0")
	// In a straight line the same undo order is wrong: the step index rules.
	got = run(line, registry.Order, "b-3", 0)
	require.Len(t, got, 1)
	require.Contains(t, got[0], "step 0 was undone before step 1")
}

// MissingAlerts is Judge's alert rule alone: what the settled orders owe and
// the alerts do not hold, as Judge words it; an order not settled owes
// nothing yet.
func TestMissingAlertsIsJudgesRule(t *testing.T) {
	t.Parallel()
	reg, err := registry.Default(8 * time.Second)
	require.NoError(t, err)
	running := refusedPayment("o-run")
	running.Steps[0].ProcessState, running.Steps[0].History = sas.Processing, running.Steps[0].History[:1]
	views := map[string]sas.OrderView{"o-1": refusedPayment("o-1"), "o-2": refusedPayment("o-2"), "o-run": running}
	alerts := []sas.Alert{{OrderID: "o-2", Step: 0, State: sas.Error, Attempts: 1}}
	missing := judge.MissingAlerts(views, alerts)
	require.Equal(t, []string{"o-1 step 0 entered Error at attempt 1: no alert"}, missing)
	got := judge.Judge(judge.Evidence{IDs: []string{"o-1", "o-2"}, Views: views, Registry: reg, Alerts: alerts,
		Calls: map[string][]remotesim.Call{"o-1:0": {{Key: "o-1:0", Fault: remotesim.FaultPermanent}}, "o-2:0": {{Key: "o-2:0", Fault: remotesim.FaultPermanent}}}},
		judge.JudgeRules{})
	require.Equal(t, missing, got.Alerts)
	require.Empty(t, judge.MissingAlerts(views, append(alerts, sas.Alert{OrderID: "o-1", Step: 0, State: sas.Error, Attempts: 1})))
}

// A failure's window passes over the waits before it: a request killed
// three times while it ran, whose pick-up was recorded late, is waited on
// once (no failure), then fails at its moved deadline; the kills explain
// that failure (issue 31's local run judged it "it waited").
func TestAFailureWindowPassesOverWaits(t *testing.T) {
	t.Parallel()
	v := givenUpPayment("o-w")
	h := v.Steps[0].History
	wait := sas.HistoryEntry{At: at(5), From: sas.Processing, To: sas.Processing, Attempt: 1, Actor: "supervisor-0"}
	v.Steps[0].History = append(append(append([]sas.HistoryEntry{}, h[:2]...), wait), h[2:]...)
	v.History = v.Steps[0].History
	harness := []judge.HarnessFault{
		{OrderID: "o-w", Step: 0, Attempt: 1, Kind: judge.FaultKilled, At: at(2)}, // before the wait
		{OrderID: "o-w", Step: 0, Attempt: 2, Kind: judge.FaultKilled, At: at(15)},
		{OrderID: "o-w", Step: 0, Attempt: 3, Kind: judge.FaultKilled, At: at(25)},
	}
	got := judgeOne(t, v, nil, harness)
	require.Empty(t, got.Defects, "the kill before the wait explains failure 1")
}
