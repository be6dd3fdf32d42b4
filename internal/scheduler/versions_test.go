package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
)

// tripV1 and tripV2 are one workflow before and after a deploy: v2 adds a
// hotel (another agent) and changes the flight's call.
func tripV1() sas.Workflow {
	return sas.Workflow{Name: "trip", Steps: []sas.StepDef{
		{Name: "flight", Agent: "flights", Action: "reserve flight", Undo: "cancel flight", Timeout: stepTimeout},
		{Name: "charge", Agent: "payments", Action: "charge card", Undo: "refund card", Timeout: stepTimeout},
	}}
}

func tripV2() sas.Workflow {
	return sas.Workflow{Name: "trip", Steps: []sas.StepDef{
		{Name: "flight", Agent: "flights", Action: "reserve flight (v2)", Undo: "cancel flight", Timeout: stepTimeout},
		{Name: "hotel", Agent: "hotels", Action: "book hotel", Undo: "cancel hotel", Timeout: stepTimeout},
		{Name: "charge", Agent: "payments", Action: "charge card", Undo: "refund card", Timeout: stepTimeout},
	}}
}

// agentQueues makes one queue per agent (and a lane for those in lanes).
func (f *fixture) agentQueues(agents []string, lanes ...string) sas.AgentQueues {
	f.t.Helper()
	q := sas.AgentQueues{ByAgent: map[string]sas.AgentQueue{}}
	mk := func(name string) string {
		c, err := f.q.CreateQueue(f.ctx, sas.CreateQueueParams{Name: name})
		require.NoError(f.t, err)
		return c.URL
	}
	for _, a := range agents {
		aq := sas.AgentQueue{URL: mk("agent-" + a)}
		for _, l := range lanes {
			if l == a {
				aq.PriorityURL = mk("agent-" + a + "-priority")
			}
		}
		q.ByAgent[a] = aq
	}
	return q
}

// requestsAt drains one agent queue.
func (f *fixture) requestsAt(url string) []sas.AgentRequest {
	f.t.Helper()
	var out []sas.AgentRequest
	for _, b := range f.drain(url) {
		var r sas.AgentRequest
		require.NoError(f.t, json.Unmarshal([]byte(b), &r))
		out = append(out, r)
	}
	return out
}

func (f *fixture) oneRequestAt(url string) sas.AgentRequest {
	f.t.Helper()
	reqs := f.requestsAt(url)
	require.Len(f.t, reqs, 1, "want exactly one request at %s", url)
	return reqs[0]
}

func registryOf(t *testing.T, w sas.Workflow) sas.Registry {
	t.Helper()
	reg, err := sas.NewRegistry(w)
	require.NoError(t, err)
	return reg
}

// TestAnOrderRunsOnItsOwnVersion deploys a changed workflow (a new
// scheduler with v2, same store) under orders submitted on v1: each order
// runs to its end on the definition it was submitted with, on the
// read-free reply path and on the path that reads the order.
func TestAnOrderRunsOnItsOwnVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	qs := f.agentQueues([]string{"flights", "hotels", "payments"})
	flights, hotels, payments := qs.ByAgent["flights"].URL, qs.ByAgent["hotels"].URL, qs.ByAgent["payments"].URL
	v1, v2 := tripV1(), tripV2()
	old := scheduler.NewHandler(f.newServiceWith("scheduler-v1", registryOf(t, v1), qs))
	f.handleWith(old, f.event(intake("o-old", "trip", f.replyURL), intake("o-undo", "trip", f.replyURL)))
	stored, err := f.mem.GetDefinition(f.ctx, "trip", v1.Version())
	require.NoError(t, err, "the definition is stored before its first order")
	require.Equal(t, v1, stored)
	for _, r := range f.requestsAt(flights) {
		require.Equal(t, "reserve flight", r.Action)
		require.Equal(t, v1.Version(), r.Version)
	}

	// The deploy: from here on only the v2 scheduler runs.
	h := scheduler.NewHandler(f.newServiceWith("scheduler-v2", registryOf(t, v2), qs))
	require.Empty(t, f.handleWith(h, f.event(intake("o-new", "trip", f.replyURL))))
	newFlight := f.oneRequestAt(flights)
	require.Equal(t, "reserve flight (v2)", newFlight.Action)
	require.Equal(t, v2.Version(), newFlight.Version)

	// o-old's intake redelivered after the deploy: the same order (not a
	// conflict), and its live request is sent again as v1 wrote it.
	require.Empty(t, f.handleWith(h, f.event(intake("o-old", "trip", f.replyURL))))
	again := f.oneRequestAt(flights)
	require.Equal(t, "o-old", again.OrderID)
	require.Equal(t, "reserve flight", again.Action)
	require.Equal(t, v1.Version(), again.Version)

	// o-old's flight succeeds: its next step is v1's charge, not v2's hotel.
	oldFlight := sas.AgentRequest{OrderID: "o-old", Step: 0, StepName: "flight", Agent: "flights", Attempt: 1,
		LockedBy: "scheduler-v1", Workflow: "trip", ReplyTo: f.replyURL, Version: v1.Version()}
	require.Empty(t, f.handleWith(h, f.event(done(oldFlight))))
	require.Empty(t, f.requestsAt(hotels), "v1 has no hotel")
	charge := f.oneRequestAt(payments)
	require.Equal(t, "charge", charge.StepName)
	require.Equal(t, 1, charge.Step)
	require.Equal(t, "charge card", charge.Action)
	require.Equal(t, v1.Version(), charge.Version)
	require.Empty(t, f.handleWith(h, f.event(done(charge))))
	v := f.view("o-old")
	require.Equal(t, []string{"flight", "charge"}, v.Order.Steps)
	require.Equal(t, []sas.ProcessState{sas.Processed, sas.Processed}, f.states("o-old"))

	// o-new goes on to v2's hotel.
	require.Empty(t, f.handleWith(h, f.event(done(newFlight))))
	require.Equal(t, "book hotel", f.oneRequestAt(hotels).Action)

	// o-undo's charge fails, and the v2 scheduler compensates it (it reads
	// the order to plan that): the undo is v1's.
	f.clock.Advance(time.Second)
	undoFlight := sas.AgentRequest{OrderID: "o-undo", Step: 0, StepName: "flight", Agent: "flights", Attempt: 1,
		LockedBy: "scheduler-v1", Workflow: "trip", ReplyTo: f.replyURL, Version: v1.Version()}
	require.Empty(t, f.handleWith(h, f.event(done(undoFlight))))
	require.Empty(t, f.handleWith(h, f.event(reply(f.oneRequestAt(payments), sas.OutcomeFailed, "card declined"))))
	refund := f.oneRequestAt(payments) // the refused charge is undone too, on v1's undo
	require.True(t, refund.Compensation)
	require.Equal(t, v1.Version(), refund.Version)
	require.Equal(t, v1.Steps[1].Undo, refund.Action)
	require.Empty(t, f.handleWith(h, f.event(done(refund))))
	undo := f.requestsAt(flights)
	require.NotEmpty(t, undo, "the completed flight is undone")
	require.True(t, undo[0].Compensation)
	require.Equal(t, "cancel flight", undo[0].Action)
	require.Equal(t, v1.Version(), undo[0].Version)
}

