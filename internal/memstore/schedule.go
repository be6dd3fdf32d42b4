package memstore

import (
	"context"
	"fmt"

	"github.com/sas-go/sas/internal/sas"
)

var _ sas.ScheduleStore = (*Store)(nil)

// startRunLocked records a schedule's run in its state, under the lock of
// the submission that creates the run's order; an exclusive claim whose
// schedule has moved on from Prev loses the race.
func (s *Store) startRunLocked(orderID string, c *sas.RunClaim) error {
	if c == nil {
		return nil
	}
	st := s.scheds[c.Schedule]
	if c.Exclusive && st.Running != c.Prev {
		return fmt.Errorf("starting a run of schedule %s (its running order is %q, not %q): %w", c.Schedule, st.Running, c.Prev, sas.ErrLostRace)
	}
	st.Name = c.Schedule
	st.Running, st.LastRunAt = orderID, ms(c.ScheduledAt)
	st.Runs++
	s.scheds[c.Schedule] = st
	return nil
}

func (s *Store) GetSchedule(_ context.Context, name string) (sas.ScheduleState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.scheds[name]
	if !ok {
		return sas.ScheduleState{}, fmt.Errorf("reading schedule %s: %w", name, sas.ErrNotFound)
	}
	return st, nil
}

func (s *Store) SkipRun(_ context.Context, p sas.SkipRunParams) (sas.ScheduleState, error) {
	if err := p.Check(); err != nil {
		return sas.ScheduleState{}, fmt.Errorf("skipping a run of schedule %s: %w", p.Schedule, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.scheds[p.Schedule]
	if st.LastSkipped == p.OrderID {
		return st, nil // the same run's trigger again
	}
	st.Name = p.Schedule
	st.Skipped++
	st.LastSkipped, st.LastSkippedAt = p.OrderID, ms(p.ScheduledAt)
	s.scheds[p.Schedule] = st
	return st, nil
}
