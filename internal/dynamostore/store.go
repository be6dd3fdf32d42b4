// Package dynamostore is the DynamoDB sas.StateStore: an orders table, a
// state table, and the sparse, write-sharded state-due index. Every step
// transition is one conditional write; vendor errors become the domain's
// sentinel errors here and nowhere else.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
)

// API is the part of the DynamoDB client the store uses. Tests wrap it to
// count requests and items read.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Config names the tables. Defaults are applied and checked in New.
type Config struct {
	OrdersTable string
	StateTable  string
	IndexName   string // default "state-due"
	// OrdersIndexName is the orders table's orders-created index (default
	// "orders-created"), which ListOrders reads.
	OrdersIndexName string
	Shards          int // default 8
}

// DefaultIndexName is the state-due index's name.
const DefaultIndexName = "state-due"

// Store is the DynamoDB state store.
type Store struct {
	db  API
	cfg Config
}

var _ sas.StateStore = (*Store)(nil)

// New checks the configuration and returns a store.
func New(db API, cfg Config) (*Store, error) {
	if cfg.IndexName == "" {
		cfg.IndexName = DefaultIndexName
	}
	if cfg.OrdersIndexName == "" {
		cfg.OrdersIndexName = DefaultOrdersIndexName
	}
	if cfg.Shards <= 0 {
		cfg.Shards = sizing.DefaultIndexShards
	}
	if cfg.OrdersTable == "" || cfg.StateTable == "" {
		return nil, &sas.ValidationError{Field: "tables", Reason: "both the orders and the state table must be named"}
	}
	return &Store{db: db, cfg: cfg}, nil
}

// Config returns the configuration in force.
func (st *Store) Config() Config { return st.cfg }

func (st *Store) shard(k sas.StepKey) int { return sas.ShardFor(k, st.cfg.Shards) }

// Submit writes the order and its state records in one TransactWriteItems,
// each put conditional on the item not existing.
func (st *Store) Submit(ctx context.Context, p sas.SubmitParams) (sas.SubmitResult, error) {
	o := p.Order
	if o.OrderID == "" {
		return sas.SubmitResult{}, &sas.ValidationError{Field: "orderId", Reason: "empty"}
	}
	o.CreatedAt = p.Now
	recs, err := sas.NewRecords(o, p.Now, p.PickupBy, st.cfg.Shards, p.Claim, p.Skip...)
	if err == nil {
		err = p.Run.Check(o.OrderID)
	}
	if err != nil {
		return sas.SubmitResult{}, fmt.Errorf("submitting order %s: %w", o.OrderID, err)
	}
	oit := orderItem(o)
	oit[attrListPK] = s(ordersPartition(st.orderShard(o.OrderID)))
	items := []types.TransactWriteItem{{Put: &types.Put{
		TableName:                           &st.cfg.OrdersTable,
		Item:                                oit,
		ConditionExpression:                 aws.String(absent),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}}
	for i := range recs {
		recs[i].Shard = st.shard(recs[i].Key())
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:           &st.cfg.StateTable,
			Item:                stepItem(recs[i]),
			ConditionExpression: aws.String(absent),
		}})
	}
	orderItems := len(items)
	if p.Run != nil {
		items = append(items, st.runStart(o.OrderID, p.Run))
	}
	_, err = st.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return sas.SubmitResult{Created: true, View: written(items[:orderItems])}, nil
	}
	i, item, notMadeErr, ok := cancelled(err, 0)
	if !ok {
		return sas.SubmitResult{}, fmt.Errorf("submitting order %s: %w", o.OrderID, translate(err))
	}
	if i == 0 {
		_, hash, derr := decodeOrder(item)
		if derr == nil && hash != "" && !o.SameContent(hash) {
			return sas.SubmitResult{}, fmt.Errorf("submitting order %s: %w", o.OrderID, sas.ErrOrderConflict)
		}
		view, gerr := st.GetOrder(ctx, o.OrderID)
		if gerr != nil {
			return sas.SubmitResult{}, fmt.Errorf("submitting order %s (already there): %w", o.OrderID, gerr)
		}
		return sas.SubmitResult{Created: false, View: view}, nil
	}
	if i == orderItems {
		return sas.SubmitResult{}, fmt.Errorf("submitting order %s: schedule %s has started another run than %q: %w", o.OrderID, p.Run.Schedule, p.Run.Prev, sas.ErrLostRace)
	}
	if i > 0 {
		// The step records are put only with the order: one without it
		// is no state this store writes.
		return sas.SubmitResult{}, fmt.Errorf("submitting order %s: a step record exists without its order", o.OrderID)
	}
	// A concurrent submission of the same order (TransactionConflict) and the
	// like: the caller retries, and the retry takes the branch above.
	return sas.SubmitResult{}, fmt.Errorf("submitting order %s: %w", o.OrderID, notMadeErr)
}

