package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
)

// Fan-out over a list (issue 27 §4, §6; docs/simulation.md, "Invariants").
// In a quarter of the seeds (Config.fanning) the trip's shipment runs once
// per line of the order (its forEach over payload.items, 0 to 30 lines,
// a window of 1 to 8 drawn from the seed), and an invoice follows it,
// seeing its results. The remote takes each element as an effect of its
// own, keyed by the element's idempotency key (<order>:<step>:i<index>),
// and answers it with its key and its item. Beside the rules that already
// hold elements ("effect not undone": every effect of a compensated order
// undone, elements' included; "results seen"; "lost work" for an
// element's request), these rules hold fan-out:
//   - "element twice": no element of a Processed order has an effect under
//     a key other than its own, nor misses its own (checkEffects), unless
//     an operator was told;
//   - "fan-out results": a step that follows a fan-out is called with its
//     result exactly the list of its elements' results, in index order,
//     and each element is called with its own item;
//   - "window exceeded": no write leaves more elements of one fan-out
//     claimed and unfinished than its concurrency;
//   - "element after failure": no element is claimed while its fan-out
//     step is not running (failed, cancelled or being undone);
//   - "undo before settled" (branches.go) counts elements in flight too.

// fanOutFailures says whether fan-out seeds run the whole fault mix
// (Config.FanOutFailures, on in every seed ForSeed draws): elements fail,
// are undone, rescued and cancelled. Off (sassim -fanout-failures=false),
// fan-out seeds are kept on the happy path: no remote fault, no clock
// jump, no cancel, no burst, no undo of the fan-out step. The planted bugs
// of its failure path turn it on whatever the configuration says.
func (c Config) fanOutFailures() bool { return c.FanOutFailures || c.failureSabotage() }

// Planted bugs of these rules (TestChecksCatchPlantedBugs).
const (
	// SabotageRekeyElement: an element's request delivered again is keyed
	// by its delivery (the key suffixed with the receive count), as a
	// scheduler that derived an element's key from its message would.
	SabotageRekeyElement = "rekey-element"
	// SabotageShuffleResults: the store's reads of a fan-out's elements
	// give the first two results swapped, as a read back that missed the
	// index order would.
	SabotageShuffleResults = "shuffle-results"
	// SabotageWideWindow: the store's start of a fan-out claims one element
	// more than the window, as a scheduler that read the concurrency off
	// by one would.
	SabotageWideWindow = "wide-window"
	// SabotageUnfencedElement: the store's claim of an element's next
	// attempt is not fenced on its fan-out running, and a mark of an
	// element in flight is answered as made and forgotten, as a store
	// without the fan-out's fence whose stop missed an element would: an
	// element handed back after its fan-out stopped is claimed again.
	SabotageUnfencedElement = "unfenced-element"
	// SabotageSkipElementUndo: the store's reads of a fan-out being undone
	// leave out its elements that completed, as a read filtered on the
	// wrong state would: the fan-out's undo passes over them.
	SabotageSkipElementUndo = "skip-element-undo"
)

// failureSabotage reports whether the run plants a bug of fan-out's
// failure path, which needs its whole mix.
func (c Config) failureSabotage() bool {
	return c.Sabotage == SabotageUnfencedElement || c.Sabotage == SabotageSkipElementUndo
}

// maxLines bounds the lines of one order.
const maxLines = 30

// fanning reports whether this run's trip fans out: when the configuration
// says so, for the sabotages of its rules, and in a quarter of the seeds
// besides (drawn from the seed apart from ForSeed's draws).
func (c Config) fanning() bool {
	if !c.fanOutFailures() && c.Burst > 0 {
		// A burst's agents time out on what they picked up late: an
		// element's transient outcome is the failure path.
		return false
	}
	switch {
	case c.FanOut, c.Sabotage == SabotageRekeyElement, c.Sabotage == SabotageShuffleResults, c.Sabotage == SabotageWideWindow, c.failureSabotage():
		return true
	}
	return splitmix(uint64(c.Seed)^0x6a09e667f3bcc909)%4 == 0
}

