package agenthost_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// These tests run the agent as deployed (internal/assembly, the default
// registry, httpcall) against the remote simulator on 127.0.0.1.

func TestSuccessRepliesDoneWithOneEffect(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	req := request("order-1")

	resp := r.handle(event(req))
	require.Empty(t, resp.BatchItemFailures)

	reps := r.replies()
	require.Len(t, reps, 1)
	requireEcho(t, req, reps[0])
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	require.Empty(t, reps[0].Reason)
	require.Equal(t, "captured", resultField(t, reps[0], "status"))
	require.Equal(t, "order-1", resultField(t, reps[0], "orderId"))

	effects := r.effectsFor("order-1:0")
	require.Len(t, effects, 1)
	require.Equal(t, "/payments", effects[0].Path)
	require.JSONEq(t, `{"amount":1250,"currency":"EUR","orderId":"order-1","step":"charge"}`, string(effects[0].Body))
	require.Equal(t, effects[0].ID, resultField(t, reps[0], "effectId"))
}

func TestTransientErrorsThenSuccess(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{faults: script("order-2:0",
		remotesim.ScriptStep{Fault: remotesim.FaultTransient, Times: 2},
	)})
	req := request("order-2")

	resp := r.handle(event(req))
	require.Empty(t, resp.BatchItemFailures)

	reps := r.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	require.Len(t, r.effectsFor("order-2:0"), 1)
	st := r.sim.Stats()
	require.EqualValues(t, 2, st.Transient)
	require.EqualValues(t, 3, st.Calls)
}

func TestPermanentFailureRepliesFailedWithReason(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{faults: script("order-3:0",
		remotesim.ScriptStep{Fault: remotesim.FaultPermanent, Status: 402},
	)})
	req := request("order-3", func(q *sas.AgentRequest) { q.Attempt, q.LockedBy = 2, "scheduler-b" })

	resp := r.handle(event(req))
	require.Empty(t, resp.BatchItemFailures)

	reps := r.replies()
	require.Len(t, reps, 1)
	requireEcho(t, req, reps[0])
	require.Equal(t, sas.OutcomeFailed, reps[0].Outcome)
	require.Empty(t, reps[0].Result)
	// Readable: who, what, and the service's own words.
	require.Equal(t, "payments POST /payments answered HTTP 402 Payment Required: payment_declined: simulated permanent failure of /payments", reps[0].Reason)
	require.Empty(t, r.sim.Ledger().Effects)
	require.EqualValues(t, 1, r.sim.Stats().Calls, "a permanent answer is not retried")
}

func TestHangSendsNothingAndLeavesForRedelivery(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{
		faults: script("order-4:0", remotesim.ScriptStep{Fault: remotesim.FaultHang}),
		// Each try gives up after 50ms of real time; the fake clock moves
		// only through the backoff sleeps.
		client: agent.HTTPConfig{AttemptTimeout: 50 * time.Millisecond, Tries: 3},
	})

	resp := r.handle(event(request("order-4")))
	require.Equal(t, []string{"m1"}, failedIDs(resp), "a step that ran out of tries is left for redelivery")
	require.Empty(t, r.replies(), "no reply")
	require.Empty(t, r.sim.Ledger().Effects)
	require.EqualValues(t, 3, r.sim.Stats().Hangs)
	require.Contains(t, r.logs.String(), `"why":"failed"`, "an unnamed failure")
	require.Contains(t, r.logs.String(), "transient failure", "the HTTP caller's error, logged")
}

func TestHangUntilDeadlineSendsNothing(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{
		faults: script("order-4b:0", remotesim.ScriptStep{Fault: remotesim.FaultHang}),
	})
	// The agent's deadline is the step's limit from when it starts, not the
	// lease (here long gone): 1s margin (the caller's default) leaves 200ms
	// of the 1.2s for the one try.
	resp := r.handle(event(request("order-4b", completeBy(clocktest.T0.Add(-time.Minute)), timeout(1200*time.Millisecond))))
	require.Equal(t, []string{"m1"}, failedIDs(resp), "no outcome: left for redelivery")
	require.Empty(t, r.replies())
	require.EqualValues(t, 1, r.sim.Stats().Hangs, "one try, cut at the agent's deadline less the margin")
	require.Contains(t, r.logs.String(), "deadline reached")
}

