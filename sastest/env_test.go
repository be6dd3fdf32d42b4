package sastest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/sastest"
	"github.com/sas-go/sas/workflow"
)

// trip is the workflow of these tests: a flight and a hotel, each undone if
// a later step fails for good, then the payment, the last step.
var trip = []workflow.Workflow{{Name: "trip", Steps: []workflow.Step{
	{Name: "flight", Agent: "airline", Action: "book", Undo: "cancel", Timeout: workflow.Duration(30 * time.Second)},
	{Name: "hotel", Agent: "hotels", Action: "book", Undo: "cancel", Timeout: workflow.Duration(30 * time.Second)},
	{Name: "pay", Agent: "payments", Action: "charge", Timeout: workflow.Duration(20 * time.Second)},
}}}

// ok is a step that succeeds with its name as the result.
func ok(_ context.Context, req agent.Request) (any, error) { return req.Step, nil }

func agents() []*agent.Agent {
	return []*agent.Agent{
		agent.New("airline").Step("flight", ok, ok),
		agent.New("hotels").Step("hotel", ok, ok),
		agent.New("payments").Step("pay", ok, nil),
	}
}

func newEnv(t *testing.T) *sastest.Env {
	t.Helper()
	return sastest.New(t, trip, agents()...)
}

// calls renders a result's calls for comparison ("flight#1", "flight#2
// undo", the error left out).
func calls(res sastest.Result) []string {
	var out []string
	for _, c := range res.Calls {
		c.Err = ""
		out = append(out, c.String())
	}
	return out
}

func TestHappyPath(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	res := env.Run("trip", "order-1", map[string]any{"traveller": "Ada"})

	require.Equal(t, sastest.StatusProcessed, res.Status)
	require.Equal(t, []sastest.Step{
		{Name: "flight", State: sastest.StateProcessed, Attempts: 1, Result: json.RawMessage(`"flight"`)},
		{Name: "hotel", State: sastest.StateProcessed, Attempts: 1, Result: json.RawMessage(`"hotel"`)},
		{Name: "pay", State: sastest.StateProcessed, Attempts: 1, Result: json.RawMessage(`"pay"`)},
	}, res.Steps)
	var flight string
	require.NoError(t, res.Decode("flight", &flight))
	require.Equal(t, "flight", flight)
	require.Equal(t, []string{"flight#1", "hotel#1", "pay#1"}, calls(res))
	require.Equal(t, []string{"received", "step-done/flight", "step-done/hotel", "step-done/pay", "processed"}, res.Statuses)
	require.Empty(t, res.Undone)
	require.Empty(t, res.Alerts)
}

// A refusal of the last step undoes the steps before it, newest first.
func TestPermanentFailureCompensatesNewestFirst(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.Fail("pay", 1, agent.Permanent(errors.New("card declined")))
	res := env.Run("trip", "order-1", nil)

	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Equal(t, []string{"hotel", "flight"}, res.Undone)
	pay, _ := res.Step("pay")
	require.Equal(t, sastest.StateError, pay.State)
	require.Equal(t, "card declined", pay.Reason)
	for _, name := range []string{"flight", "hotel"} {
		s, _ := res.Step(name)
		require.Equal(t, sastest.StateCompensated, s.State, name)
	}
	require.Equal(t, []string{"flight#1", "hotel#1", "pay#1", "hotel#1 undo", "flight#1 undo"}, calls(res))
	require.Equal(t, []string{"received", "step-done/flight", "step-done/hotel", "failed/pay", "compensated"}, res.Statuses)
}

// Only what was done or tried is undone: a refusal of the hotel undoes the
// hotel (a refusal is not proof of no effect: a duplicate delivery may
// have booked it; docs/protocol.md) and the flight, newest first, and the
// payment never runs.
func TestOnlyWhatWasDoneIsUndone(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.Fail("hotel", 1, agent.Permanent(errors.New("no rooms")))
	res := env.Run("trip", "order-1", nil)

	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Equal(t, []string{"hotel", "flight"}, res.Undone)
	pay, _ := res.Step("pay")
	require.Equal(t, sastest.StatePending, pay.State)
	require.Zero(t, pay.Attempts)
}

// A refusal of the first step undoes that step alone.
func TestFirstStepRefusedFails(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.Fail("flight", 1, agent.Permanent(errors.New("no seats")))
	res := env.Run("trip", "order-1", nil)

	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Equal(t, []string{"flight"}, res.Undone)
	require.Equal(t, []string{"flight#1", "flight#1 undo"}, calls(res))
	require.Equal(t, []string{"received", "failed/flight", "compensated"}, res.Statuses)
}