// withFanOut makes the trip's shipment a fan-out over the order's lines,
// with a window drawn from the seed, and adds an invoice after it, which
// sees its results.
func withFanOut(w sas.Workflow, seed int64, failures bool) sas.Workflow {
	steps := append([]sas.StepDef(nil), w.Steps...)
	at := slices.IndexFunc(steps, func(s sas.StepDef) bool { return s.Name == "ship" })
	if at < 0 {
		panic("sim: the trip has no ship step to fan out")
	}
	ship := steps[at]
	ship.ForEach = &sas.ForEach{Items: "payload.items", Concurrency: 1 + int(splitmix(uint64(seed)^0xbb67ae85)%8)}
	if failures {
		ship.Undo = "unship"
	}
	steps[at] = ship
	invoice := sas.StepDef{Name: "invoice", Agent: "pay", Action: "invoice", Timeout: stepTimeout}
	if w.Graph() {
		invoice.After = []int{at}
	}
	return sas.Workflow{Name: w.Name, Steps: append(steps, invoice)}
}

// lines draws the n-th order's lines: none to maxLines, most few.
func (w *World) lines(n int) []string {
	x := splitmix(uint64(w.cfg.Seed)*0x9e37 ^ uint64(n))
	count := int(x % 8)
	if x>>8%4 == 0 {
		count = int(x >> 16 % (maxLines + 1))
	}
	out := make([]string, count)
	for i := range out {
		out[i] = fmt.Sprintf("sku-%d-%d", n, i)
	}
	return out
}

// payload is the n-th order's payload: its amount, and its lines in a
// fan-out run (none at all for some, noList).
func (w *World) payload(n int) json.RawMessage {
	if !w.cfg.fanning() {
		return json.RawMessage(fmt.Sprintf(`{"amount":%d}`, 10+n))
	}
	b, _ := json.Marshal(struct {
		Amount int       `json:"amount"`
		Items  *[]string `json:"items,omitempty"`
	}{10 + n, w.itemsOf(n)})
	return b
}

// runPayload is the payload of a schedule's run at, the n-th order: its
// lines too, as payload gives them.
func (w *World) runPayload(n int, at time.Time) json.RawMessage {
	b, _ := json.Marshal(struct {
		Amount int       `json:"amount"`
		Run    string    `json:"run"`
		Items  *[]string `json:"items,omitempty"`
	}{10 + n, at.Format(time.RFC3339), w.itemsOf(n)})
	return b
}

// itemsOf is what the n-th order's payload holds as its lines: nothing
// (no "items" at all) for an order noList draws, whose fan-out's list
// cannot be evaluated, so its step fails at its start (docs/simulation.md,
// "Bugs found", seed 71).
func (w *World) itemsOf(n int) *[]string {
	if w.noList(n) {
		return nil
	}
	l := w.lines(n)
	return &l
}

// noList reports whether the n-th order of a fan-out run carries no list:
// one in sixteen, with the failure mix on (its step's failure is that
// mix's), drawn apart from the other draws so that the rest of the seed
// runs as without it.
func (w *World) noList(n int) bool {
	return w.cfg.fanOutFailures() && splitmix(uint64(w.cfg.Seed)*0x3c6e^uint64(n)^0xa54ff53a5f1d36f1)%16 == 0
}

// orderItems is an order's lines, as its payload holds them.
func orderItems(payload json.RawMessage) []json.RawMessage {
	var p struct {
		Items []json.RawMessage `json:"items"`
	}
	_ = json.Unmarshal(payload, &p)
	return p.Items
}

// isElement reports whether req is an element's.
func isElement(req agent.Request) bool { return req.Item != nil }

// elementResult is what the remote answers an element's do with: its key
// and its item.
func elementResult(doKey string, item json.RawMessage) any {
	return map[string]any{"done": doKey, "item": item}
}

// fanOutDef is the definition of step of order v's version, if a fan-out.
func (w *World) fanOutDef(v sas.OrderView, step int) (sas.StepDef, bool) {
	def, ok := w.defs[v.Order.Version]
	if !ok || step >= len(def.Steps) || def.Steps[step].ForEach == nil {
		return sas.StepDef{}, false
	}
	return def.Steps[step], true
}

