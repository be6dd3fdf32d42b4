package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/internal/sas"
)

// readForResubmit reads the order's steps (an operator action, off the hot
// path): sas.CanResubmit judges the step against its siblings.
func (st *Store) readForResubmit(ctx context.Context, k sas.StepKey) (sas.OrderView, sas.StepRecord, error) {
	steps, err := st.readSteps(ctx, k.OrderID)
	if err != nil {
		return sas.OrderView{}, sas.StepRecord{}, fmt.Errorf("resubmitting step %s: %w", k, err)
	}
	view := sas.OrderView{Order: sas.Order{OrderID: k.OrderID}, Steps: steps}
	for _, r := range steps {
		if r.Step == k.Step {
			return view, r, nil
		}
	}
	return view, sas.StepRecord{}, fmt.Errorf("resubmitting step %s: %w", k, sas.ErrNotFound)
}

// resubmitWrite makes the resubmit's write. With sibling steps it is one
// transaction that also checks each sibling is still in the state read, so
// a compensation that starts between the read and the write (a sibling
// moves to Compensating) makes the resubmit lose the race instead of
// re-arming a step of an order being undone.
func (st *Store) resubmitWrite(ctx context.Context, p sas.ResubmitParams, u updateExpr, view sas.OrderView) (sas.StepRecord, error) {
	if len(view.Steps) <= 1 {
		return st.update(ctx, "resubmitting", p.Key, u)
	}
	items := []types.TransactWriteItem{{Update: asTransactUpdate(u.input(st.cfg.StateTable, p.Key))}}
	steps := []int{p.Key.Step}
	for _, r := range view.Steps {
		if r.Step == p.Key.Step {
			continue
		}
		items = append(items, st.stillInState(r.Key(), r.ProcessState))
		steps = append(steps, r.Step)
	}
	_, err := st.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		i, item, notMadeErr, ok := cancelled(err, 0)
		switch {
		case !ok:
			err = translate(err)
		case i == 0:
			err = raceFromItem("resubmit", p.Key, item)
		case i > 0:
			err = fmt.Errorf("a sibling step changed meanwhile (step %d): %w", steps[i], sas.ErrLostRace)
		default:
			err = notMadeErr
		}
		return sas.StepRecord{}, fmt.Errorf("resubmitting step %s: %w", p.Key, err)
	}
	// A transaction returns no item: read the step back (operator path).
	r, err := st.GetStep(ctx, p.Key)
	if err != nil {
		return sas.StepRecord{}, fmt.Errorf("resubmitting step %s (written): %w", p.Key, err)
	}
	return r, nil
}
