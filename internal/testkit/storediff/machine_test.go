package storediff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

var ctx = context.Background()

// t0 is the fake clock's start: millisecond-aligned, as a tick may not be.
var t0 = clocktest.T0

// The orders a sequence may create, and a few that never exist.
var (
	ids     = []string{"o-1", "o-2", "o-3"}
	owners  = []string{"sched-a", "sched-b"}
	missing = []sas.StepKey{{OrderID: "o-none", Step: 0}, {OrderID: "o-1", Step: 7}}
	defs    = []sas.Workflow{
		{Name: "trip", Steps: []sas.StepDef{{Name: "reserve", Agent: "shop", Undo: "release", Timeout: 10 * time.Second}}},
		{Name: "trip", Steps: []sas.StepDef{{Name: "reserve", Agent: "shop", Timeout: 20 * time.Second, MaxFailures: 3}}},
	}
)

// op is one StateStore call, its parameters drawn once and applied to both
// stores. side is 0 for the in-memory store and 1 for DynamoDB, for the
// one parameter that differs between them (a ListByState cursor).
type op struct {
	name, desc string
	orders     []string // orders whose records the call may write
	apply      func(s sas.StateStore, side int) (any, error)
}

// machine is one sequence: both stores, the fake clock, and every version
// of every record seen so far (the views stale writers act on).
type machine struct {
	stores  [2]sas.StateStore
	now     time.Time
	steps   map[string]int // order id → steps, for the orders that exist
	snaps   map[sas.StepKey][]sas.StepRecord
	cursors map[sas.ProcessState][2]string
	touched []string
	ops     *int // operations applied, across sequences
}

func newMachine(mem, dyn sas.StateStore, ops *int) *machine {
	return &machine{stores: [2]sas.StateStore{mem, dyn}, now: t0, steps: map[string]int{}, ops: ops,
		snaps: map[sas.StepKey][]sas.StepRecord{}, cursors: map[sas.ProcessState][2]string{}}
}

func (m *machine) actions() map[string]func(*rapid.T) {
	writes := m.writes()
	acts := map[string]func(*rapid.T){
		"": m.check,
		"tick": func(t *rapid.T) {
			d := time.Duration(rapid.IntRange(0, 90).Draw(t, "tickSeconds")) * time.Second
			if rapid.IntRange(0, 3).Draw(t, "subMillisecond") == 3 {
				d += 500 * time.Microsecond // the system clock is not millisecond-aligned
			}
			m.now = m.now.Add(d)
			t.Logf("tick +%s → %s", d, m.now.Format(time.RFC3339Nano))
		},
		"ambiguous": func(t *rapid.T) {
			names := make([]string, 0, len(writes))
			for n := range writes {
				names = append(names, n)
			}
			slices.Sort(names)
			o := writes[rapid.SampledFrom(names).Draw(t, "ambiguousOp")](t)
			m.do(t, o, true)
		},
	}
	for name, build := range writes {
		acts[name] = func(t *rapid.T) { m.do(t, build(t), false) }
	}
	for name, build := range m.scheduleReads() {
		acts[name] = func(t *rapid.T) { m.do(t, build(t), false) }
	}
	for name, build := range m.reads() {
		acts[name] = func(t *rapid.T) { m.do(t, build(t), false) }
	}
	return acts
}

// do applies o to both stores (through Ambiguous when ambiguous) and
// requires the same answer, and from each store alone: a returned record
// equals what the store then holds, and a lost race's Current is the record
// as it is stored (the test is sequential, so nothing moved it since).
func (m *machine) do(t *rapid.T, o op, ambiguous bool) {
	*m.ops++
	var got [2][]string
	for side, s := range m.stores {
		if ambiguous {
			s = Ambiguous{s}
		}
		v, err := o.apply(s, side)
		got[side] = render(v, err)
		m.requireWhole(t, side, o, v, err)
	}
	tag := o.name
	if ambiguous {
		tag = "ambiguous " + tag
	}
	t.Logf("%s %s → %s", tag, o.desc, outcome(got[0]))
	for side := range got {
		if last := got[side][len(got[side])-1]; strings.HasPrefix(last, "error: unexpected") {
			t.Fatalf("%s: %s store: %s", tag, storeName(side), last)
		}
	}
	if !slices.Equal(got[0], got[1]) {
		t.Fatalf("%s %s: the stores answer differently:%s", tag, o.desc, diff(got[0], got[1]))
	}
	m.touched = o.orders
	// Every call at its own instant: DynamoDB leaves the order of index
	// entries with equal times undefined, so ties would make the stores
	// page differently without either being wrong.
	m.now = m.now.Add(time.Millisecond)
}

