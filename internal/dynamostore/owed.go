package dynamostore

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sas-go/sas/internal/sas"
)

// What a give-up owes is stored as its index entry and nothing else
// (docs/state-store.md): IdxPK = Owed#<shard>, IdxSK = when to (re)send.
// What is owed follows from the state (sas.GiveUpOwes), because a give-up's
// effects are settled all at once. No attribute is added, so the index
// projection already carries everything the owed sweep needs.
const owedPrefix = "Owed#"

// indexOwed points the record's index entry at the owed partition.
func (st *Store) indexOwed(u *updateExpr, k sas.StepKey, at av) {
	shard := st.shard(k)
	u.set(attrShard, ni(shard))
	u.set(attrIdxPK, s(sas.OwedPartition(shard)))
	u.set(attrIdxSK, at)
}

// decodeOwed fills Owes and OwedAt from an owed index entry.
func decodeOwed(d *decoder, r *sas.StepRecord) {
	if strings.HasPrefix(d.str(attrIdxPK), owedPrefix) {
		r.Owes = sas.GiveUpOwes(r.ProcessState)
		r.OwedAt = d.time(attrIdxSK)
	}
}

// FindOwed queries every shard's owed partition for IdxSK <= now: like
// FindDue, Shards requests plus the owed records that are due.
func (st *Store) FindOwed(ctx context.Context, p sas.FindOwedParams) (sas.FindDueResult, error) {
	p = p.WithDefaults()
	var res sas.FindDueResult
	for shard := 0; shard < st.cfg.Shards; shard++ {
		q, err := st.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                 &st.cfg.StateTable,
			IndexName:                 &st.cfg.IndexName,
			KeyConditionExpression:    aws.String("#pk = :pk AND #sk <= :now"),
			ExpressionAttributeNames:  map[string]string{"#pk": attrIdxPK, "#sk": attrIdxSK},
			ExpressionAttributeValues: map[string]av{":pk": s(sas.OwedPartition(shard)), ":now": ms(p.Now)},
			Limit:                     aws.Int32(int32(p.Limit)),
		})
		if err != nil {
			return res, fmt.Errorf("finding owed effects in shard %d: %w", shard, translate(err))
		}
		res.Stats.Requests++
		res.Stats.ItemsRead += int(q.ScannedCount)
		for _, it := range q.Items {
			r, err := decodeStep(it)
			if err != nil {
				return res, fmt.Errorf("finding owed effects in shard %d: %w", shard, err)
			}
			res.Records = append(res.Records, r)
		}
	}
	sas.SortByOwedAt(res.Records)
	return res, nil
}

// Settle clears what a give-up owed, fenced on the state and attempt it
// left and on the entry still being owed, and moves the index entry back to
// the state's partition at the failure time (UpdatedAt, copied in place: no
// read).
func (st *Store) Settle(ctx context.Context, p sas.SettleParams) (sas.StepRecord, error) {
	probe := sas.StepRecord{ProcessState: p.State, Attempt: p.Attempt, Owes: []sas.Effect{sas.EffectAlert}, OwedAt: p.OwedAt}
	if _, err := sas.Settle(probe, p); err != nil {
		return sas.StepRecord{}, fmt.Errorf("settling step %s: %w", p.Key, err)
	}
	u := newUpdate()
	owing(&u, p.State, p.Attempt)
	if !p.Recheck.IsZero() {
		// Still owed, due again at Recheck: the entry stays in the owed
		// partition (sas.SettleParams).
		u.cond("#sk = :was", "#sk", attrIdxSK, ":was", ms(p.OwedAt))
		u.set(attrIdxSK, ms(p.Recheck))
		return st.update(ctx, "deferring the owed effects of", p.Key, u)
	}
	shard := st.shard(p.Key)
	u.set(attrIdxPK, s(sas.IndexPartition(p.State, shard)))
	u.sets = append(u.sets, u.name(attrIdxSK)+" = "+u.name(attrUpdatedAt))
	return st.update(ctx, "settling", p.Key, u)
}

// listOwed adds to a listing of p.State the records of that state in the
// owed partitions (a filter on the state: CompensationFailed and Error
// share them; filtered items count as read). Their cursor keys are
// -1-shard, beside the state partitions' shard.
func (st *Store) listOwed(ctx context.Context, p sas.ListByStateParams, after, next map[int]cursorKey, res *sas.ListByStateResult) error {
	for shard := 0; shard < st.cfg.Shards; shard++ {
		ck := -1 - shard
		start, resumed := after[ck]
		if p.Cursor != "" && !resumed {
			continue
		}
		pk := sas.OwedPartition(shard)
		in := &dynamodb.QueryInput{
			TableName:                 &st.cfg.StateTable,
			IndexName:                 &st.cfg.IndexName,
			KeyConditionExpression:    aws.String("#pk = :pk"),
			FilterExpression:          aws.String("#st = :st"),
			ExpressionAttributeNames:  map[string]string{"#pk": attrIdxPK, "#st": attrState},
			ExpressionAttributeValues: map[string]av{":pk": s(pk), ":st": s(string(p.State))},
			Limit:                     aws.Int32(int32(p.Limit)),
		}
		if resumed {
			in.ExclusiveStartKey = start.key(pk)
		}
		q, err := st.db.Query(ctx, in)
		if err != nil {
			return fmt.Errorf("listing owed %s steps in shard %d: %w", p.State, shard, translate(err))
		}
		res.Stats.Requests++
		res.Stats.ItemsRead += int(q.ScannedCount)
		for _, it := range q.Items {
			r, err := decodeStep(it)
			if err != nil {
				return fmt.Errorf("listing owed %s steps: %w", p.State, err)
			}
			res.Records = append(res.Records, r)
		}
		if len(q.LastEvaluatedKey) > 0 {
			d := &decoder{item: q.LastEvaluatedKey}
			next[ck] = cursorKey{At: d.num(attrIdxSK), Order: d.str(attrOrderID), Step: int(d.num(attrStep))}
		}
	}
	return nil
}
