package localrun

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/remotesim"
	"github.com/sas-go/sas/internal/sas"
)

// The explanation rules. A run is judged against the faults injected into
// each order, never against a hoped-for outcome:
//
//  1. A step failed by a reply (the holder of its attempt moved it to Error,
//     or its undo to CompensationFailed) is explained only when the simulator
//     refused that step's idempotency key for good (a permanent fault) — the
//     only cause of a "failed" reply in these runs.
//  2. A step given up at the failure threshold (by the supervisor, or by the
//     scheduler on its agent's transient outcome, issue 19): every failure
//     counted on that leg (each rescue and the final give-up; a failure the
//     scheduler counted because the agent's breaker refused the tries is
//     accounted for by the breaker) must be accounted for by a fault injected into that step
//     during the window it ended (from the transition before it to it,
//     widened by JudgeRules.Slack for clock skew). A window is accounted for
//     by a hang or a response lost by dropping or hanging (either stalls a
//     call past its try's timeout), by a harness kill or kill-before-send of
//     an instance holding one of the step's messages, or by at least
//     RetryBudget transient answers (503/429, and responses "lost" as a 503
//     after the effect), which exhaust one agent call's tries.
//  3. Anything else is a defect: a failure window with no fault injected into
//     the step at all is "failed by waiting" (its request, retry or reply sat
//     in a queue, or a shared breaker opened by other orders' faults held
//     it); one with some faults that cannot account for it is "unaccounted".
//     A CompensationFailed step is judged by the same rules on its undo key,
//     so one without an injected undo fault is always a defect.

// JudgeRules are the knobs of the rules above.
type JudgeRules struct {
	// RetryBudget is how many transient answers exhaust one agent call
	// (httpcall's MaxAttempts).
	RetryBudget int
	// Slack widens every failure window on both sides: supervisors' clocks
	// may be skewed and a call is stamped when it arrives.
	Slack time.Duration
}

func (r JudgeRules) withDefaults() JudgeRules {
	if r.RetryBudget == 0 {
		r.RetryBudget = httpcall.DefaultMaxAttempts
	}
	if r.Slack == 0 {
		r.Slack = time.Second
	}
	return r
}

// Evidence is what a judgement reads: the final views from the store, the
// simulator's call log and ledger, the harness's own faults and the alerts.
type Evidence struct {
	IDs      []string
	Views    map[string]sas.OrderView // absent: never created
	Registry sas.Registry
	// Definitions are the earlier workflow versions orders ran on, by
	// "name#version" (docs/workflows.md, "Versions").
	Definitions map[string]sas.Workflow
	Calls       map[string][]remotesim.Call // by idempotency key
	Effects     []remotesim.Effect
	Harness     func(orderID string) []HarnessFault
	Alerts      []sas.Alert
}

// Defect is an order whose outcome the injected faults do not explain, or
// that broke an invariant.
type Defect struct {
	OrderID string
	State   sas.ProcessState
	Why     []string
	Waited  bool // a failure window with no fault injected at all
	Detail  string
}

// Verdict is the judgement of a run.
type Verdict struct {
	Orders, Processed, Failed, Compensated, CompensationFailed int
	// Explained counts the failed orders per rule that explained them.
	Explained map[string]int
	// The invariants; each entry names the order.
	Lost, DoubleEffects, Illegal, Alerts, Compensation []string
	Defects                                            []Defect
	FailedByWaiting                                    int
	MinProcessed                                       float64 // the share of orders that must be Processed
}

// ProcessedShare is the fraction of orders Processed.
func (v Verdict) ProcessedShare() float64 {
	if v.Orders == 0 {
		return 1
	}
	return float64(v.Processed) / float64(v.Orders)
}