// fanOutStep reports whether k is a fan-out step (not an element).
func (w *World) fanOutStep(k sas.StepKey) bool {
	def, ok := w.stepDef(k)
	return ok && def.ForEach != nil
}

// elements reads the element records of an order's fan-out step.
func (w *World) elements(k sas.StepKey) []sas.StepRecord {
	var out []sas.StepRecord
	cursor := ""
	for {
		page, err := w.mem.ListElements(context.Background(), sas.ListElementsParams{Key: k, Cursor: cursor})
		if err != nil {
			return out
		}
		out = append(out, page.Records...)
		if cursor = page.NextCursor; cursor == "" {
			return out
		}
	}
}

// stoppedBeside reports whether fan-out record r was failed because
// another step of its order failed (a branch beside it): that failure is
// the one alerted and told, not the fan-out's.
func stoppedBeside(r sas.StepRecord) bool {
	if r.ForEachCount == 0 || r.ProcessState != sas.Error || len(r.History) == 0 {
		return false
	}
	return strings.HasPrefix(r.History[len(r.History)-1].Reason, "stopped: another step of the order failed")
}

// elementStates lists the elements of an order's fan-outs, for "no
// progress".
func (w *World) elementStates(v sas.OrderView) string {
	var b strings.Builder
	for _, r := range v.Steps {
		if r.ForEachCount == 0 {
			continue
		}
		fmt.Fprintf(&b, "; step %d's elements (%d of %d done):", r.Step, r.ForEachDone, r.ForEachCount)
		for _, e := range w.elements(r.Key()) {
			_, i := sas.ElementOf(e.Step)
			fmt.Fprintf(&b, " %d:%s a%d", i, e.ProcessState, e.Attempt)
			if e.Cancelled {
				b.WriteString(" marked")
			}
		}
	}
	return b.String()
}

