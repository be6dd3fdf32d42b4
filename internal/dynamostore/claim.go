package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/internal/sas"
)

// claimWithSiblings makes a claim fenced on the order's other steps too
// (sas.ClaimParams.Fences): one transaction, the claim's update and a
// ConditionCheck per sibling that it is still in the state read. A
// compensation's undo claim uses it (off the hot path), so a resubmit made
// since the compensation read the order makes the claim lose; and so does
// an element's claim of its next attempt, fenced on its fan-out running
// (off the hot path too: an element's first attempt is claimed by
// StartFanOut or CompleteElement).
func (st *Store) claimWithSiblings(ctx context.Context, p sas.ClaimParams) (sas.StepRecord, error) {
	items := []types.TransactWriteItem{{Update: asTransactUpdate(st.claimExpr(p).input(st.cfg.StateTable, p.Key))}}
	keys := []sas.StepKey{p.Key}
	for _, sib := range p.Fences() {
		k := sas.StepKey{OrderID: p.Key.OrderID, Step: sib.Step}
		items = append(items, st.stillAsSeen(k, sib))
		keys = append(keys, k)
	}
	_, err := st.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		// The claimed step's own fence first, as the memory store checks
		// it first.
		i, item, notMadeErr, ok := cancelled(err, len(items))
		switch {
		case !ok:
			err = translate(err)
		case i >= 0:
			err = raceFromItem("claim", keys[i], item)
		default:
			err = notMadeErr
		}
		return sas.StepRecord{}, fmt.Errorf("claiming step %s: %w", p.Key, err)
	}
	// A transaction returns no item: read the claim back.
	r, err := st.GetStep(ctx, p.Key)
	if err != nil {
		return sas.StepRecord{}, fmt.Errorf("claiming step %s (written): %w", p.Key, err)
	}
	return r, nil
}

// stillInState is the transaction item that checks step k is still in the
// state its writer read (the inState guard): a resubmit's siblings.
func (st *Store) stillInState(k sas.StepKey, state sas.ProcessState) types.TransactWriteItem {
	c := newUpdate()
	inState(&c, state)
	return st.check(k, c)
}

// stillAsSeen is the transaction item that checks step k is still as its
// writer read it (sas.StepSeen: the state, and the cancel's mark or its
// absence): a claim's or a completion's siblings (sas.CheckSiblings).
func (st *Store) stillAsSeen(k sas.StepKey, seen sas.StepSeen) types.TransactWriteItem {
	c := newUpdate()
	inState(&c, seen.State)
	markSeen(&c, seen.Cancelled)
	return st.check(k, c)
}

// check is the transaction item that checks step k against c's condition.
func (st *Store) check(k sas.StepKey, c updateExpr) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                           &st.cfg.StateTable,
		Key:                                 stepKey(k),
		ConditionExpression:                 aws.String(c.condition),
		ExpressionAttributeNames:            c.names,
		ExpressionAttributeValues:           c.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}
