package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sas-go/sas/internal/sas"
)

// GetStep reads one step record, consistently.
func (st *Store) GetStep(ctx context.Context, k sas.StepKey) (sas.StepRecord, error) {
	out, err := st.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &st.cfg.StateTable, Key: stepKey(k), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return sas.StepRecord{}, fmt.Errorf("getting step %s: %w", k, translate(err))
	}
	if len(out.Item) == 0 {
		return sas.StepRecord{}, fmt.Errorf("getting step %s: %w", k, sas.ErrNotFound)
	}
	r, err := decodeStep(out.Item)
	if err != nil {
		return sas.StepRecord{}, fmt.Errorf("getting step %s: %w", k, err)
	}
	return r, nil
}

// index points the record's index entry at a state partition and time.
func (st *Store) index(u *updateExpr, k sas.StepKey, state sas.ProcessState, at av) {
	shard := st.shard(k)
	u.set(attrShard, ni(shard))
	u.set(attrIdxPK, s(sas.IndexPartition(state, shard)))
	u.set(attrIdxSK, at)
}

func (st *Store) GetOrder(ctx context.Context, orderID string) (sas.OrderView, error) {
	out, err := st.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &st.cfg.OrdersTable, Key: map[string]av{attrOrderID: s(orderID)}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return sas.OrderView{}, fmt.Errorf("getting order %s: %w", orderID, translate(err))
	}
	if len(out.Item) == 0 {
		return sas.OrderView{}, fmt.Errorf("getting order %s: %w", orderID, sas.ErrNotFound)
	}
	o, _, err := decodeOrder(out.Item)
	if err != nil {
		return sas.OrderView{}, fmt.Errorf("getting order %s: %w", orderID, err)
	}
	v := sas.OrderView{Order: o}
	if v.Steps, err = st.readSteps(ctx, orderID); err != nil {
		return sas.OrderView{}, err
	}
	v.History = sas.MergeHistory(v.Steps)
	return v, nil
}

// readSteps reads an order's step records, consistently, in step order:
// the keys below sas.ElementBase, never a fan-out's elements (fanout.go).
func (st *Store) readSteps(ctx context.Context, orderID string) ([]sas.StepRecord, error) {
	var out []sas.StepRecord
	var start map[string]av
	for {
		q, err := st.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &st.cfg.StateTable,
			KeyConditionExpression:    aws.String("#id = :id AND #step < :elements"),
			ExpressionAttributeNames:  map[string]string{"#id": attrOrderID, "#step": attrStep},
			ExpressionAttributeValues: map[string]av{":id": s(orderID), ":elements": ni(sas.ElementBase)},
			ConsistentRead:            aws.Bool(true),
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, fmt.Errorf("getting steps of order %s: %w", orderID, translate(err))
		}
		for _, it := range q.Items {
			r, err := decodeStep(it)
			if err != nil {
				return nil, fmt.Errorf("getting steps of order %s: %w", orderID, err)
			}
			out = append(out, r)
		}
		if start = q.LastEvaluatedKey; len(start) == 0 {
			return out, nil
		}
	}
}

// FindDue queries every shard's partition of the state-due index for
// IdxSK <= now. Only due records are read: the key condition, not a filter,
// bounds the reads, so a sweep costs Shards requests plus the due records.
func (st *Store) FindDue(ctx context.Context, p sas.FindDueParams) (sas.FindDueResult, error) {
	p, err := p.WithDefaults()
	if err != nil {
		return sas.FindDueResult{}, err
	}
	var res sas.FindDueResult
	for shard := 0; shard < st.cfg.Shards; shard++ {
		q, err := st.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &st.cfg.StateTable,
			IndexName:                 &st.cfg.IndexName,
			KeyConditionExpression:    aws.String("#pk = :pk AND #sk <= :now"),
			ExpressionAttributeNames:  map[string]string{"#pk": attrIdxPK, "#sk": attrIdxSK},
			ExpressionAttributeValues: map[string]av{":pk": s(sas.IndexPartition(p.State, shard)), ":now": ms(p.Now)},
			Limit:                     aws.Int32(int32(p.Limit)),
		})
		if err != nil {
			return res, fmt.Errorf("finding due %s steps in shard %d: %w", p.State, shard, translate(err))
		}
		res.Stats.Requests++
		res.Stats.ItemsRead += int(q.ScannedCount)
		for _, it := range q.Items {
			r, err := decodeStep(it)
			if err != nil {
				return res, fmt.Errorf("finding due %s steps in shard %d: %w", p.State, shard, err)
			}
			res.Records = append(res.Records, r)
		}
	}
	sas.SortByDue(res.Records)
	return res, nil
}

// ListByState pages through one state's partitions of the index.
func (st *Store) ListByState(ctx context.Context, p sas.ListByStateParams) (sas.ListByStateResult, error) {
	p, err := p.WithDefaults()
	if err != nil {
		return sas.ListByStateResult{}, err
	}
	after, err := decodeCursor(p.Cursor)
	if err != nil {
		return sas.ListByStateResult{}, err
	}
	var res sas.ListByStateResult
	next := map[int]cursorKey{}
	for shard := 0; shard < st.cfg.Shards; shard++ {
		start, resumed := after[shard]
		if p.Cursor != "" && !resumed {
			continue // exhausted on an earlier page
		}
		pk := sas.IndexPartition(p.State, shard)
		in := &dynamodb.QueryInput{
			TableName:                 &st.cfg.StateTable,
			IndexName:                 &st.cfg.IndexName,
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": attrIdxPK},
			ExpressionAttributeValues: map[string]av{":pk": s(pk)},
			Limit:                     aws.Int32(int32(p.Limit)),
		}
		if resumed {
			in.ExclusiveStartKey = start.key(pk)
		}
		q, err := st.db.Query(ctx, in)
		if err != nil {
			return res, fmt.Errorf("listing %s steps in shard %d: %w", p.State, shard, translate(err))
		}
		res.Stats.Requests++
		res.Stats.ItemsRead += int(q.ScannedCount)
		for _, it := range q.Items {
			r, err := decodeStep(it)
			if err != nil {
				return res, fmt.Errorf("listing %s steps: %w", p.State, err)
			}
			res.Records = append(res.Records, r)
		}
		if len(q.LastEvaluatedKey) > 0 {
			d := &decoder{item: q.LastEvaluatedKey}
			next[shard] = cursorKey{At: d.num(attrIdxSK), Order: d.str(attrOrderID), Step: int(d.num(attrStep))}
		}
	}
	if sas.MayOwe(p.State) {
		if err := st.listOwed(ctx, p, after, next, &res); err != nil {
			return res, err
		}
	}
	res.NextCursor = encodeCursor(next)
	sas.SortByIndexTime(res.Records)
	return res, nil
}
