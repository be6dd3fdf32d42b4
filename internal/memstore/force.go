package memstore

import "github.com/sas-go/sas/internal/sas"

// Force replaces a step's record with r as it is: no transition, no fence.
// It exists for the protocol simulator's planted bugs (internal/dev/sim,
// docs/simulation.md), which need a store that takes a write its fences
// refuse, to show that the simulator's rules catch it. Nothing else may
// call it.
func (s *Store) Force(r sas.StepRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.steps[r.Key()]; !ok {
		return // only a record that exists: Submit makes them
	}
	s.steps[r.Key()] = s.normalize(cloneRecord(r))
}