// checkFanOutCall is "fan-out results" at a call: an element carries its
// own item; a step that follows a fan-out sees its elements' results, in
// index order.
func (w *World) checkFanOutCall(req agent.Request) {
	v, err := w.view(req.OrderID)
	if err != nil {
		return
	}
	items := orderItems(v.Order.Payload)
	if isElement(req) {
		if req.Index >= len(items) || !bytes.Equal(req.Item, items[req.Index]) {
			w.violate("fan-out results", "order %s element %d of step %d (%s) was called with item %s; the order's list has %d items",
				req.OrderID, req.Index, req.StepIndex, req.Step, req.Item, len(items))
		}
		return
	}
	for i, r := range v.Steps {
		def, ok := w.fanOutDef(v, i)
		if !ok || r.ProcessState != sas.Processed && r.ProcessState != sas.Compensating && r.ProcessState != sas.Compensated {
			continue
		}
		got, seen := req.Results[def.Name]
		if !seen {
			continue // a step that does not follow it ("results seen" holds which do)
		}
		want := make([]any, len(items))
		for j, item := range items {
			want[j] = elementResult(sas.IdempotencyKey(req.OrderID, sas.ElementStep(i, j), r.Generation, false), item)
		}
		wantJSON, _ := json.Marshal(want)
		if !sameJSON(got, wantJSON) {
			w.violate("fan-out results", "order %s step %d (%s, undo %v) saw the fan-out %s's result %s; its %d elements returned %s",
				req.OrderID, req.StepIndex, req.Step, req.Undo, def.Name, got, len(items), wantJSON)
		}
	}
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// elementUndoResults is what an element's undo sees: what its step sees,
// and under its step's name its own element's result (not the fan-out's
// list).
func (w *World) elementUndoResults(v sas.OrderView, req agent.Request) sas.Results {
	want := v.ResultsFor(req.StepIndex, false)
	e, err := w.mem.GetStep(context.Background(), sas.StepKey{OrderID: req.OrderID, Step: sas.ElementStep(req.StepIndex, req.Index)})
	if err == nil && len(e.Result) > 0 {
		out := sas.Results{req.Step: e.Result}
		for k, r := range want {
			out[k] = r
		}
		want = out
	}
	return want
}

// checkElementWrite holds a committed write that claimed element a (b
// before it) to "element after failure" and "window exceeded".
func (w *World) checkElementWrite(name string, b, a sas.StepRecord) {
	if !sas.IsElement(a.Step) || a.ProcessState != sas.Processing || b.ProcessState == sas.Processing && b.Attempt == a.Attempt {
		return
	}
	stepKey := sas.StepKey{OrderID: a.OrderID, Step: sas.StepOf(a.Step)}
	step, err := w.mem.GetStep(context.Background(), stepKey)
	if err != nil {
		return
	}
	if step.ProcessState != sas.Processing || step.Cancelled {
		w.violate("element after failure", "%s claimed element %v while its fan-out %v is %s (cancelled %v)", name, a.Key(), stepKey, step.ProcessState, step.Cancelled)
	}
	v, err := w.view(a.OrderID)
	if err != nil {
		return
	}
	def, ok := w.fanOutDef(v, stepKey.Step)
	if !ok {
		return
	}
	var open []int
	for _, e := range w.elements(stepKey) {
		if e.ProcessState == sas.Processing || e.ProcessState == sas.Pending {
			_, i := sas.ElementOf(e.Step)
			open = append(open, i)
		}
	}
	if len(open) > def.ForEach.Window() {
		w.violate("window exceeded", "%s left %d elements of %v in flight (%v); its concurrency is %d", name, len(open), stepKey, open, def.ForEach.Window())
	}
}

// elementsInFlight lists an order's elements in flight with their
// deadline ahead, for "undo before settled".
func (w *World) elementsInFlight(v sas.OrderView) []sas.StepRecord {
	var out []sas.StepRecord
	now := w.clock.Now()
	for i, r := range v.Steps {
		if _, ok := w.fanOutDef(v, i); !ok || r.ForEachCount == 0 {
			continue
		}
		for _, e := range w.elements(r.Key()) {
			if e.ProcessState == sas.Processing && now.Before(e.CompleteBy) {
				out = append(out, e)
			}
		}
	}
	return out
}

// checkFanOutEffects is "element twice" for a Processed order's fan-out
// step i (record r): its live effects are exactly its elements', under
// their own keys.
func (w *World) checkFanOutEffects(v sas.OrderView, i int, r sas.StepRecord, live []string) {
	id := v.Order.OrderID
	own := map[string]bool{}
	for j := range orderItems(v.Order.Payload) {
		own[sas.IdempotencyKey(id, sas.ElementStep(i, j), r.Generation, false)] = true
	}
	for _, k := range live {
		if !own[k] && !w.alerted(id, i) {
			w.violate("element twice", "order %s is Processed and fan-out step %d (%s) has an effect under %s, not one of its elements' own keys, and nobody was told", id, i, r.StepName, k)
		}
	}
	for k := range own {
		if !slices.Contains(live, k) {
			w.violate("effect missing", "order %s is Processed but element %s of step %d (%s) is not at the remote (%s)", id, k, i, r.StepName, steps(v))
		}
	}
}

// elementReply reports whether body is a reply about an element.
func elementReply(body string) bool {
	var h struct {
		Step int `json:"step"`
	}
	return json.Unmarshal([]byte(body), &h) == nil && sas.IsElement(h.Step)
}

// rekeyed is SabotageRekeyElement on a delivery of body (its receive
// count receives).
func (w *World) rekeyed(body string, receives int) string {
	if w.cfg.Sabotage != SabotageRekeyElement || receives < 2 {
		return body
	}
	var req sas.AgentRequest
	if json.Unmarshal([]byte(body), &req) != nil || req.Kind != sas.KindAgentRequest || !sas.IsElement(req.Step) || req.Compensation {
		return body
	}
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &m) != nil {
		return body
	}
	m["idempotencyKey"], _ = json.Marshal(fmt.Sprintf("%s:r%d", req.IdempotencyKey, receives))
	out, _ := json.Marshal(m)
	return string(out)
}