// TestAnUnknownVersionIsDropped: a reply naming a version that is neither
// registered nor stored cannot be run; it is acknowledged with a reason,
// and the good message beside it proceeds.
func TestAnUnknownVersionIsDropped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req := f.runForward("o-known", "order", 0)
	stray := req
	stray.OrderID, stray.Version = "o-stray", "0123456789abcdef"
	require.Empty(t, f.handle(f.event(done(stray), done(req))), "dropped, not retried")
	next := f.request()
	require.Equal(t, "o-known", next.OrderID, "the good reply beside it proceeds")
	require.Equal(t, 1, next.Step)
}

// TestStepsGoToTheirAgentsQueueAndLane: each step's request goes to its
// agent's queue; an order of sas.HighPriority or more goes to the agent's
// priority lane, for every step, since the reply echoes the priority.
func TestStepsGoToTheirAgentsQueueAndLane(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	qs := f.agentQueues([]string{"flights", "hotels", "payments"}, "flights", "payments")
	h := scheduler.NewHandler(f.newServiceWith("scheduler-1", registryOf(t, tripV2()), qs))
	in := func(id string, prio int) string {
		b, _ := json.Marshal(map[string]any{"orderId": id, "workflow": "trip", "priority": prio})
		return string(b)
	}
	require.Empty(t, f.handleWith(h, f.event(in("o-low", 0), in("o-mid", sas.HighPriority-1), in("o-high", 9))))
	low := f.requestsAt(qs.ByAgent["flights"].URL)
	require.Len(t, low, 2)
	for _, r := range low {
		require.Contains(t, []string{"o-low", "o-mid"}, r.OrderID)
	}
	high := f.oneRequestAt(qs.ByAgent["flights"].PriorityURL)
	require.Equal(t, "o-high", high.OrderID)
	require.Equal(t, 9, high.Priority)

	// hotels has no lane: its queue takes every priority.
	require.Empty(t, f.handleWith(h, f.event(done(high))))
	hotel := f.oneRequestAt(qs.ByAgent["hotels"].URL)
	require.Equal(t, 9, hotel.Priority)
	require.Empty(t, f.handleWith(h, f.event(done(hotel))))
	require.Equal(t, "o-high", f.oneRequestAt(qs.ByAgent["payments"].PriorityURL).OrderID)
	require.Empty(t, f.requestsAt(qs.ByAgent["payments"].URL))
}

// TestAnAgentWithoutAQueueIsRefusedAtStart: a deployment must give every
// agent of its workflows a queue.
func TestAnAgentWithoutAQueueIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := scheduler.New(scheduler.Config{
		Store: f.calls, Queue: f.q, Workflows: registryOf(t, tripV2()), Owner: "s",
		AgentQueues: sas.AgentQueues{ByAgent: map[string]sas.AgentQueue{"flights": {URL: "http://q/flights"}}},
	})
	require.ErrorIs(t, err, sas.ErrInvalid)
	require.ErrorContains(t, err, "[hotels payments]")
}
