package sas

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// StepDef is one step of a workflow: which agent runs it, how long it may
// take, and how it is undone.
type StepDef struct {
	Name   string
	Agent  string // the agent that runs it (e.g. "payments")
	Action string // what the agent does (e.g. "POST /payments")
	Undo   string // what undoes it (e.g. "POST /refunds"); "" if nothing to undo
	// Timeout is one attempt's execution limit, from its pick-up: a claim's
	// CompleteBy is the claim time plus the pick-up allowance plus Timeout
	// (docs/protocol.md, "Deadlines start at pick-up").
	Timeout time.Duration
	// WaitLimit is read and kept so that definitions that set it load, and
	// no longer used: a request never picked up waits until it can no
	// longer be delivered (docs/protocol.md, "Deadlines start at pick-up").
	WaitLimit time.Duration
	// TotalLimit, when set, bounds the step across all its attempts and
	// waits, counted from the order's submission: past it the supervisor
	// gives up on the step (Error, then compensation) instead of waiting or
	// rescuing. Zero: no overall limit.
	TotalLimit time.Duration
	// MaxFailures is the step's failure threshold: the failure at which the
	// supervisor gives up on it. Zero: the supervisor's (SAS_MAX_FAILURES).
	MaxFailures int
	// BaseBackoff and MaxBackoff shape the supervisor's retry delay (it
	// doubles from BaseBackoff up to MaxBackoff). Zero: the supervisor's.
	BaseBackoff, MaxBackoff time.Duration
	// Tries is how many times the agent tries the call within one attempt
	// (AgentRequest.Tries). Zero: the agent's default.
	Tries int
	// BackoffCoefficient multiplies the wait between attempts after each
	// failure (RetryPolicy). Zero: DefaultBackoffCoefficient (2).
	BackoffCoefficient float64
	// NonRetryable names the errors that end the step at once, as a
	// permanent failure, instead of being tried again (AgentRequest.NonRetryable).
	NonRetryable []string
	// UndoRetry is the retry policy of the step's undo, which is its own:
	// an undo rides out an outage by default (DefaultUndoRetry) where the
	// step fails fast. Zero fields: the deployment's undo defaults.
	UndoRetry RetryPolicy
	// UndoNonRetryable names the errors that end the undo at once
	// (CompensationFailed); the step's NonRetryable do not apply to it.
	UndoNonRetryable []string
	// After are the steps this one follows, by index (graph.go): it starts
	// once every one of them is Processed. Nil: the step before it (none
	// for the first step), which is how a straight line is written.
	After []int
	// Callback, when set, makes the step one the outside world completes:
	// it waits up to Callback.Timeout from its claim for a completion
	// (callback.go). Without an Agent it has no action and no undo; with
	// one (AgentToken), its agent starts the work with the step's token
	// in its request, Timeout bounding that call.
	Callback *Callback
	// Timer, when set, makes the step a wait: it has no agent, no action
	// and no undo, and ends when its due time passes (timer.go).
	Timer *Timer
	// When is the step's condition (a CEL expression: skip.go,
	// internal/condition); "" when it always runs.
	When string
	// ForEach, when set, makes the step a fan-out: it runs once per
	// element of a list, each element a record and a request of its own
	// (fanout.go).
	ForEach *ForEach
}

// Retry is the step's retry policy, the deployment's defaults (d) filled in
// where the step sets none.
func (s StepDef) Retry(d RetryPolicy) RetryPolicy {
	p := d
	if s.MaxFailures > 0 {
		p.MaxAttempts = s.MaxFailures
	}
	if s.BaseBackoff > 0 {
		p.InitialInterval = s.BaseBackoff
	}
	if s.MaxBackoff > 0 {
		p.MaxInterval = s.MaxBackoff
	}
	if s.BackoffCoefficient > 0 {
		p.Coefficient = s.BackoffCoefficient
	}
	return p.WithDefaults()
}

// RetryFor is the retry policy of the step's leg: its undo's (undo) with
// the deployment's undo defaults (du) filled in, else Retry(d).
func (s StepDef) RetryFor(undo bool, d, du RetryPolicy) RetryPolicy {
	if undo {
		return s.UndoRetry.Or(du).WithDefaults()
	}
	return s.Retry(d)
}

// NonRetryableFor is what the leg's request carries as its non-retryable
// errors.
func (s StepDef) NonRetryableFor(undo bool) []string {
	if undo {
		return s.UndoNonRetryable
	}
	return s.NonRetryable
}

// Workflow is a list of steps, each following the one before it or the
// steps it names (StepDef.After; graph.go). Workflow logic lives with the
// scheduler; the supervisor never looks at it.
type Workflow struct {
	Name  string
	Steps []StepDef
}

// StepNames lists the step names in order.
func (w Workflow) StepNames() []string {
	out := make([]string, len(w.Steps))
	for i, s := range w.Steps {
		out[i] = s.Name
	}
	return out
}

// Registry holds the workflows a deployment runs.
type Registry map[string]Workflow