func storeName(side int) string { return [2]string{"memory", "dynamodb"}[side] }

// requireWhole: every record a write returns, and the Current of every
// lost race, is the whole record the store then holds.
func (m *machine) requireWhole(t *rapid.T, side int, o op, v any, err error) {
	var recs []sas.StepRecord
	var re *sas.RaceError
	switch {
	case errors.As(err, &re) && re.Current != nil:
		recs = []sas.StepRecord{*re.Current}
	case err != nil:
	case len(o.orders) == 0: // a read: FindDue and the like return projections
	default:
		switch v := v.(type) {
		case sas.StepRecord:
			recs = []sas.StepRecord{v}
		case []sas.StepRecord:
			recs = v
		case sas.SubmitResult:
			recs = v.View.Steps
		}
	}
	for _, r := range recs {
		held, gerr := m.stores[side].GetStep(ctx, r.Key())
		if gerr != nil {
			t.Fatalf("%s: %s store: reading back %s: %v", o.name, storeName(side), r.Key(), gerr)
		}
		if a, b := render(r, nil), render(held, nil); !slices.Equal(a, b) {
			t.Fatalf("%s %s: %s store returned a record that is not what it holds:%s",
				o.name, o.desc, storeName(side), strings.NewReplacer("memory ", "returned ", "dynamodb ", "held ").Replace(diff(a, b)))
		}
	}
}

// check compares what both stores hold of the orders the last call touched
// (every field of every record), and records the versions seen.
func (m *machine) check(t *rapid.T) {
	for _, id := range m.touched {
		var got [2][]string
		var mem sas.OrderView
		for side, s := range m.stores {
			v, err := s.GetOrder(ctx, id)
			got[side] = render(v, err)
			if side == 0 && err == nil {
				mem = v
			}
		}
		if !slices.Equal(got[0], got[1]) {
			t.Fatalf("order %s: the stores hold different records:%s", id, diff(got[0], got[1]))
		}
		if len(mem.Steps) > 0 {
			m.steps[id] = len(mem.Steps)
		}
		for _, r := range mem.Steps {
			s := m.snaps[r.Key()]
			if len(s) == 0 || !slices.Equal(render(s[len(s)-1], nil), render(r, nil)) {
				m.snaps[r.Key()] = append(s, r)
			}
		}
		m.checkElements(t, id) // fanout_test.go
	}
	m.touched = nil
}

// outcome is a one-line summary of an answer for the sequence's log.
func outcome(lines []string) string {
	last := lines[len(lines)-1]
	if last != "error: none" {
		for _, l := range lines {
			if strings.HasPrefix(l, "error:") {
				return strings.TrimPrefix(l, "error: ")
			}
		}
	}
	var parts []string
	for _, l := range lines {
		if i := strings.Index(l, "ProcessState: "); i >= 0 && !strings.Contains(l, "History") {
			parts = append(parts, l[i+len("ProcessState: "):])
		}
	}
	if len(parts) == 0 {
		return "ok"
	}
	return "ok " + strings.Join(parts, ",")
}

// cur is the record as it is now (the stores agree on it), zero if none.
func (m *machine) cur(k sas.StepKey) sas.StepRecord {
	r, err := m.stores[0].GetStep(ctx, k)
	if err != nil {
		return sas.StepRecord{OrderID: k.OrderID, Step: k.Step}
	}
	return r
}

// key picks a step: mostly one whose state lets the call apply, some of
// any state, and now and then one that does not exist.
func (m *machine) key(t *rapid.T, want ...sas.ProcessState) sas.StepKey {
	var fit, all []sas.StepKey
	for _, id := range ids {
		for i := 0; i < m.steps[id]; i++ {
			k := sas.StepKey{OrderID: id, Step: i}
			all = append(all, k)
			if slices.Contains(want, m.cur(k).ProcessState) {
				fit = append(fit, k)
			}
		}
	}
	for _, k := range m.elementKeys() { // fanout_test.go
		all = append(all, k)
		if slices.Contains(want, m.cur(k).ProcessState) {
			fit = append(fit, k)
		}
	}
	switch kind := rapid.IntRange(0, 9).Draw(t, "keyKind"); {
	case kind == 9 || len(all) == 0:
		return rapid.SampledFrom(missing).Draw(t, "missingKey")
	case kind >= 7 || len(fit) == 0:
		return rapid.SampledFrom(all).Draw(t, "anyKey")
	default:
		return rapid.SampledFrom(fit).Draw(t, "key")
	}
}

