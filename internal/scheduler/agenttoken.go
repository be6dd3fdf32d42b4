package scheduler

import (
	"context"

	"github.com/sas-go/sas/internal/sas"
)

// Agent-issued tokens (docs/protocol.md, "Agent-issued tokens"; Step
// Functions' .waitForTaskToken with a task): a callback step that also has
// an agent. Its claim is its wait, as a callback step's: the lease runs
// from the claim to its heartbeat or timeout (leaseEnd), and the
// supervisor gives it up at that deadline, never re-driving it (a re-drive
// would hand out a new token while the first may already be outside). The
// request carries the step's token (request); the agent starts the work
// and hands the token on. What the agent answers:
//   - done: the work started; the step goes on waiting for its completion
//     (agentAnswered: nothing is written). A completion that came first
//     completed the step already; the answer changes nothing either way.
//   - failed: the step fails (apply), its effect noted (UndoOwed: the work
//     may have started), so its undo runs with the order's compensation.
//   - transient: the attempt failed (transient.go): the next attempt is
//     claimed under the step's retry policy, with a new token. A token of
//     the earlier attempt then completes nothing (a late completion).
//   - started: a late pick-up moves nothing: the deadline is the wait's.
// A completion (callback.go) completes, fails or heartbeats the step as
// for any callback step, before or after the agent's answer.

// agentAnswered takes an agent-token step's forward reply whose outcome
// does not end the step (done, started): it reports whether rep was such
// a reply, handled.
func (s *Service) agentAnswered(ctx context.Context, rep sas.AgentReply) bool {
	switch rep.Outcome {
	case sas.OutcomeDone:
		s.log.InfoContext(ctx, "agent started the work of a callback step: the step waits for its completion",
			"order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "lockedBy", rep.LockedBy)
		return true
	case sas.OutcomeStarted:
		s.log.InfoContext(ctx, "late pick-up of a callback step's request: its deadline is its wait's, unchanged",
			"order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt, "lockedBy", rep.LockedBy)
		return true
	}
	return false
}