// NewRegistry checks and indexes workflows.
func NewRegistry(ws ...Workflow) (Registry, error) {
	r := Registry{}
	for _, w := range ws {
		if w.Name == "" || len(w.Steps) == 0 {
			return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%q needs a name and at least one step", w.Name)}
		}
		if _, dup := r[w.Name]; dup {
			return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%q registered twice", w.Name)}
		}
		for _, s := range w.Steps {
			if s.Timer != nil {
				if err := s.checkTimer(); err != nil {
					return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%s step %s: %v", w.Name, s.Name, err)}
				}
			} else if s.Callback != nil {
				if err := s.checkCallback(); err != nil {
					return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%s step %s: %v", w.Name, s.Name, err)}
				}
			} else if s.Name == "" || s.Agent == "" || s.Timeout <= 0 {
				return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%s: every step needs a name, an agent and a timeout", w.Name)}
			}
			if f := s.ForEach; f != nil {
				if err := s.checkForEach(); err != nil {
					return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%s step %s: %v", w.Name, s.Name, err)}
				}
			}
			if s.WaitLimit < 0 || s.TotalLimit < 0 {
				return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%s step %s: negative wait or total limit", w.Name, s.Name)}
			}
			if s.MaxFailures < 0 || s.BaseBackoff < 0 || s.MaxBackoff < 0 || s.Tries < 0 || s.BackoffCoefficient < 0 ||
				(s.BackoffCoefficient > 0 && s.BackoffCoefficient < 1) {
				return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%s step %s: negative failure threshold or backoff", w.Name, s.Name)}
			}
			if u := s.UndoRetry; u.MaxAttempts < 0 || u.InitialInterval < 0 || u.MaxInterval < 0 || u.Coefficient < 0 ||
				(u.Coefficient > 0 && u.Coefficient < 1) {
				return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%s step %s: negative undo retry policy", w.Name, s.Name)}
			}
			if s.TotalLimit > 0 && s.TotalLimit < s.Timeout {
				return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%s step %s: total limit %s is shorter than one attempt's %s", w.Name, s.Name, s.TotalLimit, s.Timeout)}
			}
		}
		if err := w.checkGraph(); err != nil {
			return nil, err
		}
		r[w.Name] = w
	}
	return r, nil
}

// StepLimits are the limits and retry policy of one step (see StepDef).
type StepLimits struct {
	Timeout, WaitLimit, TotalLimit time.Duration
	MaxFailures                    int
	BaseBackoff, MaxBackoff        time.Duration
	BackoffCoefficient             float64
	// Undo is the undo's retry policy, as the step sets it (zero fields:
	// the deployment's undo defaults).
	Undo RetryPolicy
	// Outside: a callback step, given up at its deadline, never re-driven.
	Outside bool
	// Timer: a wait step, whose deadline is its due time: ended at it,
	// never given up, rescued or waited on (timer.go).
	Timer bool
	// FanOut: a fan-out step (ForEach), whose undo is its elements' undos,
	// each held to its own deadline: the step's undo is waited on while one
	// of them is held.
	FanOut bool
}

// Limits returns the step's limits and retry policy.
func (s StepDef) Limits() StepLimits {
	timeout := s.Timeout
	if s.Callback != nil {
		timeout = s.Callback.Timeout // the longest its claim holds it
	}
	if s.Timer != nil {
		timeout = s.Timer.Lease()
	}
	return StepLimits{Timeout: timeout, WaitLimit: s.WaitLimit, TotalLimit: s.TotalLimit,
		MaxFailures: s.MaxFailures, BaseBackoff: s.BaseBackoff, MaxBackoff: s.MaxBackoff,
		BackoffCoefficient: s.BackoffCoefficient, Undo: s.UndoRetry, Outside: s.Outside(), Timer: s.Timer != nil,
		FanOut: s.ForEach != nil}
}

// Limits returns the limits of every step name in the registry. A step name
// that two workflows define with different limits is an error: the
// supervisor knows a record by its step name alone.
func (r Registry) Limits() (map[string]StepLimits, error) {
	out := map[string]StepLimits{}
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, s := range r[n].Steps {
			l := s.Limits()
			if prev, ok := out[s.Name]; ok && prev != l {
				return nil, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("step %q has limits %+v in one workflow and %+v in %s", s.Name, prev, l, n)}
			}
			out[s.Name] = l
		}
	}
	return out, nil
}

// Has reports whether a workflow is registered.
func (r Registry) Has(name string) bool { _, ok := r[name]; return ok }

// Alert is what an operator is told: an order step that needs a person.
type Alert struct {
	OrderID  string
	Step     int
	StepName string
	State    ProcessState // Error or CompensationFailed
	Reason   string
	Attempts int
	Failures int
	At       time.Time
	Source   string // "scheduler" or "supervisor"

	// ID names the event the alert is about, stable across re-sends (see
	// AlertID), so that a receiver can tell a re-driven alert from a new one.
	ID string
}

// Alerter raises operator alerts (SNS, EventBridge, a log in local runs).
type Alerter interface {
	Alert(ctx context.Context, a Alert) error
}
