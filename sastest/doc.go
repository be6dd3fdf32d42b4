// Package sastest runs a team's workflows and agents in the test process,
// on a fake clock, the way a deployment runs them: the real scheduler,
// supervisor and agent handler over an in-memory state store and in-memory
// SQS queues. An order that takes minutes of retries in AWS settles in
// milliseconds, with no emulator and no network.
//
//	env := sastest.New(t, trip.Workflows(), travel, payments)
//	env.Fail("hotel", 1, agent.Permanent(errors.New("no rooms")))
//	res := env.Run("trip", "order-1", map[string]any{"traveller": "Ada"})
//	// res.Status == sastest.StatusCompensated, res.Undone == []string{"flight"}
//
// # What runs
//
// Each agent given to New gets its own queue and its own handler
// (agent.NewHandler, as agent.Start builds it in Lambda), like the functions
// of the CDK construct. The scheduler takes the intake and scheduler queues;
// the supervisor sweeps on its schedule (every minute of virtual time, as
// deployed). Run submits an order and delivers the queued messages to their
// handlers, as the Lambda event sources would, until nothing is visible;
// while the order is not settled it moves the clock on, a second at a time
// while messages wait to become visible again (a redelivery's backoff, a
// delayed retry), or straight to the next sweep when only the supervisor can
// move the order. So a transient failure goes through the agent's in-process
// retries, redeliveries, the hand-back to the scheduler and the supervisor's
// retry with its backoff, exactly as deployed. Requests are delivered to the
// agents one at a time, so the calls come in a deterministic order.
//
// The actors read the time from the fake clock; the waits between an
// agent's in-process tries advance it instead of sleeping. A step's context
// still has a real deadline (context.WithDeadline), computed from the fake
// time: so that it never lies in the real past, the clock starts at the wall
// clock's time (to the millisecond) and only moves forward. A step that
// waits for its context to end therefore waits in real time.
//
// # Injecting failures
//
// Fail and FailUndo make a step (or its undo) return an error at a given
// attempt instead of running the agent's Func: agent.Permanent for a refusal
// (the order is compensated), agent.Reject for a business rejection (the
// order is compensated and ends rejected, with no alert), any other error for a transient failure, which
// is retried as the deployment retries it. An attempt is the scheduler's
// attempt at the step, counted from 1, separately for the step and for its
// undo; every run of the Func during that attempt (in-process tries and
// redeliveries) fails.
//
// # Fan-out
//
// A fan-out step (workflow.Step.ForEach) runs once per element of its list.
// Its Result.Steps entry holds its result (the list of its elements'
// results, in order) and its Elements: each one started, with its item,
// state, attempts and result. An element's calls name it ("reserve[2]#1"),
// its attempts are counted on their own, and its undo shows in
// Result.Undone as "reserve[2]". Fail on a fan-out step fails that attempt
// of every element; FailElement fails one element's.
//
// # Callback steps and the clock
//
// A callback step (workflow.Step.Callback) waits for the outside world.
// Answer says how the kit answers it in the orders that follow: after how
// long (virtual time), with a result, a failure or a rejection, and with
// heartbeats meanwhile; the kit sends the completion with the step's
// token, through the intake queue, as a deployment's completer would
// (package completion). Without an answer the step is given up at its
// timeout, or at its first missed heartbeat. A Run skips the supervisor's
// sweeps that would find nothing due, so a 72-hour wait takes
// milliseconds. Now reads the virtual clock and Advance moves it on
// between runs.
//
// A wait step (workflow.Step.Wait) ends at its due time by that clock:
// a 72-hour wait runs in milliseconds too, and never ends early. RunAt
// submits an order that starts at a later time (the intake's startAt). A
// step reads the virtual clock as agent.Request.Now (the wall clock when
// deployed): read it instead of time.Now in a step whose work depends on
// the time.
//
// # What a Result says
//
// Status is how the order ended (StatusProcessed, StatusCompensated,
// StatusFailed, StatusCompensationFailed, StatusRejected when a step
// was refused with agent.Reject, or StatusCancelled when the test cancelled
// the order mid-run with CancelWhen or Answer.Cancel); Results what each step returned (Decode
// reads one); Steps the final state of each step; Undone the steps
// that were undone, in the order they were (newest first); Statuses what the
// submitter's replyTo queue received; Alerts what an operator was told; and
// Calls every run of a step's Func (or undo), in order. Assert on outcomes:
// the fake clock's timings are the kit's, not AWS's.
//
// # Acting mid-run and aiming faults
//
// CancelWhen cancels an order when a step of it is about to run, as its
// submitter would: the step settles, no later step starts, and what took
// effect is undone. An Answer with Cancel cancels an order while its
// callback step waits: the wait ends at once, not at its timeout.
// FailOrder injects a failure into one order's step
// alone (Fail's hits every order), and Clear removes a step's injected
// failures, so the orders after run it again.
//
// A mistake in what the test gives the kit (a workflow it does not have, a
// step no workflow has, a step's agent missing) fails the test at once, with
// the reason; so does an order that does not settle within Options.Timeout
// of virtual time. The actors' logs are written to the test's log when the
// test fails.
package sastest
