package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// started records an agent's report that it picked up the request of an
// attempt too late to finish by the attempt's deadline, or on a
// redelivery (docs/protocol.md, "Deadlines start at pick-up"). One fenced
// write: the attempt is marked started, and its deadline becomes now plus
// the step's timeout and the reply's grace (the pick-up timeout: how long
// a message may wait for its consumer, here the reply for a scheduler).
// The grace is widened by as long as the report itself waited in the
// scheduler queue: the answer, sent after the report, is in the same
// backlog and waits about as long (docs/protocol.md, "Deadlines start at
// pick-up": a burst kept the scheduler queue 110,000 messages deep, and
// answers counted failed at a fixed grace were sent again into it).
// From then on a passed deadline is a failure of the attempt, which the
// supervisor counts; before, it was a wait. A report for an attempt no
// longer current (finished, rescued, given up) changes nothing, and the
// report sends nothing.
func (s *Service) started(ctx context.Context, o order, rep sas.AgentReply, now time.Time) error {
	running, _, _ := sas.Leg(rep.Compensation)
	key := sas.StepKey{OrderID: rep.OrderID, Step: rep.Step}
	got, err := s.cfg.Store.Start(ctx, sas.StartParams{
		Key: key, From: running, Owner: rep.LockedBy, Attempt: rep.Attempt, Now: now,
		CompleteBy: s.leaseEnd(o.def(rep.Step), rep.Compensation, queued(ctx, now), now),
	})
	switch {
	case errors.Is(err, sas.ErrNotFound):
		return drop(err, "started report for order %s step %d", rep.OrderID, rep.Step)
	case errors.Is(err, sas.ErrLostRace):
		s.log.InfoContext(ctx, "started report for an attempt no longer current: nothing to record", "order", rep.OrderID,
			"step", rep.Step, "attempt", rep.Attempt, "lockedBy", rep.LockedBy, "err", err)
		return nil
	case errors.Is(err, sas.ErrInvalid):
		return drop(err, "started report for order %s step %d", rep.OrderID, rep.Step)
	case err != nil:
		return fmt.Errorf("recording the pick-up of step %s attempt %d: %w", key, rep.Attempt, err)
	}
	s.log.InfoContext(ctx, "late pick-up recorded", "order", rep.OrderID, "step", rep.Step, "attempt", rep.Attempt,
		"compensation", rep.Compensation, "completeBy", got.CompleteBy)
	return nil
}
