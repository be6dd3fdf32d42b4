package memstore

import (
	"context"

	"github.com/sas-go/sas/internal/sas"
)

// Cancel marks the step an order's cancel lands on (sas.CancelStep).
func (s *Store) Cancel(_ context.Context, p sas.CancelParams) (sas.StepRecord, error) {
	return s.update("cancelling", p.Key, func(r sas.StepRecord) (sas.StepRecord, error) { return sas.CancelStep(r, p) })
}
