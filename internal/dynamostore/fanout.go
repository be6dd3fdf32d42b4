package dynamostore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/internal/sas"
)

var _ sas.FanOutStore = (*Store)(nil)

// A fan-out's elements are items of the order's partition at sort keys
// past every step's (sas.ElementStep): readSteps' range never reads them,
// ListElements reads one step's range. No write holds more than the first
// window (at most sas.MaxConcurrency elements and the step) or, after it,
// three items (docs/decisions.md, "Fan-out elements are records of their
// own").

// newElement is the conditional put of a new element: it must not exist.
func (st *Store) newElement(key sas.StepKey, name string, generation int, c sas.ElementClaim, owner string, p sas.StartFanOutParams) (types.TransactWriteItem, sas.StepKey) {
	e := sas.NewElement(key, name, generation, c, owner, p.Now, st.cfg.Shards)
	return types.TransactWriteItem{Put: &types.Put{
		TableName: &st.cfg.StateTable, Item: stepItem(e),
		ConditionExpression:                 aws.String("attribute_not_exists(#id)"),
		ExpressionAttributeNames:            map[string]string{"#id": attrOrderID},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}, e.Key()
}

// StartFanOut is sas.StartFanOut on the step and the puts of the first
// window, in one transaction.
func (st *Store) StartFanOut(ctx context.Context, p sas.StartFanOutParams) ([]sas.StepRecord, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("starting the fan-out of step %s: %w", p.Key, err)
	}
	u := newUpdate()
	held(&u, sas.Processing, p.Owner, p.Attempt)
	fanOutNotStarted(&u)
	notCancelled(&u) // a marked step starts no element (sas.StartFanOut)
	u.set(attrForEachCount, ni(p.Count))
	u.set(attrForEachDone, ni(0))
	u.remove(attrCompleteBy, attrWaitingSince, attrStartedAt, attrIdxPK, attrIdxSK)
	u.touch(p.Now, sas.HistoryEntry{At: p.Now, Step: p.Key.Step, Actor: p.Owner, From: sas.Processing, To: sas.Processing, Attempt: p.Attempt,
		Reason: fmt.Sprintf("fan-out over %d elements", p.Count)})
	items := []types.TransactWriteItem{{Update: asTransactUpdate(u.input(st.cfg.StateTable, p.Key))}}
	ops, keys := []string{"starting the fan-out of"}, []sas.StepKey{p.Key}
	for _, c := range p.Claims {
		it, k := st.newElement(p.Key, p.StepName, p.Generation, c, p.Owner, p)
		items = append(items, it)
		ops, keys = append(ops, "claiming element"), append(keys, k)
	}
	if err := st.transact(ctx, items, ops, keys); err != nil {
		return nil, err
	}
	return st.readFanOut(ctx, keys)
}

// CompleteElement is sas.CompleteElement on the element, sas.CountElement
// on its step and the put of the next element, in one transaction.
func (st *Store) CompleteElement(ctx context.Context, p sas.CompleteElementParams) ([]sas.StepRecord, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("completing element %s: %w", p.Key, err)
	}
	u := newUpdate()
	held(&u, sas.Processing, p.Owner, p.Attempt)
	notCancelled(&u) // a marked element settles alone (sas.CompleteElement)
	u.set(attrState, s(string(sas.Processed)))
	if len(p.Result) > 0 {
		u.set(attrResult, s(string(p.Result)))
	} else {
		u.remove(attrResult)
	}
	u.remove(attrLockedBy, attrCompleteBy, attrWaitingSince, attrStartedAt, attrIdxPK, attrIdxSK)
	u.touch(p.Now, sas.HistoryEntry{At: p.Now, Step: p.Key.Step, Actor: p.Owner, From: sas.Processing, To: sas.Processed, Attempt: p.Attempt,
		Reason: "completed", Run: p.Run})
	stepKey := sas.StepKey{OrderID: p.Key.OrderID, Step: sas.StepOf(p.Key.Step)}
	c := newUpdate()
	countsElement(&c)
	c.add(attrForEachDone, 1)
	c.set(attrUpdatedAt, ms(p.Now))
	items := []types.TransactWriteItem{
		{Update: asTransactUpdate(u.input(st.cfg.StateTable, p.Key))},
		{Update: asTransactUpdate(c.input(st.cfg.StateTable, stepKey))},
	}
	ops, keys := []string{"completing element", "counting element"}, []sas.StepKey{p.Key, stepKey}
	if n := p.Next; n != nil {
		it, k := st.newElement(stepKey, p.StepName, p.Generation, *n, p.Owner, sas.StartFanOutParams{Now: p.Now})
		items = append(items, it)
		ops, keys = append(ops, "claiming element"), append(keys, k)
	}
	if err := st.transact(ctx, items, ops, keys); err != nil {
		return nil, err
	}
	return st.readFanOut(ctx, keys)
}