// written is the order a submission wrote, decoded from its items, so that
// it is what a read returns (times at millisecond precision, for one).
func written(items []types.TransactWriteItem) sas.OrderView {
	o, _, _ := decodeOrder(items[0].Put.Item) // encoded by orderItem just now
	v := sas.OrderView{Order: o}
	for _, it := range items[1:] {
		r, _ := decodeStep(it.Put.Item)
		v.Steps = append(v.Steps, r)
	}
	v.History = sas.MergeHistory(v.Steps)
	return v
}

// update runs one conditional UpdateItem and decodes the new record, or
// turns a failed condition into a RaceError carrying the record as it was.
func (st *Store) update(ctx context.Context, op string, k sas.StepKey, u updateExpr) (sas.StepRecord, error) {
	in := u.input(st.cfg.StateTable, k)
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	out, err := st.db.UpdateItem(ctx, in)
	if err != nil {
		return sas.StepRecord{}, fmt.Errorf("%s step %s: %w", op, k, raceOrTranslate(op, k, err))
	}
	r, err := decodeStep(out.Attributes)
	if err != nil {
		return sas.StepRecord{}, fmt.Errorf("%s step %s: %w", op, k, err)
	}
	return r, nil
}

func boolean(v bool) av { return &types.AttributeValueMemberBOOL{Value: v} }

func (st *Store) Claim(ctx context.Context, p sas.ClaimParams) (sas.StepRecord, error) {
	if err := p.Check(); err != nil {
		return sas.StepRecord{}, fmt.Errorf("claiming step %s: %w", p.Key, err)
	}
	if len(p.Fences()) == 0 {
		return st.update(ctx, "claiming", p.Key, st.claimExpr(p))
	}
	return st.claimWithSiblings(ctx, p)
}

func (st *Store) claimExpr(p sas.ClaimParams) updateExpr {
	from, to, _ := p.Target() // checked by the caller
	u := newUpdate()
	claimable(&u, from, p.Attempt)
	u.set(attrState, s(string(to)))
	reason := p.ClaimReason(to)
	if to == sas.Compensating && from != sas.Compensating {
		u.set(attrFailureCount, ni(0))
	}
	u.set(attrLockedBy, s(p.Owner))
	u.set(attrCompleteBy, ms(p.CompleteBy))
	u.set(attrAttempt, ni(p.Attempt+1))
	u.remove(attrWaitingSince) // sas.Claim: how long it waited unclaimed is over
	st.index(&u, p.Key, to, ms(p.CompleteBy))
	u.touch(p.Now, sas.HistoryEntry{At: p.Now, Step: p.Key.Step, Actor: p.Owner, From: from, To: to, Attempt: p.Attempt + 1, Reason: reason})
	return u
}