// seen is the record as a writer saw it: mostly as it is (the write is
// plausible and often wins), sometimes an earlier version (a stale
// writer), sometimes with one field off.
func (m *machine) seen(t *rapid.T, k sas.StepKey) sas.StepRecord {
	r := m.cur(k)
	switch rapid.IntRange(0, 9).Draw(t, "view") {
	case 7, 8:
		if s := m.snaps[k]; len(s) > 1 {
			return s[rapid.IntRange(0, len(s)-2).Draw(t, "staleVersion")]
		}
	case 9:
		switch rapid.IntRange(0, 3).Draw(t, "offField") {
		case 0:
			r.Attempt += rapid.SampledFrom([]int{1, -1}).Draw(t, "attemptOff")
		case 1:
			r.LockedBy = rapid.SampledFrom(append([]string{""}, owners...)).Draw(t, "holderOff")
		case 2:
			r.ProcessState = rapid.SampledFrom(sas.States).Draw(t, "stateOff")
		case 3:
			if r.WaitingSince.IsZero() {
				r.WaitingSince = r.DueAt
			} else {
				r.WaitingSince = time.Time{}
			}
		}
	}
	return r
}

// deadline is a time after now, or now itself (invalid) one time in twenty.
func (m *machine) deadline(t *rapid.T, label string) time.Time {
	s := rapid.IntRange(1, 20).Draw(t, label)
	if s == 20 {
		return m.now
	}
	return m.now.Add(time.Duration(s) * 3 * time.Second)
}

func owner(t *rapid.T, label string) string { return rapid.SampledFrom(owners).Draw(t, label) }

func one(f func() (sas.StepRecord, error)) (any, error) { return f() }

func (m *machine) writes() map[string]func(*rapid.T) op {
	w := m.baseWrites()
	for name, build := range m.scheduleWrites() { // schedule_test.go
		w[name] = build
	}
	for name, build := range m.fanOutWrites() { // fanout_test.go
		w[name] = build
	}
	return w
}