// transact writes items in one transaction, a refusal named for the item
// whose condition failed.
func (st *Store) transact(ctx context.Context, items []types.TransactWriteItem, ops []string, keys []sas.StepKey) error {
	_, err := st.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	i, item, notMadeErr, ok := cancelled(err, len(items))
	switch {
	case !ok:
		return fmt.Errorf("%s step %s: %w", ops[0], keys[0], translate(err))
	case i >= 0:
		return fmt.Errorf("%s %s: %w", ops[i], keys[i], raceFromItem(ops[i], keys[i], item))
	}
	return fmt.Errorf("%s step %s: %w", ops[0], keys[0], notMadeErr)
}

// readFanOut reads back what a fan-out write wrote, in keys' order: each
// step record by itself, elements by one consistent range.
func (st *Store) readFanOut(ctx context.Context, keys []sas.StepKey) ([]sas.StepRecord, error) {
	out := make([]sas.StepRecord, len(keys))
	var elems []int
	for i, k := range keys {
		if !sas.IsElement(k.Step) {
			r, err := st.GetStep(ctx, k)
			if err != nil {
				return nil, fmt.Errorf("reading back %s: %w", k, err)
			}
			out[i] = r
			continue
		}
		elems = append(elems, i)
	}
	if len(elems) == 0 {
		return out, nil
	}
	lo, hi := keys[elems[0]].Step, keys[elems[0]].Step
	for _, i := range elems {
		lo, hi = min(lo, keys[i].Step), max(hi, keys[i].Step)
	}
	got, err := st.queryElements(ctx, keys[0].OrderID, lo, hi, 0, nil)
	if err != nil {
		return nil, err
	}
	byStep := map[int]sas.StepRecord{}
	for _, r := range got.recs {
		byStep[r.Step] = r
	}
	for _, i := range elems {
		r, ok := byStep[keys[i].Step]
		if !ok {
			return nil, fmt.Errorf("reading back element %s: %w", keys[i], sas.ErrNotFound)
		}
		out[i] = r
	}
	return out, nil
}

type elementPage struct {
	recs []sas.StepRecord
	last map[string]av
}

// queryElements reads the records of keys lo..hi of an order, consistently,
// at most limit (0: no limit beyond the page DynamoDB gives).
func (st *Store) queryElements(ctx context.Context, orderID string, lo, hi, limit int, start map[string]av) (elementPage, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &st.cfg.StateTable,
		KeyConditionExpression:    aws.String("#id = :id AND #step BETWEEN :lo AND :hi"),
		ExpressionAttributeNames:  map[string]string{"#id": attrOrderID, "#step": attrStep},
		ExpressionAttributeValues: map[string]av{":id": s(orderID), ":lo": ni(lo), ":hi": ni(hi)},
		ConsistentRead:            aws.Bool(true),
		ExclusiveStartKey:         start,
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(limit))
	}
	q, err := st.db.Query(ctx, in)
	if err != nil {
		return elementPage{}, fmt.Errorf("reading the elements of order %s: %w", orderID, translate(err))
	}
	page := elementPage{last: q.LastEvaluatedKey}
	for _, it := range q.Items {
		r, err := decodeStep(it)
		if err != nil {
			return elementPage{}, fmt.Errorf("reading the elements of order %s: %w", orderID, err)
		}
		page.recs = append(page.recs, r)
	}
	return page, nil
}

// ListElements reads a step's elements in index order, Limit at a time;
// the cursor is the last key read.
func (st *Store) ListElements(ctx context.Context, p sas.ListElementsParams) (sas.ListElementsResult, error) {
	if p.Limit <= 0 {
		p.Limit = sas.DefaultPageLimit
	}
	lo, hi := sas.ElementKeyRange(p.Key.Step)
	var start map[string]av
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < lo || n > hi {
			return sas.ListElementsResult{}, fmt.Errorf("listing the elements of step %s: %w", p.Key, &sas.ValidationError{Field: "cursor", Reason: "not one this store gave"})
		}
		start = map[string]av{attrOrderID: s(p.Key.OrderID), attrStep: ni(n)}
	}
	page, err := st.queryElements(ctx, p.Key.OrderID, lo, hi, p.Limit, start)
	if err != nil {
		return sas.ListElementsResult{}, err
	}
	res := sas.ListElementsResult{Records: page.recs, Stats: sas.ReadStats{Requests: 1, ItemsRead: len(page.recs)}}
	if len(page.last) > 0 && len(page.recs) > 0 {
		res.NextCursor = strconv.Itoa(page.recs[len(page.recs)-1].Step)
	}
	return res, nil
}