func (st *Store) Complete(ctx context.Context, p sas.CompleteParams) ([]sas.StepRecord, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("completing step %s: %w", p.Key, err)
	}
	running, done, _ := sas.Leg(p.Compensation)
	u := newUpdate()
	held(&u, running, p.Owner, p.Attempt)
	if p.Elapsed {
		elapsed(&u, p.Now)
	}
	if !p.Compensation && !p.Cancelled {
		notCancelled(&u)
	}
	u.set(attrState, s(string(done)))
	switch {
	case !p.Compensation && len(p.Result) > 0:
		u.set(attrResult, s(string(p.Result)))
	case !p.Compensation:
		u.remove(attrResult) // as sas.Complete: the completion's result, none
	}
	u.remove(attrLockedBy, attrCompleteBy, attrWaitingSince, attrStartedAt, attrIdxPK, attrIdxSK)
	u.touch(p.Now, sas.HistoryEntry{At: p.Now, Step: p.Key.Step, Actor: p.Owner, From: running, To: done, Attempt: p.Attempt, Reason: p.CompletedReason(), Run: p.Run})
	if p.Next == nil && len(p.Siblings) == 0 && len(p.Skip) == 0 {
		r, err := st.update(ctx, "completing", p.Key, u)
		if err != nil {
			return nil, err
		}
		return []sas.StepRecord{r}, nil
	}
	// One transaction: the step, the steps it claims (a successor, or the
	// branches it starts), the skips, and a ConditionCheck per sibling as
	// read (a graph's fence, sas.CompleteParams.Siblings), in the order the
	// returned records take and the memory store checks them.
	items := []types.TransactWriteItem{{Update: asTransactUpdate(u.input(st.cfg.StateTable, p.Key))}}
	ops, keys := []string{"completing"}, []sas.StepKey{p.Key}
	for _, n := range p.Claims() {
		items = append(items, types.TransactWriteItem{Update: asTransactUpdate(st.claimExpr(n).input(st.cfg.StateTable, n.Key))})
		ops, keys = append(ops, "claiming next"), append(keys, n.Key)
	}
	for _, k := range p.Skip {
		sk := sas.StepKey{OrderID: p.Key.OrderID, Step: k.Step}
		items = append(items, types.TransactWriteItem{Update: asTransactUpdate(st.skipExpr(p.Key.OrderID, k, p.Owner, p.Now).input(st.cfg.StateTable, sk))})
		ops, keys = append(ops, "skipping"), append(keys, sk)
	}
	written := len(keys)
	for _, sib := range p.Siblings {
		k := sas.StepKey{OrderID: p.Key.OrderID, Step: sib.Step}
		items = append(items, st.stillAsSeen(k, sib))
		ops, keys = append(ops, "completing"), append(keys, k)
	}
	_, err := st.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err != nil {
		i, item, notMadeErr, ok := cancelled(err, len(items))
		switch {
		case !ok:
			return nil, fmt.Errorf("completing step %s: %w", p.Key, translate(err))
		case i >= 0:
			return nil, fmt.Errorf("%s step %s: %w", ops[i], keys[i], raceFromItem(ops[i], keys[i], item))
		}
		return nil, fmt.Errorf("completing step %s: %w", p.Key, notMadeErr)
	}
	// A transaction returns no items, and a record rebuilt from what the
	// write set loses what it did not set (a chained undo went out without
	// its generation: issue 16, hole 1). Read them back, consistently.
	recs, err := st.readBack(ctx, keys[:written]...)
	if err != nil {
		return nil, fmt.Errorf("completing step %s (written): %w", p.Key, err)
	}
	return recs, nil
}

