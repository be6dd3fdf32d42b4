package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/sas-go/sas/internal/sas"
)

// Cancel marks the step an order's cancel lands on (sas.CancelStep): one
// conditional UpdateItem. A Processing step keeps its lease and gets the
// mark; a Pending one moves to Error, marked, in the index's Error
// partition. A Processing step marked already is returned as it is.
func (st *Store) Cancel(ctx context.Context, p sas.CancelParams) (sas.StepRecord, error) {
	probe := sas.StepRecord{OrderID: p.Key.OrderID, Step: p.Key.Step, ProcessState: p.From, Attempt: p.Attempt}
	next, err := sas.CancelStep(probe, p)
	if err != nil {
		return sas.StepRecord{}, fmt.Errorf("cancelling step %s: %w", p.Key, err)
	}
	u := newUpdate()
	cancellable(&u, p.From, p.Attempt)
	u.set(attrCancelled, boolean(true))
	if p.From == sas.Pending {
		u.set(attrState, s(string(sas.Error)))
		u.set(attrLastError, s(next.LastError))
		u.set(attrFailedBy, s(p.Actor))
		u.set(attrRefused, boolean(false))
		u.remove(attrCompleteBy, attrWaitingSince)
		st.index(&u, p.Key, sas.Error, ms(p.Now))
	}
	u.touch(p.Now, next.History[len(next.History)-1])
	r, err := st.update(ctx, "cancelling", p.Key, u)
	var re *sas.RaceError
	if errors.As(err, &re) && re.Current != nil && p.From == sas.Processing && re.Current.Cancelled &&
		re.Current.ProcessState == sas.Processing && re.Current.Attempt == p.Attempt {
		return *re.Current, nil // marked already: as sas.CancelStep, no write
	}
	return r, err
}