func TestLostResponseAfterEffectIsReplayed(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{faults: script("order-5:0",
		remotesim.ScriptStep{Fault: remotesim.FaultLost, Times: 1, Mode: remotesim.LostDrop},
	)})

	resp := r.handle(event(request("order-5")))
	require.Empty(t, resp.BatchItemFailures)

	reps := r.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	effects := r.effectsFor("order-5:0")
	require.Len(t, effects, 1, "the retry must not charge again")
	require.Equal(t, effects[0].ID, resultField(t, reps[0], "effectId"), "the reply carries the stored response")
	st := r.sim.Stats()
	require.EqualValues(t, 1, st.Lost)
	require.EqualValues(t, 1, st.Replays)
}

func TestDuplicateDeliveryInOneBatchHasOneEffect(t *testing.T) {
	t.Parallel()
	// Processing time holds the key long enough that two concurrent calls
	// would collide on it.
	r := newRig(t, rigOptions{faults: remotesim.Faults{Profile: remotesim.Profile{LatencyBase: 20 * time.Millisecond}}})
	req := request("order-6")

	resp := r.handle(event(req, req))
	require.Empty(t, resp.BatchItemFailures)

	reps := r.replies()
	require.LessOrEqual(t, len(reps), 2)
	require.NotEmpty(t, reps)
	for _, rep := range reps {
		require.Equal(t, sas.OutcomeDone, rep.Outcome)
		require.JSONEq(t, string(reps[0].Result), string(rep.Result), "both replies report the same effect")
	}
	require.Len(t, r.effectsFor("order-6:0"), 1)
	require.Empty(t, r.sim.Ledger().Duplicates)
	require.Zero(t, r.sim.Stats().Busy, "same-key requests of a batch run one after the other")
}

func TestDuplicateDeliveryAcrossInvocationsHasOneEffect(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	req := request("order-7")

	r.handle(event(req))
	// Redelivered later, to another instance, under a new attempt of the
	// same step (the supervisor re-drove it): same key, same body.
	again := req
	again.Attempt, again.LockedBy = 2, "scheduler-b"
	r.fake.Advance(time.Second)
	handleWith(t, r.newService(), event(again))

	reps := r.replies()
	require.Len(t, reps, 2)
	requireEcho(t, req, reps[0])
	requireEcho(t, again, reps[1])
	require.JSONEq(t, string(reps[0].Result), string(reps[1].Result))
	require.Len(t, r.effectsFor("order-7:0"), 1)
	require.EqualValues(t, 1, r.sim.Stats().Replays)
}

// Two instances get the same request at once: the second finds the key in
// use (409) while the first is being processed, waits, and gets the stored
// answer. Real time: the simulator's processing takes real time.
func TestConcurrentDuplicateWaitsForBusyKey(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{
		realClock: true,
		faults:    remotesim.Faults{Profile: remotesim.Profile{LatencyBase: 300 * time.Millisecond}},
	})
	req := request("order-8", completeBy(time.Now().Add(20*time.Second)))

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		handleWith(t, r.svc, event(req))
	}()
	require.Eventually(t, func() bool {
		for _, k := range r.sim.Ledger().Keys {
			if k.Key == "order-8:0" && k.State == "inFlight" {
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond, "the first call never reached the simulator")
	resp := handleWith(t, r.newService(), event(req))
	wg.Wait()

	require.Empty(t, resp.BatchItemFailures)
	reps := r.replies()
	require.Len(t, reps, 2)
	for _, rep := range reps {
		require.Equal(t, sas.OutcomeDone, rep.Outcome, "a busy key is not a failure: %s", rep.Reason)
	}
	require.Len(t, r.effectsFor("order-8:0"), 1)
	require.GreaterOrEqual(t, r.sim.Stats().Busy, int64(1), "the second call should have met the key in use")
}

func TestCompensationCallsUndoWithItsOwnKey(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	fwd := request("order-9")
	undo := request("order-9", compensation, func(q *sas.AgentRequest) { q.Attempt = 2 })

	r.handle(event(fwd))
	r.handle(event(undo))

	reps := r.replies()
	require.Len(t, reps, 2)
	require.Equal(t, sas.OutcomeDone, reps[1].Outcome)
	require.Equal(t, "refunded", resultField(t, reps[1], "status"))

	charge, refund := r.effectsFor("order-9:0"), r.effectsFor("order-9:0:undo")
	require.Len(t, charge, 1)
	require.Len(t, refund, 1)
	require.Equal(t, "/payments", charge[0].Path)
	require.Equal(t, "/refunds", refund[0].Path)
	require.JSONEq(t, `{"amount":1250,"currency":"EUR","orderId":"order-9","step":"charge"}`, string(refund[0].Body))
}

func TestCompensationOfStepWithoutUndoIsDoneWithoutACall(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	// "ship" (order workflow, step 2) has no Undo.
	req := request("order-10", compensation, func(q *sas.AgentRequest) {
		q.Step, q.StepName = 2, "ship"
		q.IdempotencyKey = sas.IdempotencyKey(q.OrderID, 2, 0, true)
	})

	r.handle(event(req))
	reps := r.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	require.Empty(t, reps[0].Result)
	require.Zero(t, r.sim.Stats().Calls)
}

func TestOrderWorkflowStepsUseTheirActions(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	reserve := request("order-11", func(q *sas.AgentRequest) { q.StepName = "reserve" })
	ship := request("order-11", func(q *sas.AgentRequest) {
		q.Step, q.StepName, q.IdempotencyKey = 2, "ship", sas.IdempotencyKey("order-11", 2, 0, false)
	})

	resp := r.handle(event(reserve, ship))
	require.Empty(t, resp.BatchItemFailures)
	require.Len(t, r.replies(), 2)
	require.Equal(t, "/reservations", r.effectsFor("order-11:0")[0].Path)
	require.Equal(t, "/shipments", r.effectsFor("order-11:2")[0].Path)
}

func TestCircuitOpenMakesNoCallAndNoReply(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{
		faults: remotesim.Faults{Scripts: []remotesim.Script{
			{OrderID: "order-12a", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultTransient}}},
		}},
		client: agent.HTTPConfig{Tries: 2, Breaker: agent.BreakerConfig{FailureThreshold: 2, OpenFor: time.Minute}},
	})

	// Two 503s in a row open the breaker; the step runs out of tries.
	resp := r.handle(event(request("order-12a")))
	require.Equal(t, []string{"m1"}, failedIDs(resp), "out of tries: left for redelivery")
	require.True(t, r.client.CircuitOpen(r.simURL))
	callsBefore := r.sim.Stats().Calls

	// The next step is refused by the open breaker: the agent gives up
	// without calling. This scheduler takes no transient outcome (it is
	// older), so the request is left for redelivery.
	resp = r.handle(event(request("order-12b")))
	require.Equal(t, []string{"m1"}, failedIDs(resp), "left for redelivery, for when the circuit closes")
	require.Empty(t, r.replies(), "no reply for either")
	require.Equal(t, callsBefore, r.sim.Stats().Calls, "no call while the circuit is open")
	require.Contains(t, r.logs.String(), "circuit open")
}