// A transient failure through a whole attempt goes the deployed way: the
// agent's in-process tries, redeliveries, the hand-back to the scheduler,
// the supervisor's wait and retry; the second attempt succeeds.
func TestTransientFailureIsRetriedAndSucceeds(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.Fail("hotel", 1, errors.New("connection reset"))
	res := env.Run("trip", "order-1", nil)

	require.Equal(t, sastest.StatusProcessed, res.Status)
	hotel, _ := res.Step("hotel")
	require.Equal(t, 2, hotel.Attempts)
	require.Equal(t, 1, hotel.Failures, "the failed attempt was counted")
	require.Empty(t, res.Undone)

	var first, second int
	for _, c := range res.Calls {
		switch {
		case c.Step == "hotel" && c.Attempt == 1:
			require.Equal(t, "connection reset", c.Err)
			first++
		case c.Step == "hotel" && c.Attempt == 2:
			require.Empty(t, c.Err)
			second++
		}
	}
	require.Equal(t, agent.DefaultTries, first, "tried in process, then reported failed: no redelivery")
	require.Equal(t, 1, second)
	require.Less(t, res.Took, 15*time.Second, "the next attempt came after the retry policy's interval, not a sweep")
}

// An undo refused for good leaves the step CompensationFailed and an
// operator alerted; the compensation stops there.
func TestUndoFailingPermanentlyIsCompensationFailed(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.Fail("pay", 1, agent.Permanent(errors.New("card declined")))
	env.FailUndo("hotel", 1, agent.Permanent(errors.New("the hotel's system refuses cancellations")))
	res := env.Run("trip", "order-1", nil)

	require.Equal(t, sastest.StatusCompensationFailed, res.Status)
	hotel, _ := res.Step("hotel")
	require.Equal(t, sastest.StateCompensationFailed, hotel.State)
	require.Empty(t, res.Undone)
	flight, _ := res.Step("flight")
	require.Equal(t, sastest.StateProcessed, flight.State, "the compensation stopped at the hotel")
	// Every step that needs a person is an alert: the refusal, and the
	// undo that failed.
	require.Equal(t, []string{
		"pay: Error: card declined",
		"hotel: CompensationFailed: the hotel's system refuses cancellations",
	}, res.Alerts)
}

// A transient undo failure is retried like a step's, and the compensation
// completes.
func TestUndoFailingTransientlyIsRetried(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	env.Fail("pay", 1, agent.Permanent(errors.New("card declined")))
	env.FailUndo("flight", 1, errors.New("airline down"))
	res := env.Run("trip", "order-1", nil)

	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Equal(t, []string{"hotel", "flight"}, res.Undone)
	require.Contains(t, calls(res), "flight#2 undo")
	require.Equal(t, []string{"pay: Error: card declined"}, res.Alerts)
}

// A failure injected at attempt 2 fires only when there is a second
// attempt.
func TestFailureAtASecondAttempt(t *testing.T) {
	t.Parallel()
	t.Run("no second attempt", func(t *testing.T) {
		t.Parallel()
		env := newEnv(t)
		env.Fail("hotel", 2, agent.Permanent(errors.New("no rooms")))
		res := env.Run("trip", "order-1", nil)
		require.Equal(t, sastest.StatusProcessed, res.Status)
		require.Equal(t, []string{"flight#1", "hotel#1", "pay#1"}, calls(res))
	})
	t.Run("a second attempt", func(t *testing.T) {
		t.Parallel()
		env := newEnv(t)
		env.Fail("hotel", 1, errors.New("timeout"))
		env.Fail("hotel", 2, agent.Permanent(errors.New("no rooms")))
		res := env.Run("trip", "order-1", nil)
		require.Equal(t, sastest.StatusCompensated, res.Status)
		require.Equal(t, []string{"hotel", "flight"}, res.Undone)
		hotel, _ := res.Step("hotel")
		require.Equal(t, sastest.StateCompensated, hotel.State)
		require.Equal(t, "no rooms", hotel.Reason)
		require.Equal(t, 2, hotel.Attempts)
	})
}

// The supervisor gives a step up at the deployment's failure threshold, and
// the order is compensated: the step given up too, since its effect may
// exist.
func TestMaxFailures(t *testing.T) {
	t.Parallel()
	env := sastest.NewWith(t, sastest.Options{MaxFailures: 1}, trip, agents()...)
	env.Fail("hotel", 1, errors.New("timeout"))
	res := env.Run("trip", "order-1", nil)

	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Equal(t, []string{"hotel", "flight"}, res.Undone)
	hotel, _ := res.Step("hotel")
	require.Equal(t, sastest.StateCompensated, hotel.State)
	require.Equal(t, 1, hotel.Attempts)
	require.Len(t, res.Alerts, 1, "a give-up is an operator alert")
	require.True(t, strings.HasPrefix(res.Alerts[0], "hotel: Error: "), res.Alerts[0])
}