func (m *machine) baseWrites() map[string]func(*rapid.T) op {
	return map[string]func(*rapid.T) op{
		"submit": func(t *rapid.T) op {
			id := rapid.SampledFrom(ids).Draw(t, "order")
			n := rapid.IntRange(1, 3).Draw(t, "steps")
			o := sas.Order{OrderID: id, Workflow: "trip", Version: rapid.SampledFrom([]string{"", "v1"}).Draw(t, "version")}
			if pl := rapid.SampledFrom([]string{"", `{"amount":1}`, `{"amount":2}`}).Draw(t, "payload"); pl != "" {
				o.Payload = []byte(pl)
			}
			for i := 0; i < n; i++ {
				o.Steps = append(o.Steps, fmt.Sprintf("step%d", i))
			}
			if n > 1 && rapid.Bool().Draw(t, "graph") {
				// Branches: every later step follows the first (the graph
				// the order records, sas.Order.After).
				o.After = [][]int{{}}
				for i := 1; i < n; i++ {
					o.After = append(o.After, []int{0})
				}
			}
			p := sas.SubmitParams{Order: o, Now: m.now, PickupBy: m.deadline(t, "pickupBy")}
			if rapid.Bool().Draw(t, "claimFirst") {
				p.Claim = &sas.ClaimParams{Owner: owner(t, "owner"), CompleteBy: m.deadline(t, "completeBy")}
			}
			return op{name: "Submit", desc: fmt.Sprintf("%s steps=%d payload=%s claim=%v", id, n, o.Payload, p.Claim != nil), orders: []string{id},
				apply: func(s sas.StateStore, _ int) (any, error) { return s.Submit(ctx, p) }}
		},
		"claim": func(t *rapid.T) op {
			k := m.key(t, sas.Pending, sas.Processed, sas.Error, sas.CompensationFailed, sas.Compensating)
			r := m.seen(t, k)
			p := sas.ClaimParams{Key: k, From: r.ProcessState, Attempt: r.Attempt, Owner: owner(t, "owner"), Now: m.now, CompleteBy: m.deadline(t, "completeBy")}
			if rapid.Bool().Draw(t, "withSiblings") {
				// A compensation's claim, fenced on the other steps: mostly
				// as they are, now and then one seen in another state.
				for i := 0; i < m.steps[k.OrderID]; i++ {
					if i == k.Step || (p.From == sas.Pending && sas.IsElement(k.Step) && i == sas.StepOf(k.Step)) {
						continue // an element's next attempt is fenced on its fan-out already (sas.ClaimParams.Fences)
					}
					seen := m.cur(sas.StepKey{OrderID: k.OrderID, Step: i}).ProcessState
					if seen == "" || rapid.IntRange(0, 4).Draw(t, "siblingStale") == 4 {
						seen = rapid.SampledFrom([]sas.ProcessState{sas.Pending, sas.Processed, sas.Error, sas.Compensating}).Draw(t, "siblingSeen")
					}
					p.Siblings = append(p.Siblings, sas.StepSeen{Step: i, State: seen})
				}
			}
			return op{name: "Claim", desc: fmt.Sprintf("%s from=%s attempt=%d owner=%s siblings=%v", k, p.From, p.Attempt, p.Owner, p.Siblings), orders: []string{k.OrderID},
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.Claim(ctx, p) })
				}}
		},
		"complete": func(t *rapid.T) op {
			k := m.key(t, sas.Processing, sas.Compensating)
			r := m.seen(t, k)
			p := sas.CompleteParams{Key: k, Owner: r.LockedBy, Attempt: r.Attempt, Now: m.now, Compensation: r.ProcessState == sas.Compensating,
				// A result, none, or one an undo reports (never recorded).
				Result: json.RawMessage(rapid.SampledFrom([]string{"", `{"bookingId":"B-7"}`, `"ok"`}).Draw(t, "result"))}
			if len(p.Result) == 0 {
				p.Result = nil
			}
			// Now and then the end of a wait step: fenced on its deadline too.
			p.Elapsed = !p.Compensation && rapid.IntRange(0, 3).Draw(t, "elapsed") == 3
			// Now and then a holder that knows its order was cancelled.
			p.Cancelled = rapid.IntRange(0, 3).Draw(t, "knowsCancel") == 3
			desc := fmt.Sprintf("%s owner=%s attempt=%d compensation=%v result=%s elapsed=%v cancelled=%v", k, p.Owner, p.Attempt, p.Compensation, p.Result, p.Elapsed, p.Cancelled)
			orders := []string{k.OrderID}
			switch {
			case !p.Compensation && rapid.IntRange(0, 3).Draw(t, "graph") == 3:
				// Choices in a graph: skips of any steps of the order (those
				// the completion made ready, wherever they stand), a lone
				// one now and then failed by its condition.
				p.Graph = true
				for i := 0; i < m.steps[k.OrderID]; i++ {
					if i != k.Step && rapid.IntRange(0, 2).Draw(t, "graphSkip") == 2 {
						p.Skip = append(p.Skip, sas.Skip{Step: i, Reason: fmt.Sprintf("skipped %d", i)})
					}
				}
				if len(p.Skip) == 1 && rapid.Bool().Draw(t, "skipFailed") {
					p.Skip[0].Failed = true
				}
				desc += fmt.Sprintf(" graph skip=%v", p.Skip)
			case !p.Compensation:
				// Choices: the steps after it that its order passes over,
				// the last one now and then failed by its condition.
				last := k.Step + rapid.IntRange(0, 2).Draw(t, "skips")
				for i := k.Step + 1; i < m.steps[k.OrderID] && i <= last; i++ {
					p.Skip = append(p.Skip, sas.Skip{Step: i, Reason: fmt.Sprintf("skipped %d", i)})
				}
				if n := len(p.Skip); n > 0 && rapid.Bool().Draw(t, "skipFailed") {
					p.Skip[n-1].Failed = true
				}
				desc += fmt.Sprintf(" skip=%v", p.Skip)
			}
			if rapid.Bool().Draw(t, "withNext") {
				// The next step forward (after any skipped), or the previous
				// one's undo (the chained undo); now and then any step.
				nk := sas.StepKey{OrderID: k.OrderID, Step: k.Step + 1 + len(p.Skip)}
				if p.Compensation {
					nk.Step = k.Step - 1
				}
				if rapid.IntRange(0, 9).Draw(t, "nextKind") == 9 {
					nk = m.key(t, sas.Pending, sas.Processed, sas.Error)
				}
				nr := m.seen(t, nk)
				p.Next = &sas.ClaimParams{Key: nk, From: nr.ProcessState, Attempt: nr.Attempt, Owner: owner(t, "nextOwner"), Now: m.now, CompleteBy: m.deadline(t, "nextCompleteBy")}
				desc += fmt.Sprintf(" next=%s from=%s attempt=%d", nk, nr.ProcessState, nr.Attempt)
				orders = append(orders, nk.OrderID)
				if mk := (sas.StepKey{OrderID: k.OrderID, Step: k.Step + 2}); !p.Compensation && mk.Step < m.steps[k.OrderID] && rapid.Bool().Draw(t, "withMore") {
					// A second branch started by the same completion.
					mr := m.seen(t, mk)
					p.More = []sas.ClaimParams{{Key: mk, From: mr.ProcessState, Attempt: mr.Attempt, Owner: owner(t, "moreOwner"), Now: m.now, CompleteBy: m.deadline(t, "moreCompleteBy")}}
					desc += fmt.Sprintf(" more=%s from=%s attempt=%d", mk, mr.ProcessState, mr.Attempt)
				}
			}
			if rapid.IntRange(0, 3).Draw(t, "withSiblings") == 3 {
				// A graph's fence: the other steps mostly as they are, now
				// and then one seen in another state.
				claimed := map[int]bool{k.Step: true}
				for _, c := range p.Claims() {
					if c.Key.OrderID == k.OrderID {
						claimed[c.Key.Step] = true
					}
				}
				for i := 0; i < m.steps[k.OrderID]; i++ {
					if claimed[i] {
						continue
					}
					seen := m.cur(sas.StepKey{OrderID: k.OrderID, Step: i}).ProcessState
					if seen == "" || rapid.IntRange(0, 4).Draw(t, "siblingStale") == 4 {
						seen = rapid.SampledFrom([]sas.ProcessState{sas.Pending, sas.Processing, sas.Processed, sas.Error}).Draw(t, "siblingSeen")
					}
					p.Siblings = append(p.Siblings, sas.StepSeen{Step: i, State: seen})
				}
				desc += fmt.Sprintf(" siblings=%v", p.Siblings)
			}
			return op{name: "Complete", desc: desc, orders: orders,
				apply: func(s sas.StateStore, _ int) (any, error) { return s.Complete(ctx, p) }}
		},
		"fail": func(t *rapid.T) op {
			k := m.key(t, sas.Processing, sas.Compensating)
			r := m.seen(t, k)
			p := sas.FailParams{Key: k, Owner: r.LockedBy, Attempt: r.Attempt, Now: m.now, Compensation: r.ProcessState == sas.Compensating,
				Reason: rapid.SampledFrom([]string{"declined", ""}).Draw(t, "reason")}
			switch rapid.IntRange(0, 3).Draw(t, "failKind") {
			case 1:
				p.Rejected = true // a business rejection
			case 2:
				p.Effect = true // a result over the bounds
			}
			return op{name: "Fail", desc: fmt.Sprintf("%s owner=%s attempt=%d compensation=%v rejected=%v effect=%v", k, p.Owner, p.Attempt, p.Compensation, p.Rejected, p.Effect), orders: []string{k.OrderID},
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.Fail(ctx, p) })
				}}
		},
		"rescue": func(t *rapid.T) op {
			k := m.key(t, sas.Pending, sas.Processing, sas.Compensating)
			r := m.seen(t, k)
			p := sas.RescueParams{Key: k, From: r.ProcessState, Attempt: r.Attempt, Now: m.now, PickupBy: m.deadline(t, "pickupBy"), Actor: "sup", Reason: "deadline passed",
				Lost: rapid.IntRange(0, 3).Draw(t, "lost") == 0}
			if p.Lost && r.LockedBy == "" && rapid.Bool().Draw(t, "unclaimed") {
				p.WaitingSince = r.WaitingSince // a step never claimed keeps how long it has waited
				if p.WaitingSince.IsZero() {
					p.WaitingSince = m.now
				}
			}
			return op{name: "Rescue", desc: fmt.Sprintf("%s from=%s attempt=%d lost=%v waitingSince=%s", k, p.From, p.Attempt, p.Lost, p.WaitingSince.Format(time.RFC3339)), orders: []string{k.OrderID},
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.Rescue(ctx, p) })
				}}
		},
		"giveUp": func(t *rapid.T) op {
			k := m.key(t, sas.Pending, sas.Processing, sas.Compensating)
			r := m.seen(t, k)
			p := sas.GiveUpParams{Key: k, From: r.ProcessState, Attempt: r.Attempt, Now: m.now, Actor: "sup", Reason: "threshold"}
			if rapid.Bool().Draw(t, "owedLater") {
				p.OwedAt = m.now.Add(30 * time.Second)
			}
			return op{name: "GiveUp", desc: fmt.Sprintf("%s from=%s attempt=%d", k, p.From, p.Attempt), orders: []string{k.OrderID},
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.GiveUp(ctx, p) })
				}}
		},
		"wait": func(t *rapid.T) op {
			k := m.key(t, sas.Processing, sas.Compensating)
			r := m.seen(t, k)
			p := sas.WaitParams{Key: k, From: r.ProcessState, Owner: r.LockedBy, Attempt: r.Attempt, DueAt: r.DueAt, WaitingSince: r.WaitingSince,
				Now: m.now, Until: m.deadline(t, "until"), Actor: "sup", Reason: "agent queue busy"}
			return op{name: "Wait", desc: fmt.Sprintf("%s from=%s owner=%s attempt=%d waitingSince=%v", k, p.From, p.Owner, p.Attempt, !p.WaitingSince.IsZero()), orders: []string{k.OrderID},
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.Wait(ctx, p) })
				}}
		},
		"start": func(t *rapid.T) op {
			k := m.key(t, sas.Processing, sas.Compensating)
			r := m.seen(t, k)
			p := sas.StartParams{Key: k, From: r.ProcessState, Owner: r.LockedBy, Attempt: r.Attempt, Now: m.now, CompleteBy: m.deadline(t, "completeBy")}
			return op{name: "Start", desc: fmt.Sprintf("%s from=%s owner=%s attempt=%d", k, p.From, p.Owner, p.Attempt), orders: []string{k.OrderID},
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.Start(ctx, p) })
				}}
		},
		"heartbeat": func(t *rapid.T) op {
			k := m.key(t, sas.Processing, sas.Compensating)
			r := m.seen(t, k)
			p := sas.HeartbeatParams{Key: k, Owner: r.LockedBy, Attempt: r.Attempt, Now: m.now, Until: m.deadline(t, "until")}
			return op{name: "Heartbeat", desc: fmt.Sprintf("%s owner=%s attempt=%d", k, p.Owner, p.Attempt), orders: []string{k.OrderID},
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.Heartbeat(ctx, p) })
				}}
		},
		"resubmit": func(t *rapid.T) op {
			k := m.key(t, sas.Error)
			r := m.seen(t, k)
			p := sas.ResubmitParams{Key: k, Attempt: r.Attempt, Now: m.now, PickupBy: m.deadline(t, "pickupBy"), Actor: "operator", Reason: "fixed"}
			return op{name: "Resubmit", desc: fmt.Sprintf("%s attempt=%d", k, p.Attempt), orders: []string{k.OrderID},
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.Resubmit(ctx, p) })
				}}
		},
		"noteEffect": func(t *rapid.T) op {
			k := m.key(t, sas.Pending, sas.Processing, sas.Error)
			r := m.seen(t, k)
			p := sas.NoteEffectParams{Key: k, State: r.ProcessState, Now: m.now, Actor: "sched", Attempt: max(r.Attempt-1, 0)}
			return op{name: "NoteEffect", desc: fmt.Sprintf("%s state=%s", k, p.State), orders: []string{k.OrderID},
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.NoteEffect(ctx, p) })
				}}
		},
		"settle": func(t *rapid.T) op {
			k := m.key(t, sas.Error, sas.CompensationFailed)
			r := m.seen(t, k)
			p := sas.SettleParams{Key: k, State: r.ProcessState, Attempt: r.Attempt}
			if rapid.Bool().Draw(t, "recheck") {
				// The supervisor's write once a compensate went out: still
				// owed, due again later (fenced on the due time as read).
				p.OwedAt, p.Recheck = r.OwedAt, m.now.Add(15*time.Minute)
			}
			return op{name: "Settle", desc: fmt.Sprintf("%s state=%s attempt=%d recheck=%v", k, p.State, p.Attempt, !p.Recheck.IsZero()), orders: []string{k.OrderID},
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.Settle(ctx, p) })
				}}
		},
		"cancel": func(t *rapid.T) op {
			k := m.key(t, sas.Pending, sas.Processing)
			r := m.seen(t, k)
			from := r.ProcessState
			if from != sas.Pending && from != sas.Processing {
				from = rapid.SampledFrom([]sas.ProcessState{sas.Pending, sas.Processing}).Draw(t, "cancelFrom")
			}
			p := sas.CancelParams{Key: k, From: from, Attempt: r.Attempt, Now: m.now, Actor: "submitter:s", Reason: "changed my mind"}
			return op{name: "Cancel", desc: fmt.Sprintf("%s from=%s attempt=%d", k, p.From, p.Attempt), orders: []string{k.OrderID},
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.Cancel(ctx, p) })
				}}
		},
		"putDefinition": func(t *rapid.T) op {
			i := rapid.IntRange(0, len(defs)-1).Draw(t, "definition")
			return op{name: "PutDefinition", desc: defs[i].Version(),
				apply: func(s sas.StateStore, _ int) (any, error) { return nil, s.PutDefinition(ctx, defs[i]) }}
		},
	}
}

