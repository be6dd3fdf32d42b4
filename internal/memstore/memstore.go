// Package memstore is an in-memory sas.StateStore with the same semantics as
// the DynamoDB store, for fast unit tests of what is built on top. It applies
// the domain's transition functions under one lock, and keeps the same
// sparse state/deadline index so that FindDue and ListByState read (and
// count) only what DynamoDB would.
package memstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
)

// Config configures a Store.
type Config struct {
	Shards int // write shards of the index; default 8
}

// Store is an in-memory state store.
type Store struct {
	mu     sync.Mutex
	shards int
	orders map[string]sas.Order
	hashes map[string]string
	steps  map[sas.StepKey]sas.StepRecord
	byID   map[string][]sas.StepKey
	defs   map[string][]byte // "name#version" → sas.EncodeWorkflow
	pauses map[string]sas.AgentPause
	scheds map[string]sas.ScheduleState
}

var _ sas.StateStore = (*Store)(nil)

// New returns an empty store.
func New(cfg Config) *Store {
	if cfg.Shards <= 0 {
		cfg.Shards = sizing.DefaultIndexShards
	}
	return &Store{
		shards: cfg.Shards,
		orders: map[string]sas.Order{},
		hashes: map[string]string{},
		steps:  map[sas.StepKey]sas.StepRecord{},
		byID:   map[string][]sas.StepKey{},
		defs:   map[string][]byte{},
		pauses: map[string]sas.AgentPause{},
		scheds: map[string]sas.ScheduleState{},
	}
}

// Shards returns the index shard count.
func (s *Store) Shards() int { return s.shards }

