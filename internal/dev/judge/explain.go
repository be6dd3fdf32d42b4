package judge

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/sas"
)

// ruleRefused explains a leg its remote refused for good.
const ruleRefused = "refused for good (a permanent fault on its key)"

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
				return ruleRefused, "", false
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
		// The window opens at the transition before, passing over waits:
		// a wait extends the attempt's lease and starts nothing, so what
		// stalled the attempt before it (an agent killed while it ran, its
		// pick-up recorded late behind a busy queue) still closes this
		// window (issue 31's local run: three kills of a request before
		// the wait, the failure after it, judged "it waited").
		start := i - 1
		for start > 0 && isWait(r.History[start]) {
			start--
		}
		from, to := r.History[start].At.Add(-rules.Slack), h.At.Add(rules.Slack)
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
	if wf.Graph() {
		// Branches: newest completion first, whatever the branch
		// (docs/protocol.md, "Branches"): the undos in the order their
		// steps completed, then held to the same rule as a line's.
		done := func(i int) time.Time { return sas.CompletedAt(v.Steps[undos[i].step]) }
		sort.SliceStable(undos, func(a, b int) bool {
			if ta, tb := done(a), done(b); !ta.Equal(tb) {
				return ta.Before(tb)
			}
			return undos[a].step < undos[b].step
		})
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

// isWait reports whether h is a held step's wait (sas.Wait): its lease
// moved on, its state, holder and attempt kept.
func isWait(h sas.HistoryEntry) bool {
	return h.From == h.To && (h.From == sas.Processing || h.From == sas.Compensating)
}
