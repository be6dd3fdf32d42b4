package scheduler_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/memstore"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

func TestNewChecksConfig(t *testing.T) {
	t.Parallel()
	reg, err := registry.Default(time.Second)
	require.NoError(t, err)
	valid := func() scheduler.Config {
		return scheduler.Config{Store: memstore.New(memstore.Config{}), Queue: newFixture(t).q, Workflows: reg, Owner: "s-1", AgentQueues: sas.AgentQueues{Default: "http://q/agent"}, SigningKey: testKey}
	}
	_, err = scheduler.New(valid())
	require.NoError(t, err, "the rest has defaults")

	tests := []struct {
		name   string
		mutate func(*scheduler.Config)
		want   string
	}{
		{"no store", func(c *scheduler.Config) { c.Store = nil }, "state store"},
		{"no queue", func(c *scheduler.Config) { c.Queue = nil }, "queue is required"},
		{"no owner", func(c *scheduler.Config) { c.Owner = "" }, "owner"},
		{"no agent queue", func(c *scheduler.Config) { c.AgentQueues = sas.AgentQueues{} }, "an agent queue is required"},
		{"no workflows", func(c *scheduler.Config) { c.Workflows = nil }, "at least one workflow"},
		{"no signing key", func(c *scheduler.Config) { c.SigningKey = nil }, "signing key"},
		{"a short signing key", func(c *scheduler.Config) { c.SigningKey = testKey[:31] }, "signing key"},
		{"negative timeout", func(c *scheduler.Config) { c.StepTimeout = -time.Second }, "timeouts"},
		{"replyTo open to the whole account", func(c *scheduler.Config) {
			c.ReplyToAllowed = func(u string) bool { return strings.HasPrefix(u, "http://q/") }
		}, "every queue of the account"},
		{"step without agent", func(c *scheduler.Config) {
			c.Workflows = sas.Registry{"w": {Name: "w", Steps: []sas.StepDef{{Name: "s"}}}}
		}, "every step needs"},
		{"misfiled workflow", func(c *scheduler.Config) {
			c.Workflows = sas.Registry{"w": {Name: "other", Steps: []sas.StepDef{{Name: "s", Agent: "a"}}}}
		}, "own name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			tc.mutate(&c)
			_, err := scheduler.New(c)
			require.ErrorIs(t, err, sas.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestIntakeSubmitsClaimsAndDispatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-1", "payment", f.replyURL))

	req := f.request()
	signer, err := sas.NewSigner(testKey)
	require.NoError(t, err)
	require.NoError(t, signer.Verify(req.Signed(), req.Sig), "signed for the reply's echo")
	req.Sig = ""
	require.Equal(t, sas.TraceID(sas.NewTrace("o-1", t0)), sas.TraceID(req.Trace), "the trace started at intake")
	req.Trace = ""
	require.Equal(t, sas.AgentRequest{
		V: 1, Kind: sas.KindAgentRequest, OrderID: "o-1", Step: 0, StepName: "charge", Agent: "payments",
		Attempt: 1, LockedBy: owner, CompleteBy: t0.Add(leaseTime), IdempotencyKey: "o-1:0",
		Payload:  json.RawMessage(`{"amount":42,"currency":"EUR"}`),
		Workflow: "payment", ReplyTo: f.replyURL, // for the agent to echo
		TimeoutMs:        stepTimeout.Milliseconds(), // the agent's own limit, from when it starts
		Action:           "POST /payments",           // what to call, from the order's definition
		Version:          registry.PaymentWorkflow(stepTimeout).Version(),
		TransientOutcome: true, // a failed attempt is reported (issue 19)
		StartedOutcome:   true, // a late pick-up is reported (issue 31)
	}, req)
	require.Equal(t, []string{"received#1000"}, statusList(f.statuses()))

	v := f.view("o-1")
	require.Equal(t, "payment", v.Order.Workflow)
	require.Equal(t, f.replyURL, v.Order.ReplyTo)
	require.Equal(t, sas.Processing, v.Steps[0].ProcessState)
	require.Equal(t, owner, v.Steps[0].LockedBy)
	require.Equal(t, 1, v.Steps[0].Attempt)
	require.Equal(t, 1, transitions(v.Steps[0], sas.Processing), "created claimed: one claim, no separate write")
}

func TestKindIsOptionalOnIntake(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(`{"orderId":"o-nokind","workflow":"payment"}`, `{"v":1,"kind":"intake","orderId":"o-kind","workflow":"payment"}`)
	require.Len(t, f.requests(), 2)
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-nokind"))
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-kind"))
	require.Empty(t, f.statuses(), "no replyTo, no status")
}

// TestDuplicateIntake: a redelivered intake finds its order, sends the
// first step's request again while no pick-up was reported (its first
// delivery may have died before sending it), whatever the deadline, and
// posts "received" again. A second message for the same order (a
// submitter that sent it twice) sends and posts nothing (docs/intake.md):
// issue 29 saw a thousand duplicates re-send requests into a busy queue.
func TestDuplicateIntake(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		advance    time.Duration
		started    bool
		duplicate  bool
		wantResend bool
	}{
		{"redelivery: request sent again", 10 * time.Second, false, false, true},
		{"redelivery past the deadline, no pick-up reported: sent again", leaseTime + time.Second, false, false, true},
		{"redelivery after the pick-up was reported: nothing sent", 10 * time.Second, true, false, false},
		{"a second message for the order: nothing sent, nothing posted", 10 * time.Second, false, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			body := intake("o-dup", "order", f.replyURL)
			f.deliver(body)
			first := f.request()
			f.statuses()

			f.clock.Advance(tc.advance)
			if tc.started {
				f.started("o-dup", 0)
			}
			if tc.duplicate {
				require.Empty(t, f.handle(f.duplicate(body)))
				require.Empty(t, f.statuses(), "a duplicate posts nothing")
			} else {
				f.deliver(body)
				require.Equal(t, []string{"received#1000"}, statusList(f.statuses()), "same sequence number: the caller can de-duplicate")
			}
			if tc.wantResend {
				require.Equal(t, first, f.request(), "the same request, same attempt and deadline")
			} else {
				require.Empty(t, f.requests())
			}

			v := f.view("o-dup")
			require.Equal(t, []sas.ProcessState{sas.Processing, sas.Pending, sas.Pending}, f.states("o-dup"))
			require.Equal(t, 1, v.Steps[0].Attempt, "no second claim")
			require.Equal(t, 1, transitions(v.Steps[0], sas.Pending), "no second order")
		})
	}
}

func TestDuplicateIntakeInOneBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := intake("o-twice", "payment", f.replyURL)
	require.Empty(t, f.handle(f.duplicate(body, body)))
	reqs := f.requests()
	// Handled by the same instance at the same instant, the duplicate finds
	// the step claimed by its own owner just now: what a retried write whose
	// commit was lost finds too (sas.OwnWrite), so it sends the request once
	// more. A duplicate a millisecond later sends nothing (TestDuplicateIntake).
	require.Len(t, reqs, 2, "the same request")
	require.Equal(t, reqs[0], reqs[1])
	require.Equal(t, 1, f.view("o-twice").Steps[0].Attempt)
}