func (s *Store) Submit(_ context.Context, p sas.SubmitParams) (sas.SubmitResult, error) {
	o := p.Order
	if o.OrderID == "" {
		return sas.SubmitResult{}, &sas.ValidationError{Field: "orderId", Reason: "empty"}
	}
	recs, err := sas.NewRecords(o, p.Now, p.PickupBy, s.shards, p.Claim, p.Skip...)
	if err == nil {
		err = p.Run.Check(o.OrderID)
	}
	if err != nil {
		return sas.SubmitResult{}, fmt.Errorf("submitting order %s: %w", o.OrderID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.hashes[o.OrderID]; ok {
		if !o.SameContent(h) {
			return sas.SubmitResult{}, fmt.Errorf("submitting order %s: %w", o.OrderID, sas.ErrOrderConflict)
		}
		return sas.SubmitResult{Created: false, View: s.viewLocked(o.OrderID)}, nil
	}
	if err := s.startRunLocked(o.OrderID, p.Run); err != nil {
		return sas.SubmitResult{}, fmt.Errorf("submitting order %s: %w", o.OrderID, err)
	}
	o.CreatedAt = ms(p.Now)
	s.orders[o.OrderID] = cloneOrder(o)
	s.hashes[o.OrderID] = o.ContentHash()
	for _, r := range recs {
		r = s.normalize(r)
		s.steps[r.Key()] = r
		s.byID[o.OrderID] = append(s.byID[o.OrderID], r.Key())
	}
	return sas.SubmitResult{Created: true, View: s.viewLocked(o.OrderID)}, nil
}

// update applies a transition to one record under the lock.
func (s *Store) update(op string, k sas.StepKey, f func(sas.StepRecord) (sas.StepRecord, error)) (sas.StepRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(op, k, f)
}

func (s *Store) updateLocked(op string, k sas.StepKey, f func(sas.StepRecord) (sas.StepRecord, error)) (sas.StepRecord, error) {
	cur, ok := s.steps[k]
	if !ok {
		// Parameters no record could take are invalid before they are not
		// found, as DynamoDB's store checks them before its request.
		if _, err := f(sas.StepRecord{OrderID: k.OrderID, Step: k.Step}); errors.Is(err, sas.ErrInvalid) {
			return sas.StepRecord{}, fmt.Errorf("%s step %s: %w", op, k, err)
		}
		return sas.StepRecord{}, fmt.Errorf("%s step %s: %w", op, k, sas.ErrNotFound)
	}
	next, err := f(cur)
	if err != nil {
		return sas.StepRecord{}, fmt.Errorf("%s step %s: %w", op, k, err)
	}
	next = s.normalize(next)
	s.steps[k] = next
	return cloneRecord(next), nil
}

func (s *Store) Claim(_ context.Context, p sas.ClaimParams) (sas.StepRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked("claiming", p.Key, func(r sas.StepRecord) (sas.StepRecord, error) {
		next, err := sas.Claim(r, p)
		if err != nil {
			return r, err
		}
		// The siblings under the same lock, as DynamoDB's store checks them
		// in the claim's transaction.
		return next, sas.CheckSiblings(p, func(step int) (sas.StepRecord, bool) {
			sib, ok := s.steps[sas.StepKey{OrderID: p.Key.OrderID, Step: step}]
			return cloneRecord(sib), ok
		})
	})
}

func (s *Store) Complete(_ context.Context, p sas.CompleteParams) ([]sas.StepRecord, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("completing step %s: %w", p.Key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.steps[p.Key]
	if !ok {
		return nil, fmt.Errorf("completing step %s: %w", p.Key, sas.ErrNotFound)
	}
	done, err := sas.Complete(cur, p)
	if err != nil {
		return nil, fmt.Errorf("completing step %s: %w", p.Key, err)
	}
	out := []sas.StepRecord{done}
	// In DynamoDB's order: the step, its claims, its skips, then the
	// siblings' fence; nothing is written unless all hold.
	for _, n := range p.Claims() {
		nk := n.Key
		nxt, ok := s.steps[nk]
		if !ok {
			return nil, fmt.Errorf("claiming next step %s: %w", nk, sas.ErrNotFound)
		}
		claimed, err := sas.Claim(nxt, n)
		if err != nil {
			return nil, fmt.Errorf("claiming next step %s: %w", nk, err)
		}
		out = append(out, claimed)
	}
	for _, k := range p.Skip {
		sk := sas.StepKey{OrderID: p.Key.OrderID, Step: k.Step}
		r, ok := s.steps[sk]
		if !ok {
			return nil, fmt.Errorf("skipping step %s: %w", sk, sas.ErrNotFound)
		}
		skipped, err := sas.SkipStep(r, k, p.Owner, p.Now)
		if err != nil {
			return nil, fmt.Errorf("skipping step %s: %w", sk, err)
		}
		out = append(out, skipped)
	}
	if err := sas.CheckSiblingsOf(p, func(step int) (sas.StepRecord, bool) {
		r, ok := s.steps[sas.StepKey{OrderID: p.Key.OrderID, Step: step}]
		return r, ok
	}); err != nil {
		return nil, fmt.Errorf("completing step %s: %w", p.Key, err)
	}
	// Every fence held: the one write is made.
	for i := range out {
		out[i] = s.normalize(out[i])
		s.steps[out[i].Key()] = out[i]
		out[i] = cloneRecord(out[i])
	}
	return out, nil
}

func (s *Store) Fail(_ context.Context, p sas.FailParams) (sas.StepRecord, error) {
	return s.update("failing", p.Key, func(r sas.StepRecord) (sas.StepRecord, error) { return sas.Fail(r, p) })
}

func (s *Store) Rescue(_ context.Context, p sas.RescueParams) (sas.StepRecord, error) {
	return s.update("rescuing", p.Key, func(r sas.StepRecord) (sas.StepRecord, error) { return sas.Rescue(r, p) })
}

func (s *Store) GiveUp(_ context.Context, p sas.GiveUpParams) (sas.StepRecord, error) {
	return s.update("giving up", p.Key, func(r sas.StepRecord) (sas.StepRecord, error) { return sas.GiveUp(r, p) })
}

func (s *Store) Wait(_ context.Context, p sas.WaitParams) (sas.StepRecord, error) {
	return s.update("waiting on", p.Key, func(r sas.StepRecord) (sas.StepRecord, error) { return sas.Wait(r, p) })
}

func (s *Store) Heartbeat(_ context.Context, p sas.HeartbeatParams) (sas.StepRecord, error) {
	return s.update("heartbeat of", p.Key, func(r sas.StepRecord) (sas.StepRecord, error) { return sas.Heartbeat(r, p) })
}

func (s *Store) Resubmit(_ context.Context, p sas.ResubmitParams) (sas.StepRecord, error) {
	if sas.IsElement(p.Key.Step) {
		// An operator resubmits a step, never one element of a fan-out:
		// not among the order's steps, as DynamoDB's read of them finds.
		return sas.StepRecord{}, fmt.Errorf("resubmitting step %s: %w", p.Key, sas.ErrNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked("resubmitting", p.Key, func(r sas.StepRecord) (sas.StepRecord, error) {
		next, err := sas.Resubmit(r, p)
		if err != nil {
			return r, err
		}
		// The whole order, under the same lock: a compensation cannot start
		// in between.
		return next, sas.CanResubmit(s.viewLocked(p.Key.OrderID), p.Key.Step)
	})
}

func (s *Store) NoteEffect(_ context.Context, p sas.NoteEffectParams) (sas.StepRecord, error) {
	return s.update("noting the effect of", p.Key, func(r sas.StepRecord) (sas.StepRecord, error) { return sas.NoteEffect(r, p) })
}

func (s *Store) GetStep(_ context.Context, k sas.StepKey) (sas.StepRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.steps[k]
	if !ok {
		return sas.StepRecord{}, fmt.Errorf("getting step %s: %w", k, sas.ErrNotFound)
	}
	return cloneRecord(r), nil
}

func (s *Store) GetOrder(_ context.Context, orderID string) (sas.OrderView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.orders[orderID]; !ok {
		return sas.OrderView{}, fmt.Errorf("getting order %s: %w", orderID, sas.ErrNotFound)
	}
	return s.viewLocked(orderID), nil
}

func (s *Store) viewLocked(orderID string) sas.OrderView {
	v := sas.OrderView{Order: cloneOrder(s.orders[orderID])}
	for _, k := range s.byID[orderID] {
		v.Steps = append(v.Steps, cloneRecord(s.steps[k]))
	}
	v.History = sas.MergeHistory(v.Steps)
	return v
}

// indexEntry is one row of the simulated sparse index.
type indexEntry struct {
	at  int64
	key sas.StepKey
}

func less(a, b indexEntry) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	if a.key.OrderID != b.key.OrderID {
		return a.key.OrderID < b.key.OrderID
	}
	return a.key.Step < b.key.Step
}

// partitionsLocked returns one state's index partitions by shard, each
// sorted as DynamoDB sorts it. Building them walks the map once: CPU in
// memory, not reads; the stats count what a DynamoDB query would read.
func (s *Store) partitionsLocked(state sas.ProcessState) map[int][]indexEntry {
	return s.partitionsNamedLocked(func(shard int) string { return sas.IndexPartition(state, shard) })
}

// partitionsNamedLocked returns the index partitions named partition(shard):
// a state's, or the owed ones.
func (s *Store) partitionsNamedLocked(partition func(shard int) string) map[int][]indexEntry {
	out := map[int][]indexEntry{}
	for k, r := range s.steps {
		if pk, at, ok := r.IndexEntry(); ok && pk == partition(r.Shard) {
			out[r.Shard] = append(out[r.Shard], indexEntry{at: at.UnixMilli(), key: k})
		}
	}
	for _, part := range out {
		sort.Slice(part, func(i, j int) bool { return less(part[i], part[j]) })
	}
	return out
}

func (s *Store) FindDue(_ context.Context, p sas.FindDueParams) (sas.FindDueResult, error) {
	p, err := p.WithDefaults()
	if err != nil {
		return sas.FindDueResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := s.dueLocked(s.partitionsLocked(p.State), p.Now, p.Limit)
	sas.SortByDue(res.Records)
	return res, nil
}

// dueLocked reads up to limit entries per shard whose time is at or before
// now, as a Query per shard on the index would: FindDue and FindOwed share it.
func (s *Store) dueLocked(parts map[int][]indexEntry, now time.Time, limit int) sas.FindDueResult {
	var res sas.FindDueResult
	at := now.UnixMilli()
	for shard := 0; shard < s.shards; shard++ {
		res.Stats.Requests++
		n := 0
		for _, e := range parts[shard] {
			if e.at > at || n == limit {
				break
			}
			n++
			res.Stats.ItemsRead++
			res.Records = append(res.Records, projected(s.steps[e.key]))
		}
	}
	return res
}

func (s *Store) ListByState(_ context.Context, p sas.ListByStateParams) (sas.ListByStateResult, error) {
	p, err := p.WithDefaults()
	if err != nil {
		return sas.ListByStateResult{}, err
	}
	after := map[int]indexEntry{}
	if p.Cursor != "" {
		if err := decodeCursor(p.Cursor, &after); err != nil {
			return sas.ListByStateResult{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res sas.ListByStateResult
	next := map[int]indexEntry{}
	s.pageLocked(s.partitionsLocked(p.State), func(shard int) int { return shard }, nil, p, after, next, &res)
	if sas.MayOwe(p.State) {
		s.listOwedLocked(p, after, next, &res)
	}
	if len(next) > 0 {
		res.NextCursor = encodeCursor(next)
	}
	sas.SortByIndexTime(res.Records)
	return res, nil
}

// pageLocked reads one page of each shard's partition in parts, as one
// DynamoDB Query per shard would: from the shard's cursor in after, under
// cursorKey(shard) (on a later page, a shard without one was exhausted
// earlier and is skipped), up to p.Limit items read. The records keep
// accepts are listed (nil keeps all; those it rejects still count as read,
// as a filter's do), and where the limit was reached the shard's cursor
// goes to next: DynamoDB stops at the limit with a cursor, even when
// nothing follows, and the next page is then empty.
func (s *Store) pageLocked(parts map[int][]indexEntry, cursorKey func(shard int) int, keep func(sas.StepRecord) bool,
	p sas.ListByStateParams, after, next map[int]indexEntry, res *sas.ListByStateResult) {
	for shard := 0; shard < s.shards; shard++ {
		ck := cursorKey(shard)
		last, resumed := after[ck]
		if p.Cursor != "" && !resumed {
			continue
		}
		res.Stats.Requests++
		n := 0
		for _, e := range parts[shard] {
			if resumed && !less(last, e) {
				continue
			}
			n++
			last = e
			res.Stats.ItemsRead++
			if r := s.steps[e.key]; keep == nil || keep(r) {
				res.Records = append(res.Records, projected(r))
			}
			if n == p.Limit {
				break
			}
		}
		if n == p.Limit {
			next[ck] = last
		}
	}
}

type cursorEntry struct {
	At    int64  `json:"t"`
	Order string `json:"o"`
	Step  int    `json:"s"`
}

func encodeCursor(m map[int]indexEntry) string {
	out := map[int]cursorEntry{}
	for shard, e := range m {
		out[shard] = cursorEntry{At: e.at, Order: e.key.OrderID, Step: e.key.Step}
	}
	b, _ := json.Marshal(out) // ints and strings only
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(c string, into *map[int]indexEntry) error {
	b, err := base64.RawURLEncoding.DecodeString(c)
	var m map[int]cursorEntry
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return &sas.ValidationError{Field: "cursor", Reason: "not a cursor from a previous page"}
	}
	for shard, e := range m {
		(*into)[shard] = indexEntry{at: e.At, key: sas.StepKey{OrderID: e.Order, Step: e.Step}}
	}
	return nil
}

// projected keeps what DynamoDB's index projects (dynamostore.IndexProjection):
// no history, and none of the outcome fields. A caller that needs those
// reads the record.
func projected(r sas.StepRecord) sas.StepRecord {
	r.History = nil
	r.FailedBy, r.Refused, r.UndoOwed, r.Generation = "", false, false, 0
	r.Rejected, r.Result, r.Cancelled = false, nil, false
	r.Item, r.ForEachCount, r.ForEachDone = nil, 0, 0 // a fan-out's (fanout.go): read from the record
	return r
}

func cloneRecord(r sas.StepRecord) sas.StepRecord {
	r.History = append([]sas.HistoryEntry(nil), r.History...)
	r.Owes = cloneOwes(r.Owes)
	if r.Result != nil {
		r.Result = append(json.RawMessage(nil), r.Result...)
	}
	r.Item = cloneItem(r.Item)
	return r
}

func cloneOrder(o sas.Order) sas.Order {
	o.Steps = append([]string(nil), o.Steps...)
	if o.After != nil {
		after := make([][]int, len(o.After))
		for i, a := range o.After {
			after[i] = append([]int{}, a...)
		}
		o.After = after
	}
	o.Payload = append([]byte(nil), o.Payload...)
	if len(o.Payload) == 0 {
		o.Payload = nil
	}
	return o
}

// normalize stores what DynamoDB would: times at millisecond precision in
// UTC, and the shard the writer computes from the key.
func (s *Store) normalize(r sas.StepRecord) sas.StepRecord {
	r.Shard = sas.ShardFor(r.Key(), s.shards)
	r.CompleteBy, r.DueAt = ms(r.CompleteBy), ms(r.DueAt)
	r.CreatedAt, r.UpdatedAt = ms(r.CreatedAt), ms(r.UpdatedAt)
	r.OwedAt = ms(r.OwedAt)
	r.WaitingSince, r.StartedAt = ms(r.WaitingSince), ms(r.StartedAt)
	for i := range r.History {
		r.History[i].At = ms(r.History[i].At)
	}
	return r
}

func ms(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// PutDefinition stores w under its version (sas.DefinitionStore).
func (s *Store) PutDefinition(_ context.Context, w sas.Workflow) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defs[w.Name+"#"+w.Version()] = sas.EncodeWorkflow(w)
	return nil
}

// GetDefinition reads a stored definition (sas.DefinitionStore).
func (s *Store) GetDefinition(_ context.Context, name, version string) (sas.Workflow, error) {
	s.mu.Lock()
	b, ok := s.defs[name+"#"+version]
	s.mu.Unlock()
	if !ok {
		return sas.Workflow{}, fmt.Errorf("reading workflow %s version %s: %w", name, version, sas.ErrNotFound)
	}
	return sas.DecodeWorkflow(b)
}

func (s *Store) Start(_ context.Context, p sas.StartParams) (sas.StepRecord, error) {
	if err := p.Check(); err != nil {
		return sas.StepRecord{}, fmt.Errorf("starting step %s: %w", p.Key, err)
	}
	return s.update("starting", p.Key, func(r sas.StepRecord) (sas.StepRecord, error) { return sas.Start(r, p) })
}
