package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sasctl"
)

// Row is one order in a list.
type Row struct {
	ID, Workflow, Version string
	State                 sas.ProcessState
	Created               time.Time
	Steps                 []sas.StepRecord
	LastError             string
	Stuck                 bool
}

func row(v sas.OrderView, now time.Time) Row {
	r := Row{ID: v.Order.OrderID, Workflow: v.Order.Workflow, Version: v.Order.Version, State: v.State(), Created: v.Order.CreatedAt, Steps: v.Steps}
	for _, st := range v.Steps {
		if st.LastError != "" {
			r.LastError = st.LastError
		}
		if sas.Due(st, now) {
			r.Stuck = true
		}
	}
	return r
}

// Filter is what an order list selects, from the query string.
type Filter struct {
	State    string // a sas.ProcessState, "" for any
	Workflow string
	Version  string
	Age      string // a Go duration: created within it; "" for any
	Stuck    bool   // past a deadline (due for the supervisor)
	Query    string // an order id
}

func parseFilter(q url.Values) (Filter, error) {
	f := Filter{State: q.Get("state"), Workflow: q.Get("workflow"), Version: q.Get("version"), Age: q.Get("age"), Stuck: q.Get("stuck") == "1", Query: q.Get("q")}
	if f.State != "" {
		if _, err := sas.ParseState(f.State); err != nil {
			return f, err
		}
	}
	if f.Age != "" {
		if d, err := time.ParseDuration(f.Age); err != nil || d <= 0 {
			return f, fmt.Errorf("age %q: want a duration such as 30m or 24h", f.Age)
		}
	}
	return f, nil
}

// Values encodes the filter back into a query string.
func (f Filter) Values() url.Values {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("state", f.State)
	set("workflow", f.Workflow)
	set("version", f.Version)
	set("age", f.Age)
	set("q", f.Query)
	if f.Stuck {
		v.Set("stuck", "1")
	}
	return v
}

// Empty reports whether the filter selects every order.
func (f Filter) Empty() bool { return f == Filter{} }

func (f Filter) keeps(r Row, now time.Time) bool {
	if f.State != "" && string(r.State) != f.State {
		return false
	}
	if f.Workflow != "" && r.Workflow != f.Workflow {
		return false
	}
	if f.Version != "" && r.Version != f.Version {
		return false
	}
	if f.Age != "" {
		d, _ := time.ParseDuration(f.Age)
		if r.Created.Before(now.Add(-d)) {
			return false
		}
	}
	if f.Stuck && !r.Stuck {
		return false
	}
	return true
}

// Page is one page of a filtered order list.
type Page struct {
	Rows []Row
	Next string // cursor of the next page; "" at the end
	// Source says which index the page came from, for the operator.
	Source string
	Reads  sas.ReadStats
}

// maxScan bounds the orders one list page looks at (through the index) to
// fill a page whose filter the index cannot apply.
const maxScan = 200

