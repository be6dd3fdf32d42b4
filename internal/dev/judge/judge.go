// Package judge computes a local run's verdict from what happened: the
// final state of every order, the remote simulator's calls and effects, the
// faults the harness injected and the alerts raised. Every failed order must
// be explained by an injected fault; what is not is a defect.
package judge

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/httpcall"
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
		r.RetryBudget = httpcall.DefaultMaxTries
	}
	if r.Slack == 0 {
		r.Slack = time.Second
	}
	return r
}

// The kinds of fault the local run's harness injects (internal/dev/localrun,
// chaos.go), as HarnessFault.Kind names them.
const (
	// FaultKilled: an instance holding one of the order's messages was
	// killed mid-batch; the batch is redelivered after its visibility timeout.
	FaultKilled = "killed"
	// FaultKilledBeforeSend: a scheduler died between its write and its send
	// of the order's agent request.
	FaultKilledBeforeSend = "killed-before-send"
	// FaultDuplicate: one of the order's messages was delivered twice.
	FaultDuplicate = "duplicate"
)

// HarnessFault is one fault the harness injected into an order. Step is -1
// for messages about the whole order (compensate); Attempt is 0 where the
// message does not carry one.
type HarnessFault struct {
	OrderID string
	Step    int
	Attempt int
	Kind    string
	Message sas.Kind
	At      time.Time
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
	// Rejected counts the orders a step refused as a business outcome
	// (agent.Reject), whatever took effect undone: apart from the failed,
	// with no alert owed, and not held to the processed share.
	Rejected int
	// RefusedForGood counts the orders that failed because their remote
	// refused a step for good (a permanent fault injected on its key): the
	// remote's final answer, which no system could turn into Processed, so
	// not held to the processed share either.
	RefusedForGood int
	// Explained counts the failed orders per rule that explained them.
	Explained map[string]int
	// The invariants; each entry names the order.
	Lost, DoubleEffects, Illegal, Alerts, Compensation []string
	Defects                                            []Defect
	FailedByWaiting                                    int
	MinProcessed                                       float64 // the share of orders that must be Processed
}

// ProcessedShare is the fraction of orders Processed of those that could
// be: a business rejection is the business's answer, and a permanent
// refusal the remote's, not a failure of the system to make progress.
func (v Verdict) ProcessedShare() float64 {
	could := v.Orders - v.Rejected - v.RefusedForGood
	if could <= 0 {
		return 1
	}
	return float64(v.Processed) / float64(could)
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
		if !view.Settled() {
			v.Lost = append(v.Lost, fmt.Sprintf("%s: not terminal: %s", id, stepsLine(view)))
			continue
		}
		v.Illegal = append(v.Illegal, illegalTransitions(view)...)
		judged[id] = true
		for _, k := range owedAlerts(id, view) {
			owed[k] = true
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
		case sas.Rejected:
			v.Rejected++
			continue // not a failure: nothing for the faults to explain
		case sas.Compensated:
			v.Compensated++
		case sas.CompensationFailed:
			v.CompensationFailed++
		default:
			v.Failed++
		}
		d := Defect{OrderID: id, State: state}
		failedSteps, refused := 0, false
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
					refused = refused || (!leg && rule == ruleRefused)
				}
			}
		}
		if failedSteps == 0 {
			d.Why = append(d.Why, "not processed, yet no step failed")
		}
		if len(d.Why) == 0 && refused {
			v.RefusedForGood++
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
			v.Alerts = append(v.Alerts, k.missing())
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

func (k alertKey) missing() string {
	return fmt.Sprintf("%s step %d entered %s at attempt %d: no alert", k.order, k.step, k.state, k.attempt)
}

// owedAlerts lists the alerts a settled order's history owes: one for each
// entry into Error or CompensationFailed, but a business rejection's.
func owedAlerts(id string, view sas.OrderView) []alertKey {
	var owed []alertKey
	for _, r := range view.Steps {
		for _, h := range r.History {
			if r.Rejected && h.To == sas.Error && h.Attempt == r.Attempt {
				continue // a business rejection pages nobody
			}
			if h.To == sas.Error || h.To == sas.CompensationFailed {
				owed = append(owed, alertKey{id, r.Step, h.To, h.Attempt})
			}
		}
	}
	return owed
}

// MissingAlerts lists the alerts the settled orders among views owe that
// alerts does not hold, as Judge reports them. An alert can be owed a
// moment after its order settled: a scheduler that wrote a step's failure
// and died before its alert went out leaves it to the redelivery of the
// reply (docs/protocol.md, "A refused write"), and a run that stops the
// system as soon as every order is settled would count it missing
// (issue 31: two such "alert mismatches" in a run with an instance killed
// every 500 ms). The local runs wait for these before they judge.
func MissingAlerts(views map[string]sas.OrderView, alerts []sas.Alert) []string {
	alerted := map[alertKey]bool{}
	for _, a := range alerts {
		alerted[alertKey{a.OrderID, a.Step, a.State, a.Attempts}] = true
	}
	var out []string
	for id, view := range views {
		if !view.Settled() {
			continue
		}
		for _, k := range owedAlerts(id, view) {
			if !alerted[k] {
				out = append(out, k.missing())
			}
		}
	}
	sort.Strings(out)
	return out
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

// workflow is the definition an order ran on: the registered one, or the
// earlier version it was submitted with.
func (ev Evidence) workflow(o sas.Order) (sas.Workflow, bool) {
	if w, ok := ev.Registry[o.Workflow]; ok && (o.Version == "" || w.Version() == o.Version) {
		return w, true
	}
	w, ok := ev.Definitions[o.Workflow+"#"+o.Version]
	return w, ok
}
