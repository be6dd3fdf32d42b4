package sasctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/memstore"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

var t0 = clocktest.T0

type fixture struct {
	app          *App
	out          *bytes.Buffer
	store        *memstore.Store
	queue        *memqueue.Queue
	intake, schq string
}

func setup(t *testing.T) fixture {
	t.Helper()
	ctx := context.Background()
	q := memqueue.New(memqueue.Options{Clock: clocktest.New(t0)})
	in, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: "intake"})
	require.NoError(t, err)
	sq, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: "scheduler"})
	require.NoError(t, err)
	out := &bytes.Buffer{}
	st := memstore.New(memstore.Config{Shards: 4})
	return fixture{app: &App{Store: st, Queue: q, Clock: clocktest.New(t0.Add(time.Hour)), IntakeQueueURL: in.URL, ControlQueueURL: sq.URL,
		Actor: "operator:test", Out: out}, out: out, store: st, queue: q, intake: in.URL, schq: sq.URL}
}

func (f fixture) receive(t *testing.T, url string) []string {
	t.Helper()
	msgs, err := f.queue.Receive(context.Background(), sas.ReceiveParams{QueueURL: url, Max: 10})
	require.NoError(t, err)
	var bodies []string
	for _, m := range msgs {
		bodies = append(bodies, m.Body)
	}
	return bodies
}

// failedOrder makes an order whose only step went to Error.
func (f fixture) failedOrder(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: id, Workflow: "payment", Steps: []string{"charge"}}, Now: t0, PickupBy: t0.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(30 * time.Second)}})
	require.NoError(t, err)
	_, err = f.store.Fail(ctx, sas.FailParams{Key: sas.StepKey{OrderID: id}, Owner: "s", Attempt: 1, Now: t0.Add(time.Second), Reason: "card declined (402)"})
	require.NoError(t, err)
}

func TestSubmitSendsAValidIntake(t *testing.T) {
	t.Parallel()
	f := setup(t)
	require.NoError(t, f.app.Run(context.Background(), []string{"submit", "-order", "o-1", "-workflow", "payment", "-payload", `{"amount":5}`}))
	bodies := f.receive(t, f.intake)
	require.Len(t, bodies, 1)
	in, err := sas.ParseIntake([]byte(bodies[0]), sas.IntakeRules{})
	require.NoError(t, err)
	require.Equal(t, "o-1", in.OrderID)
	err = f.app.Run(context.Background(), []string{"submit", "-order", "bad id", "-workflow", "payment"})
	require.ErrorIs(t, err, sas.ErrInvalid, "an operator's typo is caught before sending")
	require.Empty(t, f.receive(t, f.intake))
}

func TestSubmitStartAt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	require.NoError(t, f.app.Run(ctx, []string{"submit", "-order", "o-1", "-workflow", "payment", "-start-at", "72h"}))
	require.NoError(t, f.app.Run(ctx, []string{"submit", "-order", "o-2", "-workflow", "payment", "-start-at", "2031-03-01T09:00:00+01:00"}))
	bodies := f.receive(t, f.intake)
	require.Len(t, bodies, 2)
	var got []time.Time
	for _, b := range bodies {
		in, err := sas.ParseIntake([]byte(b), sas.IntakeRules{})
		require.NoError(t, err)
		require.NotNil(t, in.StartAt)
		got = append(got, in.StartAt.UTC())
	}
	require.ElementsMatch(t, []time.Time{t0.Add(time.Hour + 72*time.Hour), time.Date(2031, 3, 1, 8, 0, 0, 0, time.UTC)}, got)
	require.Contains(t, f.out.String(), "to start at")
	err := f.app.Run(ctx, []string{"submit", "-order", "o-3", "-workflow", "payment", "-start-at", "next tuesday"})
	require.ErrorContains(t, err, "neither a time in RFC 3339 nor a positive duration")
	require.Empty(t, f.receive(t, f.intake))
}

