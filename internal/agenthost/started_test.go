package agenthost_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// A request that asks for it (startedOutcome) is reported picked up before
// it runs when the run cannot end by its CompleteBy (it waited in the queue
// past the pick-up allowance), and on every redelivery; an on-time first
// delivery reports nothing, and neither does a request without the flag
// (an older scheduler). The report is the request's echo with outcome
// "started", signed as every reply, and it goes out before the call.
func TestALatePickUpIsReportedBeforeTheRun(t *testing.T) {
	t.Parallel()
	started := func(r *sas.AgentRequest) { r.StartedOutcome = true }
	tests := []struct {
		name     string
		req      sas.AgentRequest
		receives string
		want     bool
	}{
		{"on time: nothing", request("o-1", started, timeout(5*time.Second), completeBy(clocktest.T0.Add(time.Minute))), "1", false},
		{"on time, to the millisecond: nothing", request("o-1", started, timeout(5*time.Second), completeBy(clocktest.T0.Add(5*time.Second))), "1", false},
		{"late: cannot end by completeBy", request("o-1", started, timeout(5*time.Second), completeBy(clocktest.T0.Add(4*time.Second))), "1", true},
		{"waited past completeBy", request("o-1", started, timeout(5*time.Second), completeBy(clocktest.T0.Add(-time.Hour))), "", true},
		{"a redelivery, on time or not", request("o-1", started, timeout(5*time.Second), completeBy(clocktest.T0.Add(time.Minute))), "2", true},
		{"an older scheduler's request: never", request("o-1", timeout(5*time.Second), completeBy(clocktest.T0.Add(-time.Hour))), "3", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newServiceRig(t, memqueue.Options{})
			var before []sas.AgentReply // what the scheduler queue held when the call began
			svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
				before = r.replies()
				return json.RawMessage(`{"id":"pay_1"}`), nil
			})})
			tc.req.Sig = "v1.signature"
			resp := handleWith(t, svc, withReceives(event(tc.req), tc.receives))
			require.Empty(t, failedIDs(resp))
			after := r.replies()
			require.Len(t, after, 1, "the outcome")
			require.Equal(t, sas.OutcomeDone, after[0].Outcome)
			if !tc.want {
				require.Empty(t, before, "no report")
				return
			}
			require.Len(t, before, 1, "the report, before the call")
			rep := before[0]
			require.Equal(t, sas.OutcomeStarted, rep.Outcome)
			requireEcho(t, tc.req, rep)
			require.Equal(t, "v1.signature", rep.Sig, "signed as every reply")
			require.Empty(t, rep.Result)
		})
	}
}

// A report that cannot be sent does not stop the run: its outcome is
// what the scheduler waits for.
func TestAStartedReportThatFailsDoesNotStopTheRun(t *testing.T) {
	t.Parallel()
	fail := true
	r := newServiceRig(t, memqueue.Options{SendFault: func(string, sas.OutboundMessage) *sas.SendFailure {
		if fail {
			fail = false
			return &sas.SendFailure{Code: "ServiceUnavailable", Message: "injected"}
		}
		return nil
	}})
	calls := 0
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		calls++
		return nil, nil
	})})
	req := request("o-1", func(r *sas.AgentRequest) { r.StartedOutcome = true }, completeBy(clocktest.T0.Add(-time.Minute)))
	resp := handleWith(t, svc, event(req))
	require.Empty(t, failedIDs(resp))
	require.Equal(t, 1, calls)
	reps := r.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
}

// The late pick-ups of one batch are reported in one Send (one
// SendMessageBatch for up to ten), all before any of them runs; an
// on-time request of the same batch reports nothing.
func TestABatchsLatePickUpsAreReportedInOneSend(t *testing.T) {
	t.Parallel()
	var sends atomic.Int32
	r := newServiceRig(t, memqueue.Options{Fault: func(op memqueue.Op, _ string) error {
		if op == memqueue.OpSend {
			sends.Add(1)
		}
		return nil
	}})
	var before []sas.AgentReply
	var once sync.Once
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		once.Do(func() { before = r.replies() })
		return nil, nil
	})})
	started := func(r *sas.AgentRequest) { r.StartedOutcome = true }
	var reqs []any
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		reqs = append(reqs, request(id, started, timeout(5*time.Second), completeBy(clocktest.T0.Add(-time.Minute))))
	}
	reqs = append(reqs, request("o-on-time", started, timeout(5*time.Second), completeBy(clocktest.T0.Add(time.Minute))))
	resp := handleWith(t, svc, event(reqs...))
	require.Empty(t, failedIDs(resp))
	require.Len(t, before, 3, "every late pick-up reported before the first run")
	for _, rep := range before {
		require.Equal(t, sas.OutcomeStarted, rep.Outcome)
		require.NotEqual(t, "o-on-time", rep.OrderID)
	}
	require.EqualValues(t, 2, sends.Load(), "one Send for the reports, one for the outcomes")
	require.Len(t, r.replies(), 4, "then the four outcomes")
}
