package memstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sort"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

var (
	_ sas.OrderLister = (*Store)(nil)
	_ sas.PauseStore  = (*Store)(nil)
)

type orderCursor struct {
	At    int64  `json:"t"`
	Order string `json:"o"`
}

// ListOrders pages through the orders newest first, projected as
// dynamostore's orders-created index projects them (no payload, steps or
// replyTo).
func (s *Store) ListOrders(_ context.Context, p sas.ListOrdersParams) (sas.ListOrdersResult, error) {
	p = p.WithDefaults()
	var after *sas.Order
	if p.Cursor != "" {
		var c orderCursor
		b, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err == nil {
			err = json.Unmarshal(b, &c)
		}
		if err != nil {
			return sas.ListOrdersResult{}, &sas.ValidationError{Field: "cursor", Reason: "not a cursor from a previous page"}
		}
		after = &sas.Order{OrderID: c.Order, CreatedAt: ms(timeMilli(c.At))}
	}
	s.mu.Lock()
	all := make([]sas.Order, 0, len(s.orders))
	for _, o := range s.orders {
		if !p.After.IsZero() && o.CreatedAt.Before(ms(p.After)) {
			continue
		}
		if !p.Before.IsZero() && !o.CreatedAt.Before(ms(p.Before)) {
			continue
		}
		all = append(all, sas.Order{OrderID: o.OrderID, Workflow: o.Workflow, Version: o.Version, Priority: o.Priority, CreatedAt: o.CreatedAt})
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return sas.NewerFirst(all[i], all[j]) })
	var res sas.ListOrdersResult
	res.Stats.Requests = s.shards
	for _, o := range all {
		if after != nil && !sas.NewerFirst(*after, o) {
			continue
		}
		if len(res.Orders) == p.Limit {
			last := res.Orders[len(res.Orders)-1]
			b, _ := json.Marshal(orderCursor{At: last.CreatedAt.UnixMilli(), Order: last.OrderID})
			res.NextCursor = base64.RawURLEncoding.EncodeToString(b)
			break
		}
		res.Orders = append(res.Orders, o)
		res.Stats.ItemsRead++
	}
	return res, nil
}

func (s *Store) PauseAgent(_ context.Context, p sas.PauseParams) (sas.AgentPause, error) {
	if err := p.Check(); err != nil {
		return sas.AgentPause{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.pauses[p.Agent]
	if !cur.Paused() {
		cur = sas.AgentPause{Agent: p.Agent, PausedAt: ms(p.Now), Actor: p.Actor}
		s.pauses[p.Agent] = cur
	}
	return cur, nil
}

func (s *Store) ResumeAgent(_ context.Context, p sas.PauseParams) (sas.AgentPause, error) {
	if err := p.Check(); err != nil {
		return sas.AgentPause{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.pauses[p.Agent]
	cur.Agent = p.Agent
	if ok && cur.Paused() {
		cur.ResumedAt, cur.Actor = ms(p.Now), p.Actor
		s.pauses[p.Agent] = cur
	}
	return cur, nil
}

func (s *Store) AgentPauses(context.Context) (sas.Pauses, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(sas.Pauses, len(s.pauses))
	for k, v := range s.pauses {
		out[k] = v
	}
	return out, nil
}

func timeMilli(v int64) time.Time { return time.UnixMilli(v).UTC() }
