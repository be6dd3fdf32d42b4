package agenthost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqslimits"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// rawReplies drains the scheduler queue and returns the bodies as sent.
func rawReplies(t *testing.T, q *memqueue.Queue, url string) []string {
	t.Helper()
	var out []string
	for {
		msgs, err := q.Receive(t.Context(), sas.ReceiveParams{QueueURL: url, Max: 10, Visibility: time.Hour})
		require.NoError(t, err)
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			out = append(out, m.Body)
		}
	}
}

// hugeResult is a 1 MiB JSON answer made of characters JSON and HTML
// escaping grow: '<' (six bytes when HTML-escaped) and control characters
// (six bytes always).
func hugeResult() json.RawMessage {
	return json.RawMessage(`{"id":"pay_1","echo":"` + strings.Repeat(`<\u0001\"`, (1<<20)/10) + `"}`)
}

// A result over its bound is never dropped silently: the step fails by
// name (its effect happened, so the scheduler has it undone), with a reply
// under the message limit.
func TestHugeResultFailsItsStepByName(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		return hugeResult(), nil
	})})
	resp := handleWith(t, svc, event(request("o-big")))
	require.Empty(t, resp.BatchItemFailures)

	bodies := rawReplies(t, r.queue, r.replyURL)
	require.Len(t, bodies, 1)
	require.LessOrEqual(t, len(bodies[0]), sqslimits.MaxOrderMessageBytes)
	var rep sas.AgentReply
	require.NoError(t, json.Unmarshal([]byte(bodies[0]), &rep))
	require.Equal(t, sas.OutcomeFailed, rep.Outcome)
	require.Equal(t, sas.ErrorResultTooLarge, rep.ErrorType)
	require.Contains(t, rep.Reason, "over the 16384-byte limit per step")
	require.Empty(t, rep.Result)
	require.Contains(t, r.logs.String(), `"resultBytes":`)
}

// A result exactly at the bound is carried, compacted.
func TestAResultAtTheBoundIsCarried(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	at := `"` + strings.Repeat("r", sas.MaxResultBytes-2) + `"`
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		return json.RawMessage(" " + at + " "), nil
	})})
	handleWith(t, svc, event(request("o-at")))
	reps := r.replies()
	require.Len(t, reps, 1)
	require.Equal(t, sas.OutcomeDone, reps[0].Outcome)
	require.Equal(t, at, string(reps[0].Result))
}

// A small result still travels, for whoever reads the scheduler queue.
func TestSmallResultIsCarried(t *testing.T) {
	t.Parallel()
	r := newServiceRig(t, memqueue.Options{})
	svc := r.service(agenthost.Config{Agents: payments(func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
		return json.RawMessage(`{"id":"pay_1", "status":"captured"}`), nil
	})})
	handleWith(t, svc, event(request("o-small")))
	reps := r.replies()
	require.Len(t, reps, 1)
	require.JSONEq(t, `{"id":"pay_1","status":"captured"}`, string(reps[0].Result))
}

// A 2xx whose body is over the bound on results, through the real HTTP
// runner: one call, and a failed reply named ResultTooLarge under the
// message limit (the service's effect happened: the scheduler undoes it).
func TestOversizedSuccessResponseFailsByName(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	r := newRig(t, rigOptions{remote: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(hugeResult())
	})})
	resp := r.handle(event(request("o-big-http")))
	require.Empty(t, resp.BatchItemFailures)
	bodies := rawReplies(t, r.queue, r.replyURL)
	require.Len(t, bodies, 1)
	require.LessOrEqual(t, len(bodies[0]), sqslimits.MaxOrderMessageBytes)
	var rep sas.AgentReply
	require.NoError(t, json.Unmarshal([]byte(bodies[0]), &rep))
	require.Equal(t, sas.OutcomeFailed, rep.Outcome)
	require.Equal(t, sas.ErrorResultTooLarge, rep.ErrorType, rep.Reason)
	require.EqualValues(t, 1, calls.Load())
}