func TestShowAndList(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.failedOrder(t, "o-2")
	require.NoError(t, f.app.Run(context.Background(), []string{"show", "o-2"}))
	require.Contains(t, f.out.String(), "state Error")
	require.Contains(t, f.out.String(), "card declined (402)")
	require.Contains(t, f.out.String(), "Processing -> Error")
	f.out.Reset()
	require.NoError(t, f.app.Run(context.Background(), []string{"show", "o-2", "-json"}))
	var v sas.OrderView
	require.NoError(t, json.Unmarshal(f.out.Bytes(), &v))
	require.Equal(t, sas.Error, v.Steps[0].ProcessState)
	f.out.Reset()
	require.NoError(t, f.app.Run(context.Background(), []string{"list", "Error"}))
	require.Contains(t, f.out.String(), "o-2")
	require.Contains(t, f.out.String(), "1 Error step(s)")
	require.ErrorIs(t, f.app.Run(context.Background(), []string{"show", "nope"}), sas.ErrNotFound)
	require.ErrorIs(t, f.app.Run(context.Background(), []string{"list", "Done"}), sas.ErrInvalid)
	require.ErrorIs(t, f.app.Run(context.Background(), []string{"frobnicate"}), ErrUsage)
}

func TestResubmitOneAndBulk(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, id := range []string{"o-a", "o-b", "o-c"} {
		f.failedOrder(t, id)
	}
	ctx := context.Background()
	require.NoError(t, f.app.Run(ctx, []string{"resubmit", "-all", "-dry-run"}))
	require.Contains(t, f.out.String(), "would resubmit (dry run) 3 step(s)")
	require.Contains(t, f.out.String(), "runs under a new key, o-a:0:g1, after it was refused under o-a:0; a refusal is not proof of no effect",
		"the dry run names the refused key a twin's effect may exist under (issue 29, N4)")
	require.Empty(t, f.receive(t, f.schq), "a dry run sends nothing")
	l, err := f.store.ListByState(ctx, sas.ListByStateParams{State: sas.Error})
	require.NoError(t, err)
	require.Len(t, l.Records, 3, "and changes nothing")

	require.NoError(t, f.app.Run(ctx, []string{"resubmit", "o-a"}))
	v, err := f.store.GetOrder(ctx, "o-a")
	require.NoError(t, err)
	require.Equal(t, sas.Pending, v.Steps[0].ProcessState)
	require.Equal(t, "operator:test", v.History[len(v.History)-1].Actor)
	bodies := f.receive(t, f.schq)
	require.Len(t, bodies, 1)
	var r sas.Retry
	require.NoError(t, json.Unmarshal([]byte(bodies[0]), &r))
	require.Equal(t, sas.Retry{V: 1, Kind: sas.KindRetry, OrderID: "o-a", Step: 0, Attempt: 2, Reason: "resubmitted by operator:test"}, r, "a resubmit moves the attempt on")
	require.ErrorIs(t, f.app.Run(ctx, []string{"resubmit", "o-a"}), sas.ErrNotFound, "nothing left in Error")

	f.out.Reset()
	require.NoError(t, f.app.Run(ctx, []string{"resubmit", "-all"}))
	require.Contains(t, f.out.String(), "resubmitted 2 step(s), 0 failed")
	require.Len(t, f.receive(t, f.schq), 2)
}