// Issue 19, the built-in HTTP agent: an open breaker is a failed try, not a
// wait. Against a remote that is down, the first request makes its tries,
// which open the breaker, and reports its attempt failed; the next ones make
// no call and report theirs failed at once (CircuitOpen), without sleeping
// out the breaker's cool-down, though their deadline leaves time for it.
func TestCircuitOpenReportsTheAttemptFailedAtOnce(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	r := newRig(t, rigOptions{
		remote: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			calls.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
		}),
		client: agent.HTTPConfig{Tries: 3, Breaker: agent.BreakerConfig{FailureThreshold: 3, OpenFor: time.Minute}},
	})
	reportsTransient := func(q *sas.AgentRequest) { q.TransientOutcome = true }
	long := timeout(10 * time.Minute) // the cool-down fits many times

	start := r.fake.Now()
	resp := r.handle(event(request("order-12c", long, completeBy(clocktest.T0.Add(10*time.Minute)), reportsTransient)))
	require.Empty(t, resp.BatchItemFailures, "acknowledged: the failure is reported")
	reps := r.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeTransient, reps[0].Outcome)
	require.Equal(t, sas.ErrorCircuitOpen, reps[0].ErrorType, "its tries opened the breaker, which refused the next")
	require.EqualValues(t, 3, calls.Load(), "the tries the threshold takes")
	require.True(t, r.client.CircuitOpen(r.simURL))
	afterFirst := r.fake.Now()
	require.Less(t, afterFirst.Sub(start), time.Second, "only the backoffs between its tries")

	for _, id := range []string{"order-12d", "order-12e"} {
		resp = r.handle(event(request(id, long, completeBy(clocktest.T0.Add(10*time.Minute)), reportsTransient)))
		require.Empty(t, resp.BatchItemFailures)
		reps = r.replies()
		require.Len(t, reps, 1)
		require.Equal(t, sas.OutcomeTransient, reps[0].Outcome, id)
		require.Equal(t, sas.ErrorCircuitOpen, reps[0].ErrorType, id)
		require.Contains(t, reps[0].Reason, "circuit open")
	}
	require.EqualValues(t, 3, calls.Load(), "no call while the breaker is open")
	require.Equal(t, afterFirst, r.fake.Now(), "no wait for the breaker to half-open")
}