func (m *machine) reads() map[string]func(*rapid.T) op {
	limit := func(t *rapid.T) int { return rapid.IntRange(0, 3).Draw(t, "limit") }
	return map[string]func(*rapid.T) op{
		"getStep": func(t *rapid.T) op {
			k := m.key(t)
			return op{name: "GetStep", desc: k.String(),
				apply: func(s sas.StateStore, _ int) (any, error) {
					return one(func() (sas.StepRecord, error) { return s.GetStep(ctx, k) })
				}}
		},
		"getOrder": func(t *rapid.T) op {
			id := rapid.SampledFrom(append(slices.Clone(ids), "o-none")).Draw(t, "order")
			return op{name: "GetOrder", desc: id,
				apply: func(s sas.StateStore, _ int) (any, error) { return s.GetOrder(ctx, id) }}
		},
		"getDefinition": func(t *rapid.T) op {
			w := defs[rapid.IntRange(0, len(defs)-1).Draw(t, "definition")]
			name := rapid.SampledFrom([]string{w.Name, "other"}).Draw(t, "name")
			return op{name: "GetDefinition", desc: name + " " + w.Version(),
				apply: func(s sas.StateStore, _ int) (any, error) { return s.GetDefinition(ctx, name, w.Version()) }}
		},
		"findDue": func(t *rapid.T) op {
			p := sas.FindDueParams{State: rapid.SampledFrom([]sas.ProcessState{sas.Pending, sas.Processing, sas.Compensating, sas.Error}).Draw(t, "state"),
				Now: m.now, Limit: limit(t)}
			return op{name: "FindDue", desc: fmt.Sprintf("%s limit=%d", p.State, p.Limit),
				apply: func(s sas.StateStore, _ int) (any, error) { return s.FindDue(ctx, p) }}
		},
		"findOwed": func(t *rapid.T) op {
			p := sas.FindOwedParams{Now: m.now, Limit: limit(t)}
			return op{name: "FindOwed", desc: fmt.Sprintf("limit=%d", p.Limit),
				apply: func(s sas.StateStore, _ int) (any, error) { return s.FindOwed(ctx, p) }}
		},
		"listByState": func(t *rapid.T) op {
			state := rapid.SampledFrom(sas.States).Draw(t, "state")
			n := limit(t)
			resume := rapid.Bool().Draw(t, "nextPage")
			return op{name: "ListByState", desc: fmt.Sprintf("%s limit=%d nextPage=%v", state, n, resume),
				apply: func(s sas.StateStore, side int) (any, error) {
					p := sas.ListByStateParams{State: state, Limit: n}
					if resume {
						p.Cursor = m.cursors[state][side]
					}
					res, err := s.ListByState(ctx, p)
					c := m.cursors[state]
					c[side] = res.NextCursor
					m.cursors[state] = c
					return res, err
				}}
		},
	}
}
