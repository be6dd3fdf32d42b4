package storediff

import (
	"encoding/json"
	"fmt"
	"slices"

	"pgregory.net/rapid"

	"github.com/sas-go/sas/internal/sas"
)

// Fan-out's elements (docs/decisions.md, "Fan-out elements are records of
// their own"): StartFanOut and CompleteElement beside every other write,
// and the elements themselves among the keys every write may draw (key), so
// the failure and undo of a fan-out (Fail, Cancel, Claim, Complete, Rescue,
// GiveUp on an element's record) are compared too. check compares each
// step's elements as ListElements reads them.

// elements are the element records of step k of the in-memory store, in
// index order.
func (m *machine) elements(k sas.StepKey) []sas.StepRecord {
	fs, ok := m.stores[0].(sas.FanOutStore)
	if !ok {
		return nil
	}
	var out []sas.StepRecord
	cursor := ""
	for {
		page, err := fs.ListElements(ctx, sas.ListElementsParams{Key: k, Cursor: cursor})
		if err != nil {
			return out
		}
		out = append(out, page.Records...)
		if cursor = page.NextCursor; cursor == "" {
			return out
		}
	}
}

// elementKeys are the keys of every element that exists.
func (m *machine) elementKeys() []sas.StepKey {
	var out []sas.StepKey
	for _, id := range ids {
		for i := 0; i < m.steps[id]; i++ {
			for _, e := range m.elements(sas.StepKey{OrderID: id, Step: i}) {
				out = append(out, e.Key())
			}
		}
	}
	return out
}

// listAll reads every element of step k from s, a page of limit at a time.
func listAll(s sas.StateStore, k sas.StepKey, limit int) ([]sas.StepRecord, error) {
	fs, ok := s.(sas.FanOutStore)
	if !ok {
		return nil, fmt.Errorf("%T keeps no fan-out elements", s)
	}
	var out []sas.StepRecord
	cursor := ""
	for range sas.MaxForEach {
		page, err := fs.ListElements(ctx, sas.ListElementsParams{Key: k, Limit: limit, Cursor: cursor})
		if err != nil {
			return out, err
		}
		out = append(out, page.Records...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	return out, nil
}

// checkElements compares the elements both stores hold of order id, and
// records the versions seen.
func (m *machine) checkElements(t *rapid.T, id string) {
	for i := 0; i < m.steps[id]; i++ {
		k := sas.StepKey{OrderID: id, Step: i}
		var got [2][]string
		var mem []sas.StepRecord
		for side, s := range m.stores {
			recs, err := listAll(s, k, 2)
			got[side] = render(recs, err)
			if side == 0 {
				mem = recs
			}
		}
		if !slices.Equal(got[0], got[1]) {
			t.Fatalf("the elements of step %s: the stores hold different records:%s", k, diff(got[0], got[1]))
		}
		for _, r := range mem {
			s := m.snaps[r.Key()]
			if len(s) == 0 || !slices.Equal(render(s[len(s)-1], nil), render(r, nil)) {
				m.snaps[r.Key()] = append(s, r)
			}
		}
	}
}

func (m *machine) fanOutWrites() map[string]func(*rapid.T) op {
	item := func(i int) json.RawMessage { return json.RawMessage(fmt.Sprintf(`{"line":%d}`, i)) }
	return map[string]func(*rapid.T) op{
		"startFanOut": func(t *rapid.T) op {
			k := m.stepKey(t, sas.Processing)
			r := m.seen(t, k)
			count := rapid.IntRange(0, 5).Draw(t, "count") // 0: refused, named
			window := rapid.IntRange(1, 3).Draw(t, "window")
			p := sas.StartFanOutParams{Key: k, Owner: r.LockedBy, Attempt: r.Attempt, Now: m.now, Count: count, StepName: fmt.Sprintf("step%d", k.Step)}
			for i := range min(window, max(count, 1)) {
				p.Claims = append(p.Claims, sas.ElementClaim{Index: i, Item: item(i), CompleteBy: m.deadline(t, "elementCompleteBy")})
			}
			return op{name: "StartFanOut", desc: fmt.Sprintf("%s owner=%s attempt=%d count=%d window=%d", k, p.Owner, p.Attempt, count, len(p.Claims)),
				orders: []string{k.OrderID},
				apply:  func(s sas.StateStore, _ int) (any, error) { return s.(sas.FanOutStore).StartFanOut(ctx, p) }}
		},
		"completeElement": func(t *rapid.T) op {
			var k sas.StepKey
			if keys := m.elementKeys(); len(keys) > 0 {
				var fit []sas.StepKey
				for _, ek := range keys {
					if m.cur(ek).ProcessState == sas.Processing {
						fit = append(fit, ek)
					}
				}
				if len(fit) == 0 || rapid.IntRange(0, 4).Draw(t, "anyElement") == 4 {
					fit = keys
				}
				k = rapid.SampledFrom(fit).Draw(t, "element")
			} else {
				k = sas.StepKey{OrderID: rapid.SampledFrom(ids).Draw(t, "order"), Step: sas.ElementStep(0, 0)}
			}
			r := m.seen(t, k)
			step, index := sas.ElementOf(k.Step)
			p := sas.CompleteElementParams{Key: k, Owner: r.LockedBy, Attempt: r.Attempt, Now: m.now, StepName: fmt.Sprintf("step%d", step),
				Result: json.RawMessage(rapid.SampledFrom([]string{"", `{"held":1}`, `"ok"`}).Draw(t, "result"))}
			if len(p.Result) == 0 {
				p.Result = nil
			}
			if rapid.Bool().Draw(t, "withNext") {
				n := index + rapid.IntRange(1, 3).Draw(t, "nextOffset")
				p.Next = &sas.ElementClaim{Index: n, Item: item(n), CompleteBy: m.deadline(t, "nextCompleteBy")}
			}
			return op{name: "CompleteElement", desc: fmt.Sprintf("%s owner=%s attempt=%d result=%s next=%v", k, p.Owner, p.Attempt, p.Result, p.Next != nil),
				orders: []string{k.OrderID},
				apply:  func(s sas.StateStore, _ int) (any, error) { return s.(sas.FanOutStore).CompleteElement(ctx, p) }}
		},
	}
}

// stepKey is key among steps alone (no element).
func (m *machine) stepKey(t *rapid.T, want ...sas.ProcessState) sas.StepKey {
	for range 10 {
		if k := m.key(t, want...); !sas.IsElement(k.Step) {
			return k
		}
	}
	return rapid.SampledFrom(missing).Draw(t, "missingKey")
}