// StartFanOut is the world's: a write of the step and its first window.
func (s *store) StartFanOut(ctx context.Context, p sas.StartFanOutParams) ([]sas.StepRecord, error) {
	if s.w.cfg.Sabotage == SabotageWideWindow {
		p = s.widen(p)
	}
	keys := []sas.StepKey{p.Key}
	for _, c := range p.Claims {
		keys = append(keys, sas.StepKey{OrderID: p.Key.OrderID, Step: sas.ElementStep(p.Key.Step, c.Index)})
	}
	return write(ctx, s, "StartFanOut", keys, func() ([]sas.StepRecord, error) { return s.mem.StartFanOut(ctx, p) })
}

// widen is SabotageWideWindow: one more element claimed, its item the
// order's.
func (s *store) widen(p sas.StartFanOutParams) sas.StartFanOutParams {
	n := len(p.Claims)
	v, err := s.mem.GetOrder(context.Background(), p.Key.OrderID)
	if err != nil || n >= p.Count {
		return p
	}
	items := orderItems(v.Order.Payload)
	if n >= len(items) {
		return p
	}
	p.Claims = append(slices.Clone(p.Claims), sas.ElementClaim{Index: n, Item: items[n], CompleteBy: p.Claims[0].CompleteBy})
	return p
}

// CompleteElement is the world's: the element, its step and the next.
func (s *store) CompleteElement(ctx context.Context, p sas.CompleteElementParams) ([]sas.StepRecord, error) {
	keys := []sas.StepKey{p.Key, {OrderID: p.Key.OrderID, Step: sas.StepOf(p.Key.Step)}}
	if p.Next != nil {
		keys = append(keys, sas.StepKey{OrderID: p.Key.OrderID, Step: sas.ElementStep(sas.StepOf(p.Key.Step), p.Next.Index)})
	}
	return write(ctx, s, "CompleteElement", keys, func() ([]sas.StepRecord, error) { return s.mem.CompleteElement(ctx, p) })
}

// ListElements is the world's read of a fan-out's elements.
func (s *store) ListElements(ctx context.Context, p sas.ListElementsParams) (sas.ListElementsResult, error) {
	if stop(ctx, opRead, "ListElements %v", p.Key).fault == faultUnavailable {
		return sas.ListElementsResult{}, errUnavailable
	}
	res, err := s.mem.ListElements(ctx, p)
	if err == nil && s.w.cfg.Sabotage == SabotageShuffleResults && p.Cursor == "" && len(res.Records) >= 2 {
		recs := slices.Clone(res.Records)
		recs[0].Result, recs[1].Result = recs[1].Result, recs[0].Result
		res.Records = recs
	}
	if err == nil && s.w.cfg.Sabotage == SabotageSkipElementUndo {
		if st, gerr := s.mem.GetStep(ctx, p.Key); gerr == nil && st.ProcessState == sas.Compensating {
			res.Records = slices.DeleteFunc(slices.Clone(res.Records), func(r sas.StepRecord) bool { return r.ProcessState == sas.Processed })
		}
	}
	return res, err
}

// unfencedElementClaim is SabotageUnfencedElement's claim: a claim of an
// element's next attempt that its fan-out's fence refused (err) is forced
// onto the element's record as if unfenced.
func (s *store) unfencedElementClaim(p sas.ClaimParams, err error) (sas.StepRecord, error) {
	var re *sas.RaceError
	if s.w.cfg.Sabotage != SabotageUnfencedElement || !sas.IsElement(p.Key.Step) || !errors.As(err, &re) ||
		re.Key != (sas.StepKey{OrderID: p.Key.OrderID, Step: sas.StepOf(p.Key.Step)}) {
		return sas.StepRecord{}, err
	}
	cur, gerr := s.mem.GetStep(context.Background(), p.Key)
	if gerr != nil {
		return sas.StepRecord{}, err
	}
	p.Siblings = nil
	claimed, cerr := sas.Claim(cur, p)
	if cerr != nil {
		return sas.StepRecord{}, cerr
	}
	s.w.tracef("  sabotaged: the claim of element %v is made although its fan-out is %s", p.Key, re.Current.ProcessState)
	s.mem.Force(claimed)
	return claimed, nil
}

var _ sas.FanOutStore = (*store)(nil)