// Problems lists every way the run fell short; none means it passed.
func (v Verdict) Problems() []string {
	var p []string
	add := func(n int, what string) {
		if n > 0 {
			p = append(p, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(len(v.Lost), "orders lost (missing or not terminal)")
	add(len(v.DoubleEffects), "keys with more than one effect")
	add(len(v.Illegal), "illegal transitions")
	add(len(v.Alerts), "alert mismatches")
	add(len(v.Compensation), "compensation mismatches")
	add(len(v.Defects), fmt.Sprintf("orders whose failure the injected faults do not explain (%d failed by waiting)", v.FailedByWaiting))
	if v.ProcessedShare() < v.MinProcessed {
		p = append(p, fmt.Sprintf("%.1f%% processed, below the required %.1f%%", 100*v.ProcessedShare(), 100*v.MinProcessed))
	}
	return p
}

// OK reports whether the run passed.
func (v Verdict) OK() bool { return len(v.Problems()) == 0 }

// Judge checks a finished run against the invariants and the explanation
// rules.
func Judge(ev Evidence, rules JudgeRules) Verdict {
	rules = rules.withDefaults()
	v := Verdict{Orders: len(ev.IDs), Explained: map[string]int{}}
	if ev.Harness == nil {
		ev.Harness = func(string) []HarnessFault { return nil }
	}
	effects := map[string][]remotesim.Effect{} // by key
	for _, e := range ev.Effects {
		effects[e.Key] = append(effects[e.Key], e)
	}
	for k, es := range effects {
		if len(es) > 1 {
			v.DoubleEffects = append(v.DoubleEffects, fmt.Sprintf("%s: %d effects", k, len(es)))
		}
	}
	sort.Strings(v.DoubleEffects)
	alerted := map[alertKey]bool{}
	for _, a := range ev.Alerts {
		alerted[alertKey{a.OrderID, a.Step, a.State, a.Attempts}] = true
	}
	owed := map[alertKey]bool{}
	// judged holds the orders whose alerts are compared with their
	// histories: the terminal ones. An order still running when the run
	// ended is reported as lost; its alerts say nothing more.
	judged := map[string]bool{}
	for _, id := range ev.IDs {
		view, ok := ev.Views[id]
		if !ok {
			v.Lost = append(v.Lost, id+": not in the state store")
			continue
		}
		if !Settled(view) {
			v.Lost = append(v.Lost, fmt.Sprintf("%s: not terminal: %s", id, stepsLine(view)))
			continue
		}
		v.Illegal = append(v.Illegal, illegalTransitions(view)...)
		judged[id] = true
		for _, r := range view.Steps {
			for _, h := range r.History {
				if h.To == sas.Error || h.To == sas.CompensationFailed {
					owed[alertKey{id, r.Step, h.To, h.Attempt}] = true
				}
			}
		}
		wf, known := ev.workflow(view.Order)
		if !known {
			v.Illegal = append(v.Illegal, fmt.Sprintf("%s: runs unknown workflow %q version %q", id, view.Order.Workflow, view.Order.Version))
			continue
		}
		v.Compensation = append(v.Compensation, compensationProblems(id, view, wf, effects)...)
		state := view.State()
		switch state {
		case sas.Processed:
			v.Processed++
			continue
		case sas.Compensated:
			v.Compensated++
		case sas.CompensationFailed:
			v.CompensationFailed++
		default:
			v.Failed++
		}
		d := Defect{OrderID: id, State: state}
		failedSteps := 0
		for _, r := range view.Steps {
			for _, leg := range []bool{false, true} {
				final := leg2failed(leg)
				if !everIn(r, final) {
					continue
				}
				failedSteps++
				key := sas.IdempotencyKey(id, r.Step, r.Generation, leg)
				rule, why, waited := explainLeg(r, leg, ev.Calls[key], stepFaults(ev.Harness(id), r.Step), rules)
				if why != "" {
					d.Why = append(d.Why, fmt.Sprintf("step %d (%s) %s: %s", r.Step, r.StepName, final, why))
					d.Waited = d.Waited || waited
				} else {
					v.Explained[rule]++
				}
			}
		}
		if failedSteps == 0 {
			d.Why = append(d.Why, "not processed, yet no step failed")
		}
		if len(d.Why) > 0 {
			d.Detail = describeDefect(view, ev, id)
			v.Defects = append(v.Defects, d)
			if d.Waited {
				v.FailedByWaiting++
			}
		}
	}
	for k := range owed {
		if !alerted[k] {
			v.Alerts = append(v.Alerts, fmt.Sprintf("%s step %d entered %s at attempt %d: no alert", k.order, k.step, k.state, k.attempt))
		}
	}
	for k := range alerted {
		if judged[k.order] && !owed[k] {
			v.Alerts = append(v.Alerts, fmt.Sprintf("%s step %d: alert for %s at attempt %d, which its history never entered", k.order, k.step, k.state, k.attempt))
		}
	}
	sort.Strings(v.Alerts)
	return v
}

type alertKey struct {
	order   string
	step    int
	state   sas.ProcessState
	attempt int
}

func leg2failed(undo bool) sas.ProcessState {
	if undo {
		return sas.CompensationFailed
	}
	return sas.Error
}

func everIn(r sas.StepRecord, s sas.ProcessState) bool {
	for _, h := range r.History {
		if h.To == s {
			return true
		}
	}
	return false
}

// onLeg reports whether a transition belongs to the undo leg (undo) or the
// forward leg of a step.
func onLeg(h sas.HistoryEntry, undo bool) bool {
	isUndo := h.To == sas.Compensating || h.To == sas.Compensated || h.To == sas.CompensationFailed
	return isUndo == undo
}

func isSupervisor(actor string) bool { return strings.HasPrefix(actor, "supervisor") }

// counted reports whether a history entry counted a failure of an attempt
// that ended without an answer: the supervisor's rescue or give-up, or the
// scheduler's on its agent's transient outcome (issue 19), whose reasons
// both say "(failure n of m: ...)".
func counted(h sas.HistoryEntry) bool {
	return isSupervisor(h.Actor) || strings.Contains(h.Reason, "(failure ")
}

// explainLeg applies the rules to one failed leg of a step. It returns the
// rule that explains it, or why nothing does (and whether a failure window
// saw no fault at all).
func explainLeg(r sas.StepRecord, undo bool, calls []remotesim.Call, harness []HarnessFault, rules JudgeRules) (rule, why string, waited bool) {
	final := leg2failed(undo)
	last := -1
	for i, h := range r.History {
		if h.To == final {
			last = i
		}
	}
	if last < 0 {
		return "", "never failed", false
	}
	fail := r.History[last]
	if !counted(fail) {
		for _, c := range calls {
			if c.Fault == remotesim.FaultPermanent {
				return "refused for good (a permanent fault on its key)", "", false
			}
		}
		return "", fmt.Sprintf("failed by a reply at attempt %d (%s), but no permanent refusal was injected into it", fail.Attempt, fail.Reason), false
	}
	// Every failure the supervisor counted on this leg up to the give-up.
	var problems []string
	windows := 0
	for i := 0; i <= last; i++ {
		h := r.History[i]
		if !counted(h) || !onLeg(h, undo) || i == 0 {
			continue
		}
		if h.From == h.To {
			continue // a wait (sas.Wait): the lease extended, no failure counted
		}
		windows++
		from, to := r.History[i-1].At.Add(-rules.Slack), h.At.Add(rules.Slack)
		stall, transients, any := 0, 0, 0
		for _, c := range calls {
			if c.At.Before(from) || c.At.After(to) || !c.Injected() {
				continue
			}
			any++
			switch {
			case c.Fault == remotesim.FaultHang, c.Fault == remotesim.FaultLost && c.LostMode != remotesim.LostError:
				stall++
			case c.Fault == remotesim.FaultTransient, c.Fault == remotesim.FaultLost:
				transients++
			}
		}
		for _, f := range harness {
			if f.At.Before(from) || f.At.After(to) {
				continue
			}
			any++
			if f.Kind == FaultKilled || f.Kind == FaultKilledBeforeSend {
				stall++
			}
		}
		if stall > 0 || transients >= rules.RetryBudget {
			continue
		}
		if !isSupervisor(h.Actor) && strings.Contains(h.Reason, "circuit open") {
			// The agent's breaker refused the attempt's tries (or the HTTP
			// client waited it out): it opens only on a window of mostly
			// unhealthy tries, injected faults of this order or others.
			continue
		}
		what := fmt.Sprintf("failure %d (%s -> %s at attempt %d, %s) has %d faults injected in its window, none that stalls it", windows, h.From, h.To, h.Attempt, h.At.Format("15:04:05.000"), any)
		if any == 0 {
			waited = true
			what = fmt.Sprintf("failure %d (%s -> %s at attempt %d, %s) had no fault injected: it waited", windows, h.From, h.To, h.Attempt, h.At.Format("15:04:05.000"))
		}
		problems = append(problems, what)
	}
	if windows == 0 {
		return "", "given up by the supervisor with no failure counted on the leg", false
	}
	if len(problems) > 0 {
		return "", "given up at the failure threshold, but " + strings.Join(problems, "; "), waited
	}
	return "failure threshold reached, every failure stalled by an injected fault", "", false
}

// stepFaults keeps the harness faults that may concern one step.
func stepFaults(fs []HarnessFault, step int) []HarnessFault {
	var out []HarnessFault
	for _, f := range fs {
		if f.Step == step || f.Step < 0 {
			out = append(out, f)
		}
	}
	return out
}

// illegalTransitions replays every step's history through sas.Legal.
func illegalTransitions(v sas.OrderView) []string {
	var out []string
	for _, r := range v.Steps {
		prev := sas.ProcessState("")
		for i, h := range r.History {
			// A history at its bound lost its oldest entries: start there.
			if i == 0 && len(r.History) >= sas.HistoryLimit {
				prev = h.From
			}
			if h.From != prev {
				out = append(out, fmt.Sprintf("%s step %d history[%d]: from %s, but the record was %s", v.Order.OrderID, r.Step, i, h.From, prev))
			}
			if !sas.Legal(h.From, h.To) {
				out = append(out, fmt.Sprintf("%s step %d history[%d]: illegal %s -> %s by %s", v.Order.OrderID, r.Step, i, h.From, h.To, h.Actor))
			}
			prev = h.To
		}
		if prev != r.ProcessState {
			out = append(out, fmt.Sprintf("%s step %d: history ends in %s, the record is %s", v.Order.OrderID, r.Step, prev, r.ProcessState))
		}
	}
	return out
}

// compensationProblems checks the ledger: the undo effects of an order are
// exactly the undos of the forward effects of its steps that have an undo,
// newest step first. A Processed order has none; one whose compensation
// failed has a subset; any other failed order has all of them. The one undo
// allowed without a forward effect is that of a step the supervisor gave up
// on: nobody could know whether it took effect. Every step that completed
// has its forward effect.
func compensationProblems(id string, v sas.OrderView, wf sas.Workflow, effects map[string][]remotesim.Effect) []string {
	var out []string
	type undone struct {
		step int
		at   time.Time
		late bool // its effect became known (a late success) after the chain had passed it
	}
	var undos []undone
	state := v.State()
	for i, d := range wf.Steps {
		fwds := effects[sas.IdempotencyKey(id, i, v.Steps[i].Generation, false)]
		fwd := len(fwds) > 0
		und := effects[sas.IdempotencyKey(id, i, v.Steps[i].Generation, true)]
		if fwd && len(und) > 0 && und[0].At.Before(fwds[0].At) {
			// A remote's undo must cancel a later call of its key
			// (docs/protocol.md, "Idempotency keys"); the simulator's does.
			out = append(out, fmt.Sprintf("%s step %d (%s): took effect after its undo, so the effect remains", id, i, d.Name))
		}
		if everIn(v.Steps[i], sas.Processed) && !fwd {
			out = append(out, fmt.Sprintf("%s step %d (%s): completed, but the remote has no effect for it", id, i, d.Name))
		}
		if d.Undo == "" {
			if len(und) > 0 {
				out = append(out, fmt.Sprintf("%s step %d (%s) has no undo, yet one took effect", id, i, d.Name))
			}
			continue
		}
		switch {
		case len(und) > 0 && !fwd && !everIn(v.Steps[i], sas.Error):
			// A step that failed (refused, or given up by the supervisor)
			// may have taken effect unseen, so undoing it is right (a
			// no-op at the remote when it had not; docs/protocol.md, "A
			// refusal is not proof of no effect"); any other step must
			// have taken effect first.
			out = append(out, fmt.Sprintf("%s step %d (%s): undone, but it never took effect", id, i, d.Name))
		case len(und) > 0 && state == sas.Processed:
			out = append(out, fmt.Sprintf("%s step %d (%s): undone in a processed order", id, i, d.Name))
		case len(und) == 0 && fwd && state != sas.Processed && state != sas.CompensationFailed:
			out = append(out, fmt.Sprintf("%s step %d (%s): took effect in a %s order and was never undone", id, i, d.Name, state))
		}
		if len(und) > 0 {
			undos = append(undos, undone{i, und[0].At, notedLate(v.Steps[i])})
		}
	}
	for k := 1; k < len(undos); k++ {
		if undos[k].at.Before(undos[k-1].at) {
			continue // a lower step undone earlier is wrong; higher first is right
		}
		if undos[k].late {
			// Refused, so nothing to undo when the chain passed it; a
			// success that came later restarted the compensation for it
			// (docs/protocol.md, "Idempotency keys"): undone once known.
			continue
		}
		out = append(out, fmt.Sprintf("%s: step %d was undone before step %d (want newest first)", id, undos[k-1].step, undos[k].step))
	}
	return out
}

// notedLate reports whether a late success noted that the step's effect may
// exist (sas.NoteEffect) after it had failed.
func notedLate(r sas.StepRecord) bool {
	for _, h := range r.History {
		if h.From == h.To && h.From == sas.Error && strings.Contains(h.Reason, "its effect may exist") {
			return true
		}
	}
	return false
}

func stepsLine(v sas.OrderView) string {
	var b strings.Builder
	for _, r := range v.Steps {
		fmt.Fprintf(&b, "[%d %s %s attempt %d failures %d]", r.Step, r.StepName, r.ProcessState, r.Attempt, r.FailureCount)
	}
	return b.String()
}

// describeDefect renders what a reader needs to judge a defect: the steps,
// every fault injected into the order, and its history.
func describeDefect(v sas.OrderView, ev Evidence, id string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "    workflow %s, steps %s\n", v.Order.Workflow, stepsLine(v))
	for _, r := range v.Steps {
		if r.LastError != "" {
			fmt.Fprintf(&b, "    step %d last error: %s\n", r.Step, r.LastError)
		}
		for _, leg := range []bool{false, true} {
			key := sas.IdempotencyKey(id, r.Step, r.Generation, leg)
			var parts []string
			for _, c := range ev.Calls[key] {
				what := c.Outcome
				if c.Injected() {
					what = string(c.Fault)
					if c.LostMode != "" {
						what += "(" + c.LostMode + ")"
					}
				}
				parts = append(parts, c.At.Format("15:04:05.000")+" "+what)
			}
			if len(parts) > 0 {
				fmt.Fprintf(&b, "    calls %s: %s\n", key, strings.Join(parts, ", "))
			}
		}
	}
	for _, f := range ev.Harness(id) {
		fmt.Fprintf(&b, "    harness %s %s step %d attempt %d (%s)\n", f.At.Format("15:04:05.000"), f.Kind, f.Step, f.Attempt, f.Message)
	}
	for _, h := range v.History {
		fmt.Fprintf(&b, "    %s step %d %s -> %s attempt %d by %s: %s\n", h.At.Format("15:04:05.000"), h.Step, h.From, h.To, h.Attempt, h.Actor, h.Reason)
	}
	return b.String()
}

// PrintVerdict writes the judgement: the invariants, the explained failures
// by rule, and every defect (in full for the first maxDetailed).
func PrintVerdict(out io.Writer, v Verdict) {
	const maxDetailed, maxListed = 30, 30
	fmt.Fprintf(out, "\n== verdict ==\n")
	fmt.Fprintf(out, "processed               %d of %d (%.1f%%; required %.1f%%)\n", v.Processed, v.Orders, 100*v.ProcessedShare(), 100*v.MinProcessed)
	rules := make([]string, 0, len(v.Explained))
	for r := range v.Explained {
		rules = append(rules, r)
	}
	sort.Strings(rules)
	for _, r := range rules {
		fmt.Fprintf(out, "explained failures      %d: %s\n", v.Explained[r], r)
	}
	for _, inv := range []struct {
		name string
		list []string
	}{{"lost orders", v.Lost}, {"double effects", v.DoubleEffects}, {"illegal transitions", v.Illegal}, {"alert mismatches", v.Alerts}, {"compensation mismatches", v.Compensation}} {
		fmt.Fprintf(out, "%-23s %d\n", inv.name, len(inv.list))
		for i, l := range inv.list {
			if i == maxListed {
				fmt.Fprintf(out, "  … and %d more\n", len(inv.list)-maxListed)
				break
			}
			fmt.Fprintf(out, "  %s\n", l)
		}
	}
	fmt.Fprintf(out, "unexplained failures    %d (failed by waiting: %d)\n", len(v.Defects), v.FailedByWaiting)
	for i, d := range v.Defects {
		fmt.Fprintf(out, "  DEFECT %s (%s): %s\n", d.OrderID, d.State, strings.Join(d.Why, " | "))
		if i < maxDetailed {
			fmt.Fprint(out, d.Detail)
		}
	}
	if p := v.Problems(); len(p) > 0 {
		fmt.Fprintf(out, "\nFAIL: %s\n", strings.Join(p, "; "))
	} else {
		fmt.Fprintln(out, "\nPASS: nothing lost, nothing done twice, every transition legal, one alert per failed step, compensation exactly for what took effect, and every failure explained by a fault injected into its order.")
	}
}

// workflow is the definition an order ran on: the registered one, or the
// earlier version it was submitted with.
func (ev Evidence) workflow(o sas.Order) (sas.Workflow, bool) {
	if w, ok := ev.Registry[o.Workflow]; ok && (o.Version == "" || w.Version() == o.Version) {
		return w, true
	}
	w, ok := ev.Definitions[o.Workflow+"#"+o.Version]
	return w, ok
}