// An older scheduler's request (no TimeoutMs) whose CompleteBy has passed
// is its deadline: nothing can serve it.
func TestExpiredOnArrivalMakesNoCall(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	resp := r.handle(event(
		request("order-13", legacy, completeBy(clocktest.T0.Add(-time.Second))),
		request("order-14", legacy, completeBy(clocktest.T0)), // due exactly now: expired too
	))
	require.Empty(t, resp.BatchItemFailures, "acknowledged: nothing can serve them")
	require.Empty(t, r.replies())
	require.Zero(t, r.sim.Stats().Calls)
	require.Contains(t, r.logs.String(), "expired on arrival")
}

func TestMalformedMessageIsRejectedAlone(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	noLock := request("order-16")
	noLock.LockedBy = ""
	resp := r.handle(event(
		request("order-15"),
		"{not json",
		`{"v":1,"kind":"agent.reply","orderId":"order-x"}`,
		noLock,
		request("order-17"),
	))
	require.Empty(t, resp.BatchItemFailures, "a poison message is acknowledged, never retried")

	reps := r.replies()
	require.Len(t, reps, 2)
	got := []string{reps[0].OrderID, reps[1].OrderID}
	require.ElementsMatch(t, []string{"order-15", "order-17"}, got)

	logs := r.logs.String()
	require.Equal(t, 3, strings.Count(logs, "malformed request"), logs)
	require.Contains(t, logs, "not valid JSON")
	require.Contains(t, logs, `\"agent.reply\" is not \"agent.request\"`)
	require.Contains(t, logs, "invalid lockedBy")
}

func TestReplySendFailureFailsOnlyThatMessage(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	broken := true
	r := newRig(t, rigOptions{sendFault: func(_ string, m sas.OutboundMessage) *sas.SendFailure {
		mu.Lock()
		defer mu.Unlock()
		if broken && strings.Contains(m.Body, `"orderId":"order-19"`) {
			return &sas.SendFailure{Code: "InternalError", Message: "simulated"}
		}
		return nil
	}})
	ev := event(request("order-18"), request("order-19"), request("order-20"))

	resp := r.handle(ev)
	require.Equal(t, []string{"m2"}, failedIDs(resp))
	require.Len(t, r.replies(), 2)

	// SQS redelivers m2; the call repeats under the same key: a replay.
	mu.Lock()
	broken = false
	mu.Unlock()
	resp = r.handle(event(request("order-19")))
	require.Empty(t, resp.BatchItemFailures)
	reps := r.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	require.Len(t, r.effectsFor("order-19:0"), 1)
}

func TestUnknownAgentOrStepRepliesFailed(t *testing.T) {
	t.Parallel()
	r := newRig(t, rigOptions{})
	resp := r.handle(event(
		request("order-21", func(q *sas.AgentRequest) { q.Agent = "inventory" }),
		request("order-22", func(q *sas.AgentRequest) { q.StepName = "gift-wrap" }),
	))
	require.Empty(t, resp.BatchItemFailures)

	reps := r.replies()
	require.Len(t, reps, 2)
	reasons := map[string]string{}
	for _, rep := range reps {
		require.Equal(t, sas.OutcomeFailed, rep.Outcome)
		reasons[rep.OrderID] = rep.Reason
		require.Equal(t, "payment", rep.Workflow, "a failed reply echoes the order too")
		require.JSONEq(t, `{"amount":1250,"currency":"EUR"}`, string(rep.Payload))
	}
	require.Equal(t, `no agent "inventory" in this deployment (it hosts: payments)`, reasons["order-21"])
	require.Equal(t, `agent "payments" has no action for step "gift-wrap" (it serves: charge, reserve, ship)`, reasons["order-22"])
	require.Zero(t, r.sim.Stats().Calls)
}

// The runtime rests a request refused by an open breaker for as long as the
// breakers rest by default, whichever client refused it; it reads the
// error's kind, not the client's errors.
func TestCircuitOpenBackoffIsTheBreakersRest(t *testing.T) {
	t.Parallel()
	require.Equal(t, httpcall.DefaultOpenFor, agenthost.CircuitOpenBackoff)
	require.Equal(t, agent.DefaultBreakerOpenFor, agenthost.CircuitOpenBackoff)
	require.Equal(t, sas.ErrorCircuitOpen, agenthost.ErrorTypeOf(fmt.Errorf("calling x: %w: %w", httpcall.ErrTransient, httpcall.ErrCircuitOpen), nil))
	require.Equal(t, sas.ErrorTimeout, agenthost.ErrorTypeOf(fmt.Errorf("calling x: %w", httpcall.ErrDeadline), nil))
	require.Equal(t, "", agenthost.ErrorTypeOf(httpcall.ErrTransient, nil))
}
