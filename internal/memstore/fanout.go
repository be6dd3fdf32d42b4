package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/sas-go/sas/internal/sas"
)

var _ sas.FanOutStore = (*Store)(nil)

// Element records are kept beside the steps (s.steps) but never listed in
// byID: GetOrder and the order's views read steps only, as DynamoDB's
// store reads a range of step keys.

// StartFanOut records the count on the claimed step and creates the first
// window of elements claimed, all or nothing.
func (s *Store) StartFanOut(_ context.Context, p sas.StartFanOutParams) ([]sas.StepRecord, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("starting the fan-out of step %s: %w", p.Key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.steps[p.Key]
	if !ok {
		return nil, fmt.Errorf("starting the fan-out of step %s: %w", p.Key, sas.ErrNotFound)
	}
	started, err := sas.StartFanOut(cur, p)
	if err != nil {
		return nil, fmt.Errorf("starting the fan-out of step %s: %w", p.Key, err)
	}
	out := []sas.StepRecord{started}
	for _, c := range p.Claims {
		e := sas.NewElement(p.Key, p.StepName, p.Generation, c, p.Owner, p.Now, s.shards)
		if prev, ok := s.steps[e.Key()]; ok {
			return nil, fmt.Errorf("claiming element %s: %w", e.Key(), &sas.RaceError{Op: "claim element", Key: e.Key(), Current: &prev})
		}
		out = append(out, e)
	}
	return s.putAll(out), nil
}

// CompleteElement completes the element, counts it on its step and claims
// the next element, all or nothing.
func (s *Store) CompleteElement(_ context.Context, p sas.CompleteElementParams) ([]sas.StepRecord, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("completing element %s: %w", p.Key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.steps[p.Key]
	if !ok {
		return nil, fmt.Errorf("completing element %s: %w", p.Key, sas.ErrNotFound)
	}
	done, err := sas.CompleteElement(cur, p)
	if err != nil {
		return nil, fmt.Errorf("completing element %s: %w", p.Key, err)
	}
	stepKey := sas.StepKey{OrderID: p.Key.OrderID, Step: sas.StepOf(p.Key.Step)}
	step, ok := s.steps[stepKey]
	if !ok {
		return nil, fmt.Errorf("counting element %s: %w", p.Key, sas.ErrNotFound)
	}
	counted, err := sas.CountElement(step, p)
	if err != nil {
		return nil, fmt.Errorf("counting element %s: %w", p.Key, err)
	}
	out := []sas.StepRecord{done, counted}
	if n := p.Next; n != nil {
		e := sas.NewElement(stepKey, p.StepName, p.Generation, *n, p.Owner, p.Now, s.shards)
		if prev, ok := s.steps[e.Key()]; ok {
			return nil, fmt.Errorf("claiming element %s: %w", e.Key(), &sas.RaceError{Op: "claim element", Key: e.Key(), Current: &prev})
		}
		out = append(out, e)
	}
	return s.putAll(out), nil
}

// putAll writes records under the lock and returns copies.
func (s *Store) putAll(rs []sas.StepRecord) []sas.StepRecord {
	for i := range rs {
		rs[i] = s.normalize(rs[i])
		s.steps[rs[i].Key()] = rs[i]
		rs[i] = cloneRecord(rs[i])
	}
	return rs
}

// ListElements reads a step's elements in index order, Limit at a time.
func (s *Store) ListElements(_ context.Context, p sas.ListElementsParams) (sas.ListElementsResult, error) {
	if p.Limit <= 0 {
		p.Limit = sas.DefaultPageLimit
	}
	from, last := sas.ElementKeyRange(p.Key.Step)
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < from || n > last {
			return sas.ListElementsResult{}, fmt.Errorf("listing the elements of step %s: %w", p.Key, &sas.ValidationError{Field: "cursor", Reason: "not one this store gave"})
		}
		from = n + 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []int
	for k := range s.steps {
		if k.OrderID == p.Key.OrderID && k.Step >= from && k.Step <= last {
			keys = append(keys, k.Step)
		}
	}
	sort.Ints(keys)
	res := sas.ListElementsResult{Stats: sas.ReadStats{Requests: 1}}
	for _, k := range keys {
		if len(res.Records) == p.Limit {
			res.NextCursor = strconv.Itoa(res.Records[len(res.Records)-1].Step)
			break
		}
		res.Records = append(res.Records, cloneRecord(s.steps[sas.StepKey{OrderID: p.Key.OrderID, Step: k}]))
	}
	res.Stats.ItemsRead = len(res.Records)
	return res, nil
}

// cloneItem copies an element's item.
func cloneItem(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}