func TestConflictingIntakeIsRejected(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.deliver(intake("o-c", "payment", f.replyURL))
	f.request()
	f.statuses()

	conflicting := `{"orderId":"o-c","workflow":"payment","payload":{"amount":1},"replyTo":"` + f.otherURL + `"}`
	f.deliver(conflicting)

	require.Empty(t, f.requests())
	st := f.statusesAt(f.otherURL)
	require.Len(t, st, 1)
	require.Equal(t, sas.StatusRejected, st[0].Status)
	require.Equal(t, "o-c", st[0].OrderID)
	require.Equal(t, scheduler.SeqRejected, st[0].Sequence)
	require.Contains(t, st[0].Reason, "different content")
	require.Empty(t, f.statuses(), "the first submitter hears nothing")

	v := f.view("o-c")
	require.JSONEq(t, `{"amount":42,"currency":"EUR"}`, string(v.Order.Payload), "the stored order is untouched")
	require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-c"))
}

// Every kind of bad intake is rejected alone: the good messages around it in
// the same batch go through, and the batch reports no failure.
func TestInvalidIntakeRejectedAlone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body func(f *fixture) string
		id   string // the order id the rejection names; "" when no status is expected
		want string // in the rejection reason
	}{
		{"not JSON", func(*fixture) string { return `order please` }, "", ""},
		{"truncated JSON", func(*fixture) string { return `{"orderId":"o-bad","workflow":"pay` }, "", ""},
		{"missing orderId", func(f *fixture) string { return `{"workflow":"payment","replyTo":"` + f.replyURL + `"}` }, "", "orderId"},
		{"malformed orderId", func(f *fixture) string {
			return `{"orderId":"has space","workflow":"payment","replyTo":"` + f.replyURL + `"}`
		}, "has space", "orderId"},
		{"missing workflow", func(f *fixture) string { return `{"orderId":"o-bad","replyTo":"` + f.replyURL + `"}` }, "o-bad", "workflow"},
		{"unknown workflow", func(f *fixture) string {
			return `{"orderId":"o-bad","workflow":"teleport","replyTo":"` + f.replyURL + `"}`
		}, "o-bad", "not a registered workflow"},
		{"payload not an object", func(f *fixture) string {
			return `{"orderId":"o-bad","workflow":"payment","payload":[1,2],"replyTo":"` + f.replyURL + `"}`
		}, "o-bad", "JSON object"},
		{"priority out of range", func(f *fixture) string {
			return `{"orderId":"o-bad","workflow":"payment","priority":12,"replyTo":"` + f.replyURL + `"}`
		}, "o-bad", "priority"},
		{"unknown field", func(f *fixture) string {
			return `{"orderId":"o-bad","workflow":"payment","colour":"red","replyTo":"` + f.replyURL + `"}`
		}, "o-bad", `unknown field "colour"`},
		{"wrong field type", func(f *fixture) string {
			return `{"orderId":"o-bad","workflow":"payment","priority":"high","replyTo":"` + f.replyURL + `"}`
		}, "o-bad", "priority"},
		{"unsupported version", func(f *fixture) string {
			return `{"v":2,"orderId":"o-bad","workflow":"payment","replyTo":"` + f.replyURL + `"}`
		}, "o-bad", "version 2"},
		{"trailing data", func(f *fixture) string {
			return `{"orderId":"o-bad","workflow":"payment","replyTo":"` + f.replyURL + `"}{}`
		}, "o-bad", "trailing data"},
		{"replyTo not allowed: nobody is told", func(f *fixture) string {
			return `{"orderId":"o-bad","workflow":"payment","replyTo":"` + f.deniedURL + `"}`
		}, "", ""},
		{"bad input and a replyTo not allowed", func(f *fixture) string {
			return `{"orderId":"o-bad","workflow":"teleport","replyTo":"` + f.deniedURL + `"}`
		}, "", ""},
		{"a kind the scheduler does not read", func(f *fixture) string {
			return `{"v":1,"kind":"status","orderId":"o-bad","replyTo":"` + f.replyURL + `"}`
		}, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.deliver(intake("o-good-1", "payment", f.otherURL), tc.body(f), intake("o-good-2", "order", f.otherURL))

			require.Len(t, f.requests(), 2, "both good orders dispatched")
			require.Equal(t, []sas.ProcessState{sas.Processing}, f.states("o-good-1"))
			require.Equal(t, []sas.ProcessState{sas.Processing, sas.Pending, sas.Pending}, f.states("o-good-2"))
			require.Len(t, f.statusesAt(f.otherURL), 2, "both good orders received")
			f.requireNoOrder("o-bad")
			f.requireNoOrder("has space")

			st := f.statuses()
			require.Empty(t, f.statusesAt(f.deniedURL), "never post to a queue the deployment does not allow")
			if tc.want == "" {
				require.Empty(t, st)
				return
			}
			require.Len(t, st, 1)
			require.Equal(t, sas.StatusRejected, st[0].Status)
			require.Equal(t, tc.id, st[0].OrderID)
			require.Equal(t, scheduler.SeqRejected, st[0].Sequence)
			require.Contains(t, st[0].Reason, tc.want)
			require.Equal(t, t0, st[0].At)
		})
	}
}