// Orders run one after the other in one Env, and their results are their
// own; injected failures apply to every order.
func TestOrdersOneAfterTheOther(t *testing.T) {
	t.Parallel()
	env := newEnv(t)
	first := env.Run("trip", "order-1", nil)
	env.Fail("pay", 1, agent.Permanent(errors.New("card declined")))
	second := env.Run("trip", "order-2", nil)
	require.Equal(t, sastest.StatusProcessed, first.Status)
	require.Equal(t, sastest.StatusCompensated, second.Status)
	require.Len(t, second.Calls, 5)
}

// The kit refuses what a test gets wrong, with the reason.
func TestBadInputFailsTheTest(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		run  func(t testing.TB)
		want string
	}{
		"unknown step": {func(t testing.TB) { sastest.New(t, trip, agents()...).Fail("hotle", 1, errors.New("x")) },
			`Fail("hotle"): no workflow has a step of that name (steps: flight, hotel, pay)`},
		"undo of a step without one": {func(t testing.TB) { sastest.New(t, trip, agents()...).FailUndo("pay", 1, errors.New("x")) },
			`FailUndo("pay"): the step has no undo in its workflow`},
		"attempt 0": {func(t testing.TB) { sastest.New(t, trip, agents()...).Fail("hotel", 0, errors.New("x")) },
			"attempts count from 1"},
		"nil error": {func(t testing.TB) { sastest.New(t, trip, agents()...).Fail("hotel", 1, nil) },
			"the error is nil"},
		"unknown workflow": {func(t testing.TB) { sastest.New(t, trip, agents()...).Run("trips", "o-1", nil) },
			`Run("trips", "o-1"): no workflow of that name (workflows: trip)`},
		"payload not an object": {func(t testing.TB) { sastest.New(t, trip, agents()...).Run("trip", "o-1", []int{1}) },
			"the payload must encode as a JSON object"},
		"bad order id": {func(t testing.TB) { sastest.New(t, trip, agents()...).Run("trip", "o 1", nil) },
			"an order id is 1-128 characters"},
		"order id reused": {func(t testing.TB) {
			env := sastest.New(t, trip, agents()...)
			env.Run("trip", "o-1", nil)
			env.Run("trip", "o-1", nil)
		}, "already ran an order of that id"},
		"agent missing": {func(t testing.TB) { sastest.New(t, trip, agents()[:2]...) },
			`step "pay" of workflow "trip" names the agent "payments", which is not one of the agents given (airline, hotels)`},
		"invalid workflow": {func(t testing.TB) { sastest.New(t, []workflow.Workflow{{Name: "x"}}, agents()...) },
			"the workflows are not valid"},
		"bad agent": {func(t testing.TB) {
			sastest.New(t, trip, append(agents(), agent.New("cars").Step("car", nil, nil))...)
		}, `step "car": do is nil`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ft := &fatalRecorder{TB: t}
			func() {
				defer func() {
					if r := recover(); r != nil && r != errFatal {
						panic(r)
					}
				}()
				c.run(ft)
			}()
			require.True(t, ft.fataled, "the test must fail")
			require.Contains(t, ft.msg, c.want)
		})
	}
}

// An order that cannot settle within the bound fails the test, saying
// where its steps are.
func TestNeverSettlingFailsTheTest(t *testing.T) {
	t.Parallel()
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != errFatal {
				panic(r)
			}
		}()
		env := sastest.NewWith(ft, sastest.Options{Timeout: 2 * time.Second}, trip, agents()...)
		env.Fail("hotel", 1, errors.New("timeout"))
		env.Run("trip", "o-1", nil)
	}()
	require.True(t, ft.fataled)
	require.Contains(t, ft.msg, "did not settle within 2s of virtual time")
	// The second attempt waits out its retry interval.
	require.Contains(t, ft.msg, "hotel Processing (attempt 2")
}

// errFatal is what fatalRecorder panics with to stop the code under test.
var errFatal = errors.New("fatal")

// fatalRecorder is a testing.TB whose Fatalf records the message and
// stops the caller, without failing the real test.
type fatalRecorder struct {
	testing.TB
	fataled bool
	msg     string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.fataled = true
	f.msg = fmt.Sprintf(format, args...)
	panic(errFatal)
}

func (f *fatalRecorder) Helper() {}
