package memstore

import (
	"context"

	"github.com/sas-go/sas/internal/sas"
)

// FindOwed reads the owed partitions as DynamoDB would: one query per
// shard, due entries only.
func (s *Store) FindOwed(_ context.Context, p sas.FindOwedParams) (sas.FindDueResult, error) {
	p = p.WithDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.dueLocked(s.partitionsNamedLocked(sas.OwedPartition), p.Now, p.Limit)
	sas.SortByOwedAt(res.Records)
	return res, nil
}

func (s *Store) Settle(_ context.Context, p sas.SettleParams) (sas.StepRecord, error) {
	return s.update("settling", p.Key, func(r sas.StepRecord) (sas.StepRecord, error) { return sas.Settle(r, p) })
}

// listOwedLocked adds to a listing of state the records of that state that
// sit in the owed partitions, filtered by state as a DynamoDB filter would
// (the filtered-out items still count as read). Cursor keys of the owed
// partitions are -1-shard, beside the state partitions' shard.
func (s *Store) listOwedLocked(p sas.ListByStateParams, after, next map[int]indexEntry, res *sas.ListByStateResult) {
	inState := func(r sas.StepRecord) bool { return r.ProcessState == p.State }
	s.pageLocked(s.partitionsNamedLocked(sas.OwedPartition), owedCursorKey, inState, p, after, next, res)
}

func owedCursorKey(shard int) int { return -1 - shard }

func cloneOwes(o []sas.Effect) []sas.Effect {
	if len(o) == 0 {
		return nil
	}
	return append([]sas.Effect(nil), o...)
}