func TestCompensateAndWatch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.failedOrder(t, "o-x")
	ctx := context.Background()
	require.NoError(t, f.app.Run(ctx, []string{"compensate", "o-x", "-reason", "customer cancelled"}))
	bodies := f.receive(t, f.schq)
	require.Len(t, bodies, 1)
	require.JSONEq(t, `{"v":1,"kind":"compensate","orderId":"o-x","reason":"customer cancelled","actor":"operator:test"}`, bodies[0])
	require.ErrorIs(t, f.app.Run(ctx, []string{"compensate", "o-missing"}), sas.ErrNotFound)

	// A stuck step shows up as overdue in the live view.
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-stuck", Workflow: "payment", Steps: []string{"charge"}}, Now: t0, PickupBy: t0.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(30 * time.Second)}})
	require.NoError(t, err)
	f.out.Reset()
	slept := 0
	f.app.Sleep = func(context.Context, time.Duration) error { slept++; return nil }
	require.NoError(t, f.app.Run(ctx, []string{"watch", "-count", "2"}))
	require.Equal(t, 1, slept)
	require.Contains(t, f.out.String(), "Processing 1")
	require.Contains(t, f.out.String(), "Error 1")
	require.Contains(t, f.out.String(), "overdue 1  oldest stuck 59m30s")
}

// compensatedOrder makes a two-step order whose second step failed and whose
// first step's undo is running: its Error step must never be resubmitted.
func (f fixture) compensatingOrder(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: id, Workflow: "order", Steps: []string{"charge", "ship"}}, Now: t0, PickupBy: t0.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(30 * time.Second)}})
	require.NoError(t, err)
	_, err = f.store.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: id}, Owner: "s", Attempt: 1, Now: t0.Add(time.Second),
		Next: &sas.ClaimParams{Key: sas.StepKey{OrderID: id, Step: 1}, Owner: "s", Now: t0.Add(time.Second), CompleteBy: t0.Add(30 * time.Second)}})
	require.NoError(t, err)
	_, err = f.store.Fail(ctx, sas.FailParams{Key: sas.StepKey{OrderID: id, Step: 1}, Owner: "s", Attempt: 1, Now: t0.Add(2 * time.Second), Reason: "address invalid"})
	require.NoError(t, err)
	_, err = f.store.Claim(ctx, sas.ClaimParams{Key: sas.StepKey{OrderID: id}, From: sas.Processed, Attempt: 1, Owner: "s", Now: t0.Add(3 * time.Second), CompleteBy: t0.Add(time.Minute)})
	require.NoError(t, err)
}

func TestResubmitRefusesACompensatedOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.failedOrder(t, "o-ok")
	f.compensatingOrder(t, "o-undo")
	ctx := context.Background()
	require.NoError(t, f.app.Run(ctx, []string{"resubmit", "-all", "-dry-run"}))
	out := f.out.String()
	require.Contains(t, out, "would resubmit o-ok step 0")
	require.Contains(t, out, "would refuse o-undo step 1")
	require.Contains(t, out, "being or has been compensated")
	require.Contains(t, out, "would resubmit (dry run) 1 step(s)")

	f.out.Reset()
	err := f.app.Run(ctx, []string{"resubmit", "-all"})
	require.Error(t, err)
	require.Contains(t, f.out.String(), "REFUSED o-undo step 1")
	require.Contains(t, f.out.String(), "resubmitted 1 step(s), 0 failed, 1 refused")
	require.Len(t, f.receive(t, f.schq), 1, "only the step that may go round again")
	v, err := f.store.GetOrder(ctx, "o-undo")
	require.NoError(t, err)
	require.Equal(t, sas.Error, v.Steps[1].ProcessState)
	require.ErrorIs(t, f.app.Run(ctx, []string{"resubmit", "o-undo"}), sas.ErrInvalid)
}

func TestPauseAndResume(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	require.NoError(t, f.app.Run(ctx, []string{"pause", "payments"}))
	require.Contains(t, f.out.String(), "payments paused since")
	all, err := f.store.AgentPauses(ctx)
	require.NoError(t, err)
	require.True(t, all.Paused("payments"))

	f.out.Reset()
	require.NoError(t, f.app.Run(ctx, []string{"resume", "payments"}))
	require.Contains(t, f.out.String(), "payments running (paused")
	f.out.Reset()
	require.NoError(t, f.app.Run(ctx, []string{"pauses"}))
	require.Contains(t, f.out.String(), "payments running")
	require.ErrorIs(t, f.app.Run(ctx, []string{"pause"}), ErrUsage)
	require.ErrorIs(t, f.app.Run(ctx, []string{"pause", "no such/agent"}), sas.ErrInvalid)
}