// list selects a page of orders through the indexes, never a Scan:
//   - an order id: GetOrder;
//   - stuck: FindDue for each state with a deadline;
//   - a state the state-due index holds (Pending, Processing, Error,
//     Compensating, CompensationFailed): ListByState, each order read once;
//   - anything else (every order, Processed, Compensated): ListOrders on
//     orders-created, newest first, within the age, each order read to
//     know its state; the filters the index cannot apply are applied to
//     what it returns, up to maxScan orders per page.
func (s *Server) list(ctx context.Context, f Filter, cursor string, limit int) (Page, error) {
	now := s.cfg.Clock.Now()
	st := s.cfg.Store
	var p Page
	seen := map[string]bool{}
	add := func(id string) error {
		if seen[id] {
			return nil
		}
		seen[id] = true
		v, err := s.getOrder(ctx, st, id)
		if errors.Is(err, sas.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if r := row(v, now); f.keeps(r, now) {
			p.Rows = append(p.Rows, r)
		}
		return nil
	}
	switch {
	case f.Query != "":
		p.Source = "order id (GetItem)"
		return p, add(f.Query)
	case f.Stuck:
		p.Source = "state-due index: past their deadline (FindDue)"
		for _, state := range []sas.ProcessState{sas.Processing, sas.Pending, sas.Compensating} {
			res, err := st.FindDue(ctx, sas.FindDueParams{State: state, Now: now, Limit: limit})
			if err != nil {
				return p, err
			}
			p.Reads.Requests += res.Stats.Requests
			for _, r := range res.Records {
				if len(p.Rows) >= limit {
					break
				}
				if err := add(r.OrderID); err != nil {
					return p, err
				}
			}
		}
		return p, nil
	case f.State != "" && sas.Listable(sas.ProcessState(f.State)):
		p.Source = "state-due index: steps in " + f.State + " (ListByState)"
		// An order is in the state its steps sum up to; list the steps in
		// the state (and, for an order's state, in states that sum to it).
		states := []sas.ProcessState{sas.ProcessState(f.State)}
		if f.State == string(sas.Processing) {
			states = append(states, sas.Pending)
		}
		for _, state := range states {
			res, err := st.ListByState(ctx, sas.ListByStateParams{State: state, Limit: limit, Cursor: cursorFor(cursor, state)})
			if err != nil {
				return p, err
			}
			p.Reads.Requests += res.Stats.Requests
			for _, r := range res.Records {
				if err := add(r.OrderID); err != nil {
					return p, err
				}
			}
			if res.NextCursor != "" && p.Next == "" {
				p.Next = string(state) + ":" + res.NextCursor
			}
			if cursor != "" {
				break // a cursor continues one state
			}
		}
		return p, nil
	}
	p.Source = "orders-created index, newest first (ListOrders)"
	after := time.Time{}
	if f.Age != "" {
		d, _ := time.ParseDuration(f.Age)
		after = now.Add(-d)
	}
	scanned := 0
	for {
		res, err := s.cfg.Store.ListOrders(ctx, sas.ListOrdersParams{After: after, Limit: min(limit, 50), Cursor: cursor})
		if err != nil {
			return p, err
		}
		p.Reads.Requests += res.Stats.Requests
		for _, o := range res.Orders {
			if f.Workflow != "" && o.Workflow != f.Workflow || f.Version != "" && o.Version != f.Version {
				continue // the index projects these: no read
			}
			if err := add(o.OrderID); err != nil {
				return p, err
			}
		}
		scanned += len(res.Orders)
		cursor = res.NextCursor
		if cursor == "" || len(p.Rows) >= limit || scanned >= maxScan {
			p.Next = cursor
			return p, nil
		}
	}
}

// cursorFor picks the part of a ListByState cursor for a state ("State:cursor").
func cursorFor(cursor string, state sas.ProcessState) string {
	prefix := string(state) + ":"
	if len(cursor) > len(prefix) && cursor[:len(prefix)] == prefix {
		return cursor[len(prefix):]
	}
	return ""
}

func (s *Server) orders(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	p, err := s.list(r.Context(), f, r.URL.Query().Get("cursor"), s.cfg.PageSize)
	if err != nil {
		s.fail(w, http.StatusBadGateway, err)
		return
	}
	if f.Query != "" && len(p.Rows) == 1 {
		http.Redirect(w, r, orderHref(p.Rows[0].ID), http.StatusSeeOther)
		return
	}
	next := ""
	if p.Next != "" {
		v := f.Values()
		v.Set("cursor", p.Next)
		next = "/orders?" + v.Encode()
	}
	states := []string{}
	for _, st := range sas.OrderStates {
		states = append(states, string(st))
	}
	s.render(w, "orders", "Orders", true, struct {
		Filter    Filter
		Page      Page
		NextURL   string
		States    []string
		Workflows []string
		Query     string
	}{f, p, next, states, s.cfg.Workflows, f.Values().Encode()})
}

// StepView is one step on the order page.
type StepView struct {
	sas.StepRecord
	Key, UndoKey string
	// PickupWait is how long the step waited Pending before its first claim
	// of the attempt; InFlight how long the attempt took from claim to
	// outcome (the agent queue's wait and the execution together).
	PickupWait, InFlight time.Duration
	// Run is what the agent measured of the step's current attempt (its
	// reply's queue wait and execution, recorded with the outcome): zero
	// while the attempt runs, when it ended without a reply (rescued by
	// the supervisor), or when its agent was built before the fields.
	Run    sas.RunTiming
	Waited bool // the supervisor saw it wait in a busy queue
	// PausedAgent is the paused agent the step waits for, if any.
	PausedAgent string
	// Follows names the steps it follows, in an order whose workflow has
	// branches (sas.Order.After); empty in a straight line.
	Follows []string
	// FanOut is a fan-out step's elements (docs/workflows.md, "Fan-out
	// over a list"); nil for any other step.
	FanOut *FanOutView
}

// FanOutView is a fan-out step's elements: how many are done of how many,
// how many of those started are in each state, and each one started.
type FanOutView struct {
	Done, Total int
	States      string // "Processing 2, Processed 3"
	Elements    []ElementView
}

// ElementView is one element of a fan-out step.
type ElementView struct {
	sas.StepRecord
	Index int
	Key   string // its idempotency key (the step's and ":i<index>")
}

// UndoView is one undo of the chain.
type UndoView struct {
	Step  int
	Name  string
	State sas.ProcessState
	At    time.Time
	Key   string
}

// StatusView is a status the scheduler posts to the caller for a transition.
type StatusView struct {
	At     time.Time
	Status string
	Step   string
	Reason string
}

const payloadCut = 4096

func (s *Server) order(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if r.URL.Path == "/order" {
		id = r.URL.Query().Get("id")
	}
	v, err := s.getOrder(r.Context(), s.cfg.Store, id)
	if errors.Is(err, sas.ErrNotFound) {
		s.fail(w, http.StatusNotFound, fmt.Errorf("no order %q", id))
		return
	}
	if err != nil {
		s.fail(w, http.StatusBadGateway, err)
		return
	}
	now := s.cfg.Clock.Now()
	pauses, err := s.cfg.Store.AgentPauses(r.Context())
	if err != nil {
		s.fail(w, http.StatusBadGateway, err)
		return
	}
	var steps []StepView
	for _, st := range v.Steps {
		sv := StepView{StepRecord: st, Key: sas.IdempotencyKey(v.Order.OrderID, st.Step, st.Generation, false),
			UndoKey: sas.IdempotencyKey(v.Order.OrderID, st.Step, st.Generation, true), Waited: !st.WaitingSince.IsZero()}
		var ready, claimed time.Time
		for _, h := range st.History {
			switch {
			case h.To == sas.Pending && h.From == "" && st.Step > 0:
				ready = time.Time{} // waits on the step before it: ready when that one is done
			case h.To == sas.Pending:
				ready = h.At
			case h.To == sas.Processing:
				if ready.IsZero() && st.Step > 0 {
					ready = doneAt(v.Steps[st.Step-1], h.At)
				}
				claimed = h.At
				if !ready.IsZero() {
					sv.PickupWait = h.At.Sub(ready)
				}
				ready = time.Time{}
			case (h.To == sas.Processed || h.To == sas.Error) && !claimed.IsZero():
				sv.InFlight = h.At.Sub(claimed)
			}
			if ranOutcome(h) {
				sv.Run = sas.RunTiming{}
				if h.Attempt == st.Attempt {
					sv.Run = h.Run
				}
			}
		}
		if st.ProcessState != sas.Processed && st.ProcessState != sas.Compensated {
			for _, a := range s.cfg.StepAgents[st.StepName] {
				if pauses.Paused(a) {
					sv.PausedAgent = a
				}
			}
		}
		if st.ProcessState == sas.Processing && !claimed.IsZero() {
			sv.InFlight = now.Sub(claimed)
		}
		if v.Order.After != nil {
			sv.Follows = v.Follows(st.Step)
		}
		if v.IsFanOut(st) {
			elements, err := sas.AllElements(r.Context(), s.cfg.Store, st.Key())
			if err != nil {
				s.fail(w, http.StatusBadGateway, err)
				return
			}
			fo := &FanOutView{Done: st.ForEachDone, Total: st.ForEachCount, States: sasctl.ElementStates(elements)}
			for _, e := range elements {
				_, i := sas.ElementOf(e.Step)
				fo.Elements = append(fo.Elements, ElementView{StepRecord: e, Index: i, Key: sas.IdempotencyKey(v.Order.OrderID, e.Step, e.Generation, false)})
			}
			sv.FanOut = fo
		}
		steps = append(steps, sv)
	}
	// The undo chain: undos run newest step first (in a graph, newest
	// completion first: sas.NewestFirst); shown in that order.
	var undos []UndoView
	chain := slices.Clone(v.Steps)
	if v.Order.After != nil {
		sas.NewestFirst(chain)
	} else {
		slices.Reverse(chain)
	}
	for _, st := range chain {
		switch st.ProcessState {
		case sas.Compensating, sas.Compensated, sas.CompensationFailed:
			u := UndoView{Step: st.Step, Name: st.StepName, State: st.ProcessState, Key: sas.IdempotencyKey(v.Order.OrderID, st.Step, st.Generation, true)}
			for _, h := range st.History {
				if h.To == st.ProcessState {
					u.At = h.At
				}
			}
			undos = append(undos, u)
		}
	}
	payload := string(v.Order.Payload)
	size := len(payload)
	cut := size > payloadCut
	if cut {
		payload = payload[:payloadCut]
	}
	history := slices.Clone(v.History)
	slices.Reverse(history) // newest first
	s.render(w, "order", "Order "+v.Order.OrderID, true, struct {
		View        sas.OrderView
		State       sas.ProcessState
		Steps       []StepView
		Undos       []UndoView
		History     []sas.HistoryEntry
		Statuses    []StatusView
		Payload     string
		PayloadSize int
		PayloadCut  bool
		Resubmit    bool
	}{v, v.State(), steps, undos, history, statuses(v), payload, size, cut, v.State() == sas.Error})
}

// statuses are the status messages the scheduler posts for the order's
// transitions (docs/protocol.md): read from the history, because the
// status queue is the caller's to consume.
func statuses(v sas.OrderView) []StatusView {
	var out []StatusView
	last := len(v.Order.Steps) - 1
	for _, h := range v.History {
		switch {
		case h.From == "" && h.Step == 0:
			out = append(out, StatusView{At: h.At, Status: "received"})
		case h.To == sas.Processed:
			out = append(out, StatusView{At: h.At, Status: "step-done", Step: stepName(v, h.Step)})
			if h.Step == last {
				out = append(out, StatusView{At: h.At, Status: "processed"})
			}
		case h.To == sas.Error && !rejected(v, h.Step):
			out = append(out, StatusView{At: h.At, Status: "failed", Step: stepName(v, h.Step), Reason: h.Reason})
		}
	}
	if v.State() == sas.Compensated && len(v.History) > 0 {
		out = append(out, StatusView{At: v.History[len(v.History)-1].At, Status: "compensated"})
	}
	if v.State() == sas.Rejected && len(v.History) > 0 {
		// A rejection is told once the order ends, naming the step.
		for _, r := range v.Steps {
			if r.Rejected {
				out = append(out, StatusView{At: v.History[len(v.History)-1].At, Status: "rejected", Step: stepName(v, r.Step), Reason: r.LastError})
			}
		}
	}
	return out
}

// rejected reports whether step i of v was refused as a business outcome.
func rejected(v sas.OrderView, i int) bool {
	return i >= 0 && i < len(v.Steps) && v.Steps[i].Rejected
}

func stepName(v sas.OrderView, i int) string {
	if i >= 0 && i < len(v.Order.Steps) {
		return v.Order.Steps[i]
	}
	return strconv.Itoa(i)
}

// ranOutcome reports whether h ends an attempt that was running (done,
// failed, handed back or given up): the entries that may carry what the
// agent measured of the run (sas.HistoryEntry.Run). A wait keeps the
// state and is not one.
func ranOutcome(h sas.HistoryEntry) bool {
	return (h.From == sas.Processing || h.From == sas.Compensating) && h.To != h.From
}

// doneAt is when step r last went Processed at or before t.
func doneAt(r sas.StepRecord, t time.Time) time.Time {
	var at time.Time
	for _, h := range r.History {
		if h.To == sas.Processed && !h.At.After(t) {
			at = h.At
		}
	}
	return at
}

// orderHref is an order page's address: /orders/<id>, escaped, for an id
// that survives the router's path cleaning; /order?id=<id> for one that
// does not ("." and "..", or an id with a slash, are valid order ids, and
// "/orders/.." would be cleaned to "/").
func orderHref(id string) string {
	if p := "/orders/" + id; id != "" && !strings.Contains(id, "/") && path.Clean(p) == p {
		return "/orders/" + url.PathEscape(id)
	}
	return "/order?id=" + url.QueryEscape(id)
}