// The worst order intake accepts (the largest payload, of characters JSON
// must escape, the longest order id and replyTo, the registry's longest
// names, a long holder id) makes an agent request, a done reply with a huge
// result and a failed reply with a long reason of control characters, every
// one within MaxOrderMessageBytes, hence within what the queues take.
func TestWorstCaseOrderFitsEveryMessage(t *testing.T) {
	t.Parallel()
	replyTo := "https://sqs.us-east-1.amazonaws.com/000000000000/" + strings.Repeat("q", sas.MaxReplyToBytes-49)
	orderID := strings.Repeat("o", 128)
	for name, fill := range map[string]string{
		"control characters": `\u0001`,
		"quotes":             `\"`,
		"html":               `<`,
		"line separators":    "\u2028",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// The largest payload intake accepts, exactly at the limit.
			head, tail := `{"x":"`, `"}`
			n := (sas.MaxPayloadBytes - len(head) - len(tail)) / len(fill)
			payload := head + strings.Repeat(fill, n) + strings.Repeat(" ", sas.MaxPayloadBytes-len(head)-len(tail)-n*len(fill)) + tail
			require.Len(t, payload, sas.MaxPayloadBytes)
			intake := `{"orderId":"` + orderID + `","workflow":"order","replyTo":"` + replyTo + `","payload":` + payload + `}`
			in, err := sas.ParseIntake([]byte(intake), sas.IntakeRules{
				Workflows:      func(string) bool { return true },
				ReplyToAllowed: func(string) bool { return true },
			})
			require.NoError(t, err, "the worst case is accepted")

			reg, err := registry.Default(time.Minute)
			require.NoError(t, err)
			for _, w := range reg {
				for i, st := range w.Steps {
					for _, undo := range []bool{false, true} {
						req := sas.AgentRequest{
							V: sas.MessageVersion, Kind: sas.KindAgentRequest, OrderID: in.OrderID,
							Step: i, StepName: st.Name, Agent: st.Agent, Attempt: 1 << 30,
							LockedBy: strings.Repeat("l", 256), CompleteBy: clocktest.T0.Add(999 * time.Hour),
							IdempotencyKey: sas.IdempotencyKey(in.OrderID, i, 0, undo) + strings.Repeat("g", 20),
							Payload:        in.Payload, Compensation: undo, Workflow: w.Name, ReplyTo: in.ReplyTo,
							Results: worstResults(t, fill),
						}
						body := sas.Encode(req)
						require.LessOrEqual(t, len(body), sqslimits.MaxOrderMessageBytes, "agent.request")

						for _, run := range []agenthost.RunnerFunc{
							func(context.Context, sas.AgentRequest) (json.RawMessage, error) { return hugeResult(), nil },
							func(context.Context, sas.AgentRequest) (json.RawMessage, error) {
								return nil, &agenthost.PermanentError{Reason: strings.Repeat("\x01", 10_000)}
							},
						} {
							r := newServiceRig(t, memqueue.Options{})
							svc := r.service(agenthost.Config{Agents: map[string]agenthost.Runner{st.Agent: run}})
							handleWith(t, svc, event(body))
							bodies := rawReplies(t, r.queue, r.replyURL)
							require.Len(t, bodies, 1)
							require.LessOrEqual(t, len(bodies[0]), sqslimits.MaxOrderMessageBytes, "agent.reply")
						}
					}
				}
			}
		})
	}
}

// worstResults are the most results an order may carry, of escaped fill:
// results of at most sas.MaxResultBytes each, sas.MaxOrderResultsBytes in
// all, as the scheduler lets them through.
func worstResults(t *testing.T, fill string) sas.Results {
	t.Helper()
	one := func(n int) json.RawMessage {
		return json.RawMessage(`"` + strings.Repeat(fill, (n-2)/len(fill)) + strings.Repeat(" ", (n-2)%len(fill)) + `"`)
	}
	out := sas.Results{}
	for i := 0; ; i++ {
		name := fmt.Sprintf("step-%02d", i)
		out[name] = one(sas.MaxResultBytes)
		if out.Size() > sas.MaxOrderResultsBytes {
			out[name] = one(sas.MaxResultBytes - (out.Size() - sas.MaxOrderResultsBytes))
			require.Equal(t, sas.MaxOrderResultsBytes, out.Size())
			return out
		}
	}
}