// show prints what each step returned, and marks a rejected step and its
// order: a business outcome, not an incident.
func TestShowResultsAndARejection(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-r", Workflow: "order", Steps: []string{"reserve", "charge", "ship"}},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(30 * time.Second)}})
	require.NoError(t, err)
	_, err = f.store.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-r"}, Owner: "s", Attempt: 1, Now: t0.Add(time.Second),
		Result: json.RawMessage(`{"reservation":"R-42"}`),
		Next:   &sas.ClaimParams{Key: sas.StepKey{OrderID: "o-r", Step: 1}, Owner: "s", Now: t0.Add(time.Second), CompleteBy: t0.Add(time.Minute)}})
	require.NoError(t, err)
	_, err = f.store.Fail(ctx, sas.FailParams{Key: sas.StepKey{OrderID: "o-r", Step: 1}, Owner: "s", Attempt: 1, Now: t0.Add(2 * time.Second),
		Reason: "card declined", Rejected: true})
	require.NoError(t, err)
	require.NoError(t, f.app.Run(ctx, []string{"show", "o-r"}))
	out := f.out.String()
	require.Contains(t, out, "state Rejected")
	require.Contains(t, out, "Error (rejected)")
	require.Contains(t, out, "results:\n  reserve\t{\"reservation\":\"R-42\"}")
}

// An order with branches shows each step's state beside the steps it
// follows; a straight line shows no such column.
func TestShowBranches(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-b", Workflow: "trip", Steps: []string{"quote", "flight", "hotel", "pay"},
		After: [][]int{{}, {0}, {0}, {1, 2}}},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(30 * time.Second)}})
	require.NoError(t, err)
	next := func(step int) sas.ClaimParams {
		return sas.ClaimParams{Key: sas.StepKey{OrderID: "o-b", Step: step}, Owner: "s", Now: t0.Add(time.Second), CompleteBy: t0.Add(time.Minute)}
	}
	n1 := next(1)
	_, err = f.store.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-b"}, Owner: "s", Attempt: 1, Now: t0.Add(time.Second),
		Next: &n1, More: []sas.ClaimParams{next(2)}})
	require.NoError(t, err)
	require.NoError(t, f.app.Run(ctx, []string{"show", "o-b"}))
	out := f.out.String()
	require.Regexp(t, `STEP\s+NAME\s+AFTER\s+STATE`, out)
	require.Regexp(t, `1\s+flight\s+quote\s+Processing`, out)
	require.Regexp(t, `2\s+hotel\s+quote\s+Processing`, out)
	require.Regexp(t, `3\s+pay\s+flight,hotel\s+Pending`, out)
	require.Regexp(t, `0\s+quote\s+-\s+Processed`, out)
}

// A skipped step shows as Skipped with its condition, and its order as
// Processed.
func TestShowASkippedStep(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-s", Workflow: "trip", Steps: []string{"flight", "car"}},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(30 * time.Second)}})
	require.NoError(t, err)
	_, err = f.store.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-s"}, Owner: "s", Attempt: 1, Now: t0.Add(time.Second),
		Skip: []sas.Skip{{Step: 1, Reason: "skipped: its condition payload.needsCar is false"}}})
	require.NoError(t, err)
	require.NoError(t, f.app.Run(ctx, []string{"show", "o-s"}))
	out := f.out.String()
	require.Contains(t, out, "state Processed")
	require.Regexp(t, `1\s+car\s+Skipped\s+0\s+0\s+-\s+-\s+skipped: its condition payload.needsCar is false`, out)
}