// readBack reads records just written, in the order given: one consistent
// Query when they share an order (as a step and its successor or its
// predecessor's undo do), else one read each. A write that followed ours in
// between is read with it; the caller's next fenced write sees it anyway.
func (st *Store) readBack(ctx context.Context, keys ...sas.StepKey) ([]sas.StepRecord, error) {
	out := make([]sas.StepRecord, len(keys))
	lo, hi, same := keys[0].Step, keys[0].Step, true
	for _, k := range keys {
		lo, hi, same = min(lo, k.Step), max(hi, k.Step), same && k.OrderID == keys[0].OrderID
	}
	if !same {
		for i, k := range keys {
			r, err := st.GetStep(ctx, k)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	q, err := st.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &st.cfg.StateTable,
		KeyConditionExpression:    aws.String("#id = :id AND #step BETWEEN :lo AND :hi"),
		ExpressionAttributeNames:  map[string]string{"#id": attrOrderID, "#step": attrStep},
		ExpressionAttributeValues: map[string]av{":id": s(keys[0].OrderID), ":lo": ni(lo), ":hi": ni(hi)},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("reading back order %s: %w", keys[0].OrderID, translate(err))
	}
	byStep := map[int]sas.StepRecord{}
	for _, it := range q.Items {
		r, err := decodeStep(it)
		if err != nil {
			return nil, fmt.Errorf("reading back order %s: %w", keys[0].OrderID, err)
		}
		byStep[r.Step] = r
	}
	for i, k := range keys {
		r, ok := byStep[k.Step]
		if !ok {
			return nil, fmt.Errorf("reading back step %s: %w", k, sas.ErrNotFound)
		}
		out[i] = r
	}
	return out, nil
}

func (st *Store) Fail(ctx context.Context, p sas.FailParams) (sas.StepRecord, error) {
	running, _, failed := sas.Leg(p.Compensation)
	u := newUpdate()
	held(&u, running, p.Owner, p.Attempt)
	u.set(attrState, s(string(failed)))
	u.set(attrLastError, s(p.Reason))
	u.set(attrFailedBy, s(p.Owner))
	u.set(attrRefused, boolean(!p.Compensation))
	if !p.Compensation {
		u.set(attrRejected, boolean(p.Rejected))
	}
	if !p.Compensation && p.Effect {
		u.set(attrUndoOwed, boolean(true))
	}
	u.remove(attrLockedBy, attrCompleteBy, attrWaitingSince, attrStartedAt)
	st.index(&u, p.Key, failed, ms(p.Now))
	u.touch(p.Now, sas.HistoryEntry{At: p.Now, Step: p.Key.Step, Actor: p.Owner, From: running, To: failed, Attempt: p.Attempt, Reason: p.Reason, Run: p.Run})
	return st.update(ctx, "failing", p.Key, u)
}

func (st *Store) Rescue(ctx context.Context, p sas.RescueParams) (sas.StepRecord, error) {
	probe := sas.StepRecord{ProcessState: p.From, Attempt: p.Attempt, DueAt: p.Now, LockedBy: p.Holder}
	if _, err := sas.Rescue(probe, p); err != nil {
		return sas.StepRecord{}, fmt.Errorf("rescuing step %s: %w", p.Key, err)
	}
	return st.settleDue(ctx, "rescuing", dueWrite{Key: p.Key, From: p.From, Attempt: p.Attempt, Now: p.Now,
		To: sas.RescueTarget(p.From), IndexAt: p.PickupBy, Actor: p.Actor, Reason: p.Reason, Holder: p.Holder, Run: p.Run, Lost: p.Lost,
		WaitingSince: p.WaitingSince})
}

func (st *Store) GiveUp(ctx context.Context, p sas.GiveUpParams) (sas.StepRecord, error) {
	probe := sas.StepRecord{ProcessState: p.From, Attempt: p.Attempt, DueAt: p.Now, LockedBy: p.Holder}
	if _, err := sas.GiveUp(probe, p); err != nil {
		return sas.StepRecord{}, fmt.Errorf("giving up step %s: %w", p.Key, err)
	}
	owedAt := p.OwedAt
	if owedAt.IsZero() {
		owedAt = p.Now
	}
	return st.settleDue(ctx, "giving up", dueWrite{Key: p.Key, From: p.From, Attempt: p.Attempt, Now: p.Now,
		To: sas.GiveUpTarget(p.From), IndexAt: p.Now, Actor: p.Actor, Reason: p.Reason, OwedAt: owedAt, Holder: p.Holder, Run: p.Run})
}

// Wait extends a due, held lease, fenced on the lease seen: state, holder,
// attempt and the deadline itself (IdxSK), so of several supervisors that saw
// the same deadline exactly one extends it. The index entry stays in its
// partition, moved to the new deadline.
func (st *Store) Wait(ctx context.Context, p sas.WaitParams) (sas.StepRecord, error) {
	probe := sas.StepRecord{OrderID: p.Key.OrderID, Step: p.Key.Step, ProcessState: p.From, LockedBy: p.Owner,
		Attempt: p.Attempt, DueAt: p.DueAt, WaitingSince: p.WaitingSince}
	next, err := sas.Wait(probe, p)
	if err != nil {
		return sas.StepRecord{}, fmt.Errorf("waiting on step %s: %w", p.Key, err)
	}
	u := newUpdate()
	held(&u, p.From, p.Owner, p.Attempt)
	leaseSeen(&u, p.DueAt, p.WaitingSince)
	if p.From == sas.Processing {
		fanOutNotStarted(&u) // a running fan-out has no deadline: its elements do (sas.Wait)
	}
	u.set(attrCompleteBy, ms(p.Until))
	u.set(attrIdxSK, ms(p.Until))
	if p.WaitingSince.IsZero() {
		// The attempt's first wait: one history entry (later waits add none).
		u.set(attrWaitingSince, ms(next.WaitingSince))
		u.touch(p.Now, next.History[len(next.History)-1])
	} else {
		u.set(attrUpdatedAt, ms(p.Now))
	}
	return st.update(ctx, "waiting on", p.Key, u)
}

// Start records a held attempt's pick-up, fenced on the lease held (state,
// holder, attempt), whatever its deadline, and on the deadline moving only
// later once the attempt has started (sas.Start): a report that loses that
// part of the fence is returned as the record stands, without a write.
func (st *Store) Start(ctx context.Context, p sas.StartParams) (sas.StepRecord, error) {
	if err := p.Check(); err != nil {
		return sas.StepRecord{}, fmt.Errorf("starting step %s: %w", p.Key, err)
	}
	u := newUpdate()
	held(&u, p.From, p.Owner, p.Attempt)
	startsLater(&u, p.CompleteBy)
	u.set(attrStartedAt, ms(p.Now))
	u.set(attrCompleteBy, ms(p.CompleteBy))
	u.set(attrIdxSK, ms(p.CompleteBy))
	u.set(attrUpdatedAt, ms(p.Now))
	r, err := st.update(ctx, "starting", p.Key, u)
	var re *sas.RaceError
	if errors.As(err, &re) && re.Current != nil {
		if got, serr := sas.Start(*re.Current, p); serr == nil && got.UpdatedAt.Equal(re.Current.UpdatedAt) {
			return got, nil // started already, with a later deadline: nothing to write
		}
	}
	return r, err
}

// Heartbeat moves a waiting callback step's deadline on, fenced on the
// lease held (state, holder, attempt) as a completion is, and on the
// deadline moving later (later). The index entry
// stays in its partition, moved to the new deadline; no history entry.
func (st *Store) Heartbeat(ctx context.Context, p sas.HeartbeatParams) (sas.StepRecord, error) {
	if err := p.Check(); err != nil {
		return sas.StepRecord{}, fmt.Errorf("heartbeat of step %s: %w", p.Key, err)
	}
	u := newUpdate()
	held(&u, sas.Processing, p.Owner, p.Attempt)
	if p.Seen.IsZero() {
		later(&u, p.Until)
	} else {
		u.cond("#cb = :seen", "#cb", attrCompleteBy, ":seen", ms(p.Seen))
	}
	u.set(attrCompleteBy, ms(p.Until))
	u.set(attrIdxSK, ms(p.Until))
	u.set(attrUpdatedAt, ms(p.Now))
	return st.update(ctx, "heartbeat of", p.Key, u)
}

// dueWrite is the supervisor's write on a due record: rescue or give up.
type dueWrite struct {
	Key           sas.StepKey
	From, To      sas.ProcessState
	Attempt       int
	Now, IndexAt  time.Time
	Actor, Reason string

	// OwedAt, when set, puts the record in the owed partition at OwedAt
	// instead of w.To's at IndexAt: a give-up owes its effects.
	OwedAt time.Time
	// Holder, when set, fences on the lease held instead of on the
	// deadline passed (sas.RescueParams.Holder).
	Holder string
	// Run is what the holder's agent measured of the run (sas.RunTiming),
	// for the history entry.
	Run sas.RunTiming
	// Lost: a rescue of a request lost before pick-up counts no failure
	// (sas.RescueParams.Lost).
	Lost bool
	// WaitingSince: how long a step never claimed has waited, kept
	// (sas.RescueParams.WaitingSince); zero removes it.
	WaitingSince time.Time
}

// settleDue moves a due record to w.To, fenced by dueCondition: the lease
// goes, FailureCount+1, and the index entry moves to w.To at w.IndexAt.
func (st *Store) settleDue(ctx context.Context, op string, w dueWrite) (sas.StepRecord, error) {
	u := newUpdate()
	if w.Holder != "" {
		held(&u, w.From, w.Holder, w.Attempt)
	} else {
		dueFrom(&u, w.From, w.Attempt, w.Now)
	}
	u.set(attrState, s(string(w.To)))
	if !w.Lost {
		u.add(attrFailureCount, 1)
	}
	u.set(attrLastError, s(w.Reason))
	if w.To == sas.Error || w.To == sas.CompensationFailed {
		u.set(attrFailedBy, s(w.Actor))
		u.set(attrRefused, boolean(false))
	}
	if w.WaitingSince.IsZero() {
		u.remove(attrLockedBy, attrCompleteBy, attrWaitingSince, attrStartedAt)
	} else {
		u.remove(attrLockedBy, attrCompleteBy, attrStartedAt)
		u.set(attrWaitingSince, ms(w.WaitingSince))
	}
	if w.OwedAt.IsZero() {
		st.index(&u, w.Key, w.To, ms(w.IndexAt))
	} else {
		st.indexOwed(&u, w.Key, ms(w.OwedAt))
	}
	u.touch(w.Now, sas.HistoryEntry{At: w.Now, Step: w.Key.Step, Actor: w.Actor, From: w.From, To: w.To, Attempt: w.Attempt, Reason: w.Reason, Run: w.Run})
	return st.update(ctx, op, w.Key, u)
}

// Resubmit reads the record (an operator action, off the hot path) so it can
// trim the history, then rewrites it fenced on state and attempt.
func (st *Store) Resubmit(ctx context.Context, p sas.ResubmitParams) (sas.StepRecord, error) {
	view, cur, err := st.readForResubmit(ctx, p.Key)
	if err != nil {
		return sas.StepRecord{}, err
	}
	next, err := sas.Resubmit(cur, p)
	if err != nil {
		return sas.StepRecord{}, fmt.Errorf("resubmitting step %s: %w", p.Key, err)
	}
	if err := sas.CanResubmit(view, p.Key.Step); err != nil {
		return sas.StepRecord{}, fmt.Errorf("resubmitting step %s: %w", p.Key, err)
	}
	u := newUpdate()
	failedAt(&u, p.Attempt)
	u.set(attrState, s(string(sas.Pending)))
	u.set(attrFailureCount, ni(0))
	u.set(attrAttempt, ni(next.Attempt))
	u.set(attrGeneration, ni(next.Generation))
	u.set(attrRefused, boolean(false))
	u.remove(attrFailedBy, attrRejected)
	u.set(attrHistory, historyList(next.History))
	u.set(attrUpdatedAt, ms(p.Now))
	st.index(&u, p.Key, sas.Pending, ms(p.PickupBy))
	return st.resubmitWrite(ctx, p, u, view)
}

// NoteEffect sets UndoOwed on a forward step that is not Processed,
// conditional on its state; a step noted already is returned as it is.
func (st *Store) NoteEffect(ctx context.Context, p sas.NoteEffectParams) (sas.StepRecord, error) {
	probe, err := sas.NoteEffect(sas.StepRecord{OrderID: p.Key.OrderID, Step: p.Key.Step, ProcessState: p.State}, p)
	if err != nil {
		return sas.StepRecord{}, fmt.Errorf("noting the effect of step %s: %w", p.Key, err)
	}
	u := newUpdate()
	notNoted(&u, p.State)
	u.set(attrUndoOwed, boolean(true))
	u.record(probe.History[len(probe.History)-1]) // not a transition: UpdatedAt kept
	r, err := st.update(ctx, "noting the effect of", p.Key, u)
	var re *sas.RaceError
	if errors.As(err, &re) && re.Current != nil && re.Current.UndoOwed && re.Current.ProcessState == p.State {
		return *re.Current, nil // noted already
	}
	return r, err
}