// A fan-out step shows how many of its elements are done of how many, how
// many are in each state, and each element started: its item, its result.
func TestShowAFanOutsElements(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	k := sas.StepKey{OrderID: "o-f"}
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-f", Workflow: "stock", Steps: []string{"reserve"}},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(30 * time.Second)}})
	require.NoError(t, err)
	claim := func(i int) sas.ElementClaim {
		return sas.ElementClaim{Index: i, Item: json.RawMessage(fmt.Sprintf(`{"sku":"s-%d"}`, i)), CompleteBy: t0.Add(time.Minute)}
	}
	_, err = f.store.StartFanOut(ctx, sas.StartFanOutParams{Key: k, Owner: "s", Attempt: 1, Now: t0, Count: 3,
		Claims: []sas.ElementClaim{claim(0), claim(1)}, StepName: "reserve"})
	require.NoError(t, err)
	next := claim(2)
	_, err = f.store.CompleteElement(ctx, sas.CompleteElementParams{Key: sas.StepKey{OrderID: "o-f", Step: sas.ElementStep(0, 0)}, Owner: "s",
		Attempt: 1, Now: t0.Add(time.Second), Result: json.RawMessage(`{"hold":"H-0"}`), Next: &next, StepName: "reserve"})
	require.NoError(t, err)

	require.NoError(t, f.app.Run(ctx, []string{"show", "o-f"}))
	out := f.out.String()
	require.Contains(t, out, "elements of reserve: 1/3 done (Processing 2, Processed 1)")
	require.Regexp(t, `0\s+Processed\s+1\s+-\s+\{"sku":"s-0"\}\s+\{"hold":"H-0"\}`, out)
	require.Regexp(t, `1\s+Processing\s+1\s+08:01:00 \(59m0s ago, expired\)\s+\{"sku":"s-1"\}\s+-`, out)
	require.Regexp(t, `2\s+Processing\s+1\s+`, out)
}

// show reads the order's state with its stored definition: a first step
// without an undo before a failed step that was undone is Compensated, not
// Processing for good.
func TestShowKnowsAStepWithoutAnUndo(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	def := sas.Workflow{Name: "notify-pay", Steps: []sas.StepDef{
		{Name: "notify", Agent: "mail", Action: "send", Timeout: time.Minute},
		{Name: "charge", Agent: "payments", Action: "charge", Undo: "refund", Timeout: time.Minute},
	}}
	require.NoError(t, f.store.PutDefinition(ctx, def))
	id := "o-noundo"
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: id, Workflow: def.Name, Version: def.Version(), Steps: def.StepNames()},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", Now: t0, CompleteBy: t0.Add(time.Minute)}})
	require.NoError(t, err)
	k1 := sas.StepKey{OrderID: id, Step: 1}
	_, err = f.store.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: id}, Owner: "s", Attempt: 1, Now: t0.Add(time.Second),
		Next: &sas.ClaimParams{Key: k1, Owner: "s", Now: t0.Add(time.Second), CompleteBy: t0.Add(time.Minute)}})
	require.NoError(t, err)
	_, err = f.store.Fail(ctx, sas.FailParams{Key: k1, Owner: "s", Attempt: 1, Now: t0.Add(2 * time.Second), Reason: "card declined"})
	require.NoError(t, err)
	_, err = f.store.Claim(ctx, sas.ClaimParams{Key: k1, From: sas.Error, Attempt: 1, Owner: "s", Now: t0.Add(3 * time.Second), CompleteBy: t0.Add(time.Minute)})
	require.NoError(t, err)
	_, err = f.store.Complete(ctx, sas.CompleteParams{Key: k1, Owner: "s", Attempt: 2, Now: t0.Add(4 * time.Second), Compensation: true})
	require.NoError(t, err)
	require.NoError(t, f.app.Run(ctx, []string{"show", id}))
	require.Contains(t, f.out.String(), "state Compensated")
}
