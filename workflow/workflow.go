package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/condition"
)

// Limits on a definition.
const (
	// MaxStepTimeout bounds one attempt's execution: an agent runs in a
	// Lambda invocation, which lasts at most 15 minutes.
	MaxStepTimeout = 15 * time.Minute
	// MaxBackoff bounds a retry delay: the supervisor's retry message is
	// delayed by SQS, which delays a message by at most 15 minutes.
	MaxBackoff = 15 * time.Minute
	// MaxMaximumAttempts bounds Retry.MaximumAttempts: a step's attempts
	// (the scheduler's), the first included.
	MaxMaximumAttempts = 100
	// MaxTries bounds Retry.Tries: the agent's calls within one attempt.
	MaxTries = 20

	// MaxFailureThreshold is MaxMaximumAttempts' older name.
	//
	// Deprecated: use MaxMaximumAttempts (an attempt is the scheduler's;
	// docs/workflows.md, "Retries: one word per idea").
	MaxFailureThreshold = MaxMaximumAttempts
	// MaxAttempts is MaxTries' older name: it bounds tries, not attempts.
	//
	// Deprecated: use MaxTries (docs/workflows.md, "Retries: one word per
	// idea").
	MaxAttempts = MaxTries
	// MaxBackoffCoefficient bounds Retry.BackoffCoefficient.
	MaxBackoffCoefficient = 10
	// MaxNonRetryableErrors bounds Retry.NonRetryableErrors (their names
	// travel in every request of the step).
	MaxNonRetryableErrors = 10
	// MaxSteps bounds the steps of one workflow.
	MaxSteps = 50
	// MaxJoin bounds the steps one step may follow (Step.After): the
	// branches one join waits for.
	MaxJoin = 10
	// MaxFork bounds the steps that may follow one step: the branches one
	// step starts.
	MaxFork = 10
	// MaxCallbackTimeout bounds how long a callback step waits for its
	// completion: a year.
	MaxCallbackTimeout = 365 * 24 * time.Hour
	// MaxWait bounds how long a wait step waits: a year, as Lambda durable
	// functions allow.
	MaxWait = 365 * 24 * time.Hour
	// MaxForEach bounds the elements of a fan-out step's list: a longer
	// list fails the step when it starts (docs/workflows.md, "Fan-out over
	// a list").
	MaxForEach = 1000
	// MaxConcurrency bounds ForEach.Concurrency: the elements one fan-out
	// step runs at once. Starting the step claims that many elements in one
	// write (docs/decisions.md, "Fan-out elements are records of their
	// own").
	MaxConcurrency = 50
	// DefaultConcurrency is ForEach.Concurrency when it is 0.
	DefaultConcurrency = 10
)

// Workflow is a list of steps. Each step follows the one before it, or the
// steps its After names: steps whose predecessors are all done run at
// once, in parallel branches, and a step that follows several waits for
// every one of them (a join). When a step fails for good, nothing new
// starts, the steps already running settle, and every step that took
// effect, in every branch, is undone (those with an Undo), newest first.
type Workflow struct {
	// Name is what an order's "workflow" field names: 1-64 characters of
	// A-Z a-z 0-9 . _ -.
	Name  string `json:"name"`
	Steps []Step `json:"steps"`
}

// Step is one action of a workflow.
type Step struct {
	// Name is unique within its workflow (1-64 characters of A-Z a-z 0-9 .
	// _ -). Steps of different workflows may share a name only if they
	// share their limits and retry policy too: the supervisor knows a
	// step by its name.
	Name string `json:"name"`
	// Agent names the agent that runs the step (same characters as Name).
	Agent string `json:"agent,omitempty"`
	// Action is what the agent does, in the agent's terms: for the
	// built-in HTTP agent, "METHOD /path" under its base URL.
	Action string `json:"action,omitempty"`
	// Undo is what undoes the step, in the same terms; empty when nothing
	// needs undoing (typically the last step).
	Undo string `json:"undo,omitempty"`
	// Timeout is one attempt's execution limit, counted from when an agent
	// starts it: more than zero, at most MaxStepTimeout.
	Timeout Duration `json:"timeout,omitempty"`
	// WaitLimit is checked and kept so that a definition that sets it
	// loads, and no longer used: an attempt whose request was never
	// picked up waits until it can no longer be delivered, and is never
	// counted failed for waiting (like Temporal's unlimited
	// schedule-to-start timeout; docs/protocol.md, "Deadlines start at
	// pick-up"). Bound a step in time with TotalLimit.
	WaitLimit Duration `json:"waitLimit,omitempty"`
	// TotalLimit, when set, bounds the step across all its attempts,
	// backoffs and waits, from the order's submission (Temporal's
	// schedule-to-close timeout): past it the step is given up (and the
	// order compensated). Zero: no overall limit. At least Timeout when set.
	TotalLimit Duration `json:"totalLimit,omitempty"`
	// Retry is the step's retry policy; nil: the deployment's.
	Retry *Retry `json:"retry,omitempty"`
	// UndoRetry is the retry policy of the step's undo; nil: the
	// deployment's undo policy, which rides out an outage (20 attempts,
	// 10s doubling to 5m) where Retry's default fails fast. Retry does not
	// apply to the undo, except its Tries.
	UndoRetry *UndoRetry `json:"undoRetry,omitempty"`
	// After names the steps of the workflow this step follows: it starts
	// once every one of them is done, and sees their results and those of
	// the steps they follow. Nil: the step before it (the first step
	// follows none and starts with the order). At most MaxJoin names, no
	// cycle; at most MaxFork steps may follow one step. Steps that follow
	// the same step run in parallel branches (docs/workflows.md, "Branches
	// in parallel").
	After []string `json:"after,omitempty"`
	// When, if set, is the step's condition (docs/workflows.md,
	// "Choices"): a Common Expression Language (CEL) expression over
	// payload (the order's payload), results (the results of the steps
	// before, by step name) and order (order.id, order.workflow), checked
	// when the definition loads to compile and be a bool. It is evaluated
	// when the step before completes (for a first step, at submission):
	// false skips the step (Skipped: never called, nothing to undo), and a
	// condition that cannot be evaluated (a missing field, over its cost
	// limit, not a bool) fails the step for good, its order compensated.
	// Empty: the step always runs.
	When string `json:"when,omitempty"`
	// Callback, when set, makes the step one the outside world completes
	// (docs/workflows.md, "Callback steps"). Without an Agent (Step
	// Functions' .waitForTaskToken without a task) it has no Action,
	// Undo, Timeout, limits or retry policy: when it starts, its token goes
	// out in a waiting status and a notification for people. With an Agent
	// and Action (.waitForTaskToken with a task; "Agent-issued tokens"),
	// and optionally Undo, Timeout (the agent's call, at most the
	// callback's timeout) and Retry, its agent's request carries the token
	// (agent.Request.Token), the agent starts the work, and its answer
	// does not complete the step. Either way a completion with the token
	// (package completion, `sasctl complete`) finishes it with a result,
	// or fails or rejects it; WaitLimit and TotalLimit are refused: the
	// callback's timeout is the step's deadline.
	Callback *Callback `json:"callback,omitempty"`
	// Wait, when set, makes the step a wait (docs/workflows.md, "Wait
	// steps"): Step Functions' Wait state, Temporal's workflow.Sleep. Such
	// a step has no Agent, Action, Undo, Timeout, limits or retry policy:
	// it waits for a duration from when it starts, or until a time taken
	// from the order, then the next step starts. Nothing polls while it
	// waits, and it never ends early.
	Wait *Wait `json:"wait,omitempty"`
	// ForEach, when set, makes the step a fan-out (docs/workflows.md,
	// "Fan-out over a list"): Step Functions' Map state. The step runs once
	// per element of a list taken from the order, at most
	// ForEach.Concurrency at once, each element a request of its own to the
	// step's agent (agent.Request.Item, Index) with its own idempotency key,
	// attempts, deadline and undo. The step's result is the list of the
	// elements' results, in the list's order. An element that fails for
	// good fails the step: no further element starts, and every element
	// that took effect is undone with the rest of the order. Only a step an
	// agent runs may fan out.
	ForEach *ForEach `json:"forEach,omitempty"`
}

// ForEach is what a fan-out step runs over, and how many at once.
type ForEach struct {
	// Items is the list, as a CEL expression over payload, results and
	// order (as When's), checked when the definition loads: a field path
	// such as payload.lineItems is such an expression. It is evaluated when
	// the step starts: a value that is not a list, or a list of more than
	// MaxForEach elements, fails the step for good, as a condition that
	// cannot be evaluated does. An empty list completes the step at once,
	// its result [].
	Items string `json:"items"`
	// Concurrency is how many elements run at once: 1 to MaxConcurrency.
	// Zero: DefaultConcurrency.
	Concurrency int `json:"concurrency,omitempty"`
}

// Limit is how many elements run at once: Concurrency, or
// DefaultConcurrency when it is 0.
func (f ForEach) Limit() int {
	if f.Concurrency == 0 {
		return DefaultConcurrency
	}
	return f.Concurrency
}

// Wait is how long a wait step waits: exactly one of For and Until.
type Wait struct {
	// For is how long the step waits from when it starts: more than zero,
	// at most MaxWait.
	For Duration `json:"for,omitempty"`
	// Until is the time to wait until, as a CEL expression over payload,
	// results and order (as When's), checked when the definition loads:
	// its value is a string in RFC 3339 (a field path such as
	// payload.remindAt is such an expression), a timestamp, or seconds
	// since the Unix epoch. A time already past, or now, ends the wait at
	// once; one more than MaxWait after the step starts is cut to MaxWait.
	// A value that is none of these fails the step when it starts, as a
	// condition that cannot be evaluated does.
	Until string `json:"until,omitempty"`
}

// Callback is how long a callback step waits for its completion.
type Callback struct {
	// Timeout is how long the step waits, from its start: more than zero,
	// at most MaxCallbackTimeout. Past it the step is given up (an
	// operator alerted, the order compensated).
	Timeout Duration `json:"timeout"`
	// Heartbeat, when set, is the longest the step may go without a
	// completion or a heartbeat (completion.Client.Heartbeat) before it is
	// given up the same way; at most Timeout. Zero: none required.
	Heartbeat Duration `json:"heartbeat,omitempty"`
}

// Retry is the step's retry policy (docs/workflows.md, "Retry policy"), in
// the terms of Step Functions' Retry and Temporal's RetryPolicy. An attempt
// is one request to the step's agent, which runs the step's call up to
// Tries times within the step's Timeout. An attempt fails when its agent
// reports that every try failed transiently (or its breaker refused them,
// or the timeout passed), or when the supervisor finds it past its deadline
// with nothing left in the queues for it. After the n-th failure the next
// attempt waits InitialInterval·BackoffCoefficient^(n-1), at most
// MaximumInterval, with jitter (drawn from the upper half); the
// MaximumAttempts-th failure gives the step up: Error, an operator alert,
// and the order's compensation. A permanent refusal (agent.Permanent), and
// an error named in NonRetryableErrors, give it up at once.
//
// With the defaults (3 attempts, 5s doubling) a step whose dependency is
// down reaches Error within 3 × Timeout + 15s, and far sooner when its
// calls fail fast. To ride out an outage instead, give the step many
// attempts and a long MaximumInterval (or a TotalLimit), or pause its
// agent (docs/workflows.md, "Riding out an outage").
//
// The older names stay valid: FailureThreshold is MaximumAttempts,
// Attempts is Tries, Backoff.Base and Backoff.Max are InitialInterval and
// MaximumInterval. Setting an old and a new name to different values is an
// error.
type Retry struct {
	// MaximumAttempts is the number of attempts, the first included: 1
	// never retries. Zero: the deployment's (SAS_MAX_FAILURES, 3).
	MaximumAttempts int `json:"maximumAttempts,omitempty"`
	// InitialInterval is the wait after the first failure. Zero: the
	// deployment's (5s).
	InitialInterval Duration `json:"initialInterval,omitempty"`
	// BackoffCoefficient multiplies the wait after each further failure:
	// at least 1 (a constant wait), at most MaxBackoffCoefficient. Zero: 2.
	BackoffCoefficient float64 `json:"backoffCoefficient,omitempty"`
	// MaximumInterval caps the wait, at most MaxBackoff (15m, SQS's
	// longest delay). Zero: the deployment's (15m).
	MaximumInterval Duration `json:"maximumInterval,omitempty"`
	// NonRetryableErrors name the errors that give the step up at once:
	// the names of agent.Named errors, or "Timeout" (the step's timeout
	// passed) and "CircuitOpen" (its breaker refused the call).
	NonRetryableErrors []string `json:"nonRetryableErrors,omitempty"`
	// Tries is how many times the agent runs the step's call within one
	// attempt, with jittered backoff between tries, while the step's
	// timeout allows (agent.Request.Tries). Zero: the agent's default (3).
	// At most MaxTries.
	Tries int `json:"tries,omitempty"`

	// FailureThreshold is MaximumAttempts' older name.
	//
	// Deprecated: use MaximumAttempts. A definition that sets it loads
	// and means what it did.
	FailureThreshold int `json:"failureThreshold,omitempty"`
	// Attempts is Tries' older name: it counts tries, not attempts.
	//
	// Deprecated: use Tries. A definition that sets it loads and means
	// what it did.
	Attempts int `json:"attempts,omitempty"`
	// Backoff holds InitialInterval and MaximumInterval under their older
	// names.
	//
	// Deprecated: use InitialInterval and MaximumInterval.
	Backoff *Backoff `json:"backoff,omitempty"`
}

// Policy is the retry policy r states, its older names read as the new
// ones; zero fields take the deployment's defaults. A nil r states none.
func (r *Retry) Policy() Retry {
	if r == nil {
		return Retry{}
	}
	p := Retry{MaximumAttempts: r.MaximumAttempts, InitialInterval: r.InitialInterval, BackoffCoefficient: r.BackoffCoefficient,
		MaximumInterval: r.MaximumInterval, NonRetryableErrors: r.NonRetryableErrors, Tries: r.Tries}
	if p.MaximumAttempts == 0 {
		p.MaximumAttempts = r.FailureThreshold
	}
	if p.Tries == 0 {
		p.Tries = r.Attempts
	}
	if b := r.Backoff; b != nil {
		if p.InitialInterval == 0 {
			p.InitialInterval = b.Base
		}
		if p.MaximumInterval == 0 {
			p.MaximumInterval = b.Max
		}
	}
	return p
}

// UndoRetry is the retry policy of a step's undo (docs/workflows.md, "Undo
// retry policy"), the fields as in Retry. An undo runs for an order that
// has already failed, and an undo that gives up (CompensationFailed) leaves
// its effect for an operator to undo by hand, which is worse than waiting:
// so by default an undo rides out an outage (20 attempts, the wait doubling
// from 10s to 5m: 38 to 75 minutes) where a step fails fast. Its
// NonRetryableErrors are its own; the step's do not apply to it.
type UndoRetry struct {
	// MaximumAttempts is the number of attempts of the undo, the first
	// included. Zero: the deployment's (20).
	MaximumAttempts int `json:"maximumAttempts,omitempty"`
	// InitialInterval is the wait after the first failure. Zero: 10s.
	InitialInterval Duration `json:"initialInterval,omitempty"`
	// BackoffCoefficient multiplies the wait after each further failure:
	// at least 1, at most MaxBackoffCoefficient. Zero: 2.
	BackoffCoefficient float64 `json:"backoffCoefficient,omitempty"`
	// MaximumInterval caps the wait, at most MaxBackoff. Zero: 5m.
	MaximumInterval Duration `json:"maximumInterval,omitempty"`
	// NonRetryableErrors name the errors that give the undo up at once.
	NonRetryableErrors []string `json:"nonRetryableErrors,omitempty"`
}

// Backoff is a delay that doubles with each failure: Base after the first,
// never more than Max.
type Backoff struct {
	Base Duration `json:"base,omitempty"` // zero: the deployment's
	Max  Duration `json:"max,omitempty"`  // zero: the deployment's; at least Base, at most MaxBackoff
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("30s", "1m30s").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`must be a duration string such as "30s"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf(`%q is not a duration (write it like "30s" or "1m30s")`, s)
	}
	*d = Duration(v)
	return nil
}

// ErrInvalid is what every definition error wraps.
var ErrInvalid = errors.New("invalid workflow definition")

// FieldError says what is wrong with a definition, and where.
type FieldError struct {
	File   string // the file, when the definition came from one
	Path   string // the field, e.g. "workflows[0].steps[2].timeout"
	Reason string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Unwrap makes every FieldError an ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

var namePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

const maxActionLen = 256

// Validate checks workflows as one deployment's set: every field, unique
// workflow names, and steps that share a name across workflows sharing their
// limits. It returns every problem found, each a *FieldError, joined.
func Validate(ws ...Workflow) error {
	return validate("", ws)
}

func validate(file string, ws []Workflow) error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &FieldError{File: file, Path: path, Reason: fmt.Sprintf(format, args...)})
	}
	if len(ws) == 0 {
		bad("workflows", "at least one workflow is required")
	}
	seen := map[string]int{}
	type named struct {
		path string
		step Step
	}
	byStep := map[string]named{}
	for i, w := range ws {
		wp := fmt.Sprintf("workflows[%d]", i)
		switch {
		case !namePattern.MatchString(w.Name):
			bad(wp+".name", "%q: must be 1-64 characters of A-Z a-z 0-9 . _ -", w.Name)
		case seen[w.Name] > 0:
			bad(wp+".name", "%q is already the name of workflows[%d]", w.Name, seen[w.Name]-1)
		default:
			seen[w.Name] = i + 1
		}
		if len(w.Steps) == 0 || len(w.Steps) > MaxSteps {
			bad(wp+".steps", "must have 1 to %d steps, not %d", MaxSteps, len(w.Steps))
		}
		validateGraph(wp, w, bad)
		names := map[string]int{}
		for j, s := range w.Steps {
			sp := fmt.Sprintf("%s.steps[%d]", wp, j)
			validateStep(sp, s, bad)
			if namePattern.MatchString(s.Name) {
				if k, dup := names[s.Name]; dup {
					bad(sp+".name", "%q is already the name of step %d of this workflow", s.Name, k)
				}
				names[s.Name] = j
				if prev, ok := byStep[s.Name]; ok && !sameLimits(prev.step, s) {
					bad(sp, "step %q has other limits or retry policy than %s, a step of the same name: steps that share a name must share them (the supervisor knows a step by its name)", s.Name, prev.path)
				} else if !ok {
					byStep[s.Name] = named{sp, s}
				}
			}
		}
	}
	return errors.Join(errs...)
}

func validateStep(sp string, s Step, bad func(path, format string, args ...any)) {
	if !namePattern.MatchString(s.Name) {
		bad(sp+".name", "%q: must be 1-64 characters of A-Z a-z 0-9 . _ -", s.Name)
	}
	if s.When != "" {
		if _, err := condition.Compile(s.When); err != nil {
			bad(sp+".when", "step %q: the condition %s", s.Name, err)
		}
	}
	if f := s.ForEach; f != nil {
		if _, err := condition.CompileList(f.Items); err != nil {
			bad(sp+".forEach.items", "step %q: the list %s", s.Name, err)
		}
		if f.Concurrency < 0 || f.Concurrency > MaxConcurrency {
			bad(sp+".forEach.concurrency", "%d: must be between 1 and %d (0: %d)", f.Concurrency, MaxConcurrency, DefaultConcurrency)
		}
		if s.Wait != nil || s.Callback != nil {
			bad(sp+".forEach", "only a step an agent runs may fan out, not a wait or callback step")
		}
	}
	if s.Wait != nil {
		validateWait(sp, s, bad)
		return
	}
	if s.Callback != nil {
		validateCallback(sp, s, bad)
		if s.Agent == "" {
			return
		}
		// An agent hands out its token: the rest is an agent step's.
	}
	if !namePattern.MatchString(s.Agent) {
		bad(sp+".agent", "%q: must name an agent, 1-64 characters of A-Z a-z 0-9 . _ -", s.Agent)
	}
	if strings.TrimSpace(s.Action) == "" || len(s.Action) > maxActionLen {
		bad(sp+".action", "required, at most %d bytes", maxActionLen)
	}
	if len(s.Undo) > maxActionLen {
		bad(sp+".undo", "at most %d bytes", maxActionLen)
	}
	if s.Timeout <= 0 || s.Timeout.D() > MaxStepTimeout {
		bad(sp+".timeout", "%s: must be more than 0 and at most %s", s.Timeout.D(), MaxStepTimeout)
	}
	if s.WaitLimit < 0 {
		bad(sp+".waitLimit", "%s: must not be negative", s.WaitLimit.D())
	}
	if s.TotalLimit < 0 || (s.TotalLimit > 0 && s.TotalLimit < s.Timeout) {
		bad(sp+".totalLimit", "%s: must be 0 (no overall limit) or at least the timeout %s", s.TotalLimit.D(), s.Timeout.D())
	}
	if u := s.UndoRetry; u != nil {
		up := sp + ".undoRetry"
		if t := u.MaximumAttempts; t < 0 || t > MaxMaximumAttempts {
			bad(up+".maximumAttempts", "%d: must be between 1 and %d (0: the deployment's)", t, MaxMaximumAttempts)
		}
		validateIntervals(up, u.InitialInterval, u.MaximumInterval, u.BackoffCoefficient, u.NonRetryableErrors, bad)
		if strings.TrimSpace(s.Undo) == "" {
			bad(up, "the step has no undo")
		}
	}
	if s.Retry == nil {
		return
	}
	r := s.Retry
	if t := r.FailureThreshold; t < 0 || t > MaxMaximumAttempts {
		bad(sp+".retry.failureThreshold", "%d: must be between 1 and %d (0: the deployment's)", t, MaxMaximumAttempts)
	}
	if t := r.MaximumAttempts; t < 0 || t > MaxMaximumAttempts {
		bad(sp+".retry.maximumAttempts", "%d: must be between 1 and %d (0: the deployment's)", t, MaxMaximumAttempts)
	}
	if a := r.Attempts; a < 0 || a > MaxTries {
		bad(sp+".retry.attempts", "%d: must be between 1 and %d (0: the agent's)", a, MaxTries)
	}
	if a := r.Tries; a < 0 || a > MaxTries {
		bad(sp+".retry.tries", "%d: must be between 1 and %d (0: the agent's)", a, MaxTries)
	}
	validateIntervals(sp+".retry", r.InitialInterval, r.MaximumInterval, r.BackoffCoefficient, r.NonRetryableErrors, bad)
	conflict := func(older, newer string, a, b any, set bool) {
		if set && a != b {
			bad(sp+".retry."+newer, "%v, but its older name %s says %v: write one of them", b, older, a)
		}
	}
	conflict("failureThreshold", "maximumAttempts", r.FailureThreshold, r.MaximumAttempts, r.FailureThreshold != 0 && r.MaximumAttempts != 0)
	conflict("attempts", "tries", r.Attempts, r.Tries, r.Attempts != 0 && r.Tries != 0)
	if b := r.Backoff; b != nil {
		conflict("backoff.base", "initialInterval", b.Base.D(), r.InitialInterval.D(), b.Base != 0 && r.InitialInterval != 0)
		conflict("backoff.max", "maximumInterval", b.Max.D(), r.MaximumInterval.D(), b.Max != 0 && r.MaximumInterval != 0)
	}
	if b := r.Backoff; b != nil {
		switch {
		case b.Base < 0 || b.Base.D() > MaxBackoff:
			bad(sp+".retry.backoff.base", "%s: must be between 0 and %s", b.Base.D(), MaxBackoff)
		case b.Max < 0 || b.Max.D() > MaxBackoff:
			bad(sp+".retry.backoff.max", "%s: must be between 0 and %s", b.Max.D(), MaxBackoff)
		case b.Max > 0 && b.Max < b.Base:
			bad(sp+".retry.backoff.max", "%s is below the base %s", b.Max.D(), b.Base.D())
		}
	}
}

// validateCallback checks a callback step: its wait, and, without an
// agent, nothing that only a step an agent runs has; with one (its agent
// starts the work and hands out the token), no limit that its wait's
// deadline makes meaningless, and a call that fits in the wait.
func validateCallback(sp string, s Step, bad func(path, format string, args ...any)) {
	c := s.Callback
	if c.Timeout <= 0 || c.Timeout.D() > MaxCallbackTimeout {
		bad(sp+".callback.timeout", "%s: must be more than 0 and at most %s", c.Timeout.D(), MaxCallbackTimeout)
	}
	if c.Heartbeat < 0 || c.Heartbeat > c.Timeout {
		bad(sp+".callback.heartbeat", "%s: must be 0 (none) or at most the timeout %s", c.Heartbeat.D(), c.Timeout.D())
	}
	if s.Agent != "" {
		for _, f := range []struct {
			field string
			set   bool
		}{{"waitLimit", s.WaitLimit != 0}, {"totalLimit", s.TotalLimit != 0}} {
			if f.set {
				bad(sp+"."+f.field, "a callback step has none: its deadline is its callback.timeout, counted from its start")
			}
		}
		if s.Timeout > c.Timeout {
			bad(sp+".timeout", "%s: the agent's call must fit in the callback's wait of %s, which counts from the step's start", s.Timeout.D(), c.Timeout.D())
		}
		return
	}
	for _, f := range []struct {
		field string
		set   bool
	}{{"action", s.Action != ""}, {"undo", s.Undo != ""}, {"timeout", s.Timeout != 0},
		{"waitLimit", s.WaitLimit != 0}, {"totalLimit", s.TotalLimit != 0}, {"retry", s.Retry != nil}, {"undoRetry", s.UndoRetry != nil}} {
		if f.set {
			bad(sp+"."+f.field, "a callback step without an agent has none: nothing runs it, the outside world completes it")
		}
	}
}

// validateWait checks a wait step: its wait, and nothing that only a step
// an agent runs, or a callback step, has.
func validateWait(sp string, s Step, bad func(path, format string, args ...any)) {
	w := s.Wait
	switch {
	case (w.For != 0) == (w.Until != ""):
		bad(sp+".wait", "needs exactly one of for (a duration) and until (a time)")
	case w.For < 0 || w.For.D() > MaxWait:
		bad(sp+".wait.for", "%s: must be more than 0 and at most %s", w.For.D(), MaxWait)
	case w.Until != "":
		if _, err := condition.CompileTime(w.Until); err != nil {
			bad(sp+".wait.until", "step %q: the time %s", s.Name, err)
		}
	}
	for _, f := range []struct {
		field string
		set   bool
	}{{"agent", s.Agent != ""}, {"action", s.Action != ""}, {"undo", s.Undo != ""}, {"timeout", s.Timeout != 0},
		{"waitLimit", s.WaitLimit != 0}, {"totalLimit", s.TotalLimit != 0}, {"retry", s.Retry != nil}, {"undoRetry", s.UndoRetry != nil},
		{"callback", s.Callback != nil}} {
		if f.set {
			bad(sp+"."+f.field, "a wait step has none: nothing runs it")
		}
	}
}

// validateIntervals checks what a retry policy (at path p) and an undo's
// share: the intervals, the coefficient and the non-retryable errors.
func validateIntervals(p string, initial, maximum Duration, coefficient float64, nonRetryable []string, bad func(path, format string, args ...any)) {
	if c := coefficient; c != 0 && (c < 1 || c > MaxBackoffCoefficient) {
		bad(p+".backoffCoefficient", "%v: must be between 1 and %d (0: 2)", c, MaxBackoffCoefficient)
	}
	for _, d := range []struct {
		field string
		v     Duration
	}{{"initialInterval", initial}, {"maximumInterval", maximum}} {
		if d.v < 0 || d.v.D() > MaxBackoff {
			bad(p+"."+d.field, "%s: must be between 0 and %s", d.v.D(), MaxBackoff)
		}
	}
	if maximum > 0 && maximum < initial {
		bad(p+".maximumInterval", "%s is below the initial interval %s", maximum.D(), initial.D())
	}
	if len(nonRetryable) > MaxNonRetryableErrors {
		bad(p+".nonRetryableErrors", "at most %d names, not %d", MaxNonRetryableErrors, len(nonRetryable))
	}
	for k, n := range nonRetryable {
		if !namePattern.MatchString(n) {
			bad(fmt.Sprintf("%s.nonRetryableErrors[%d]", p, k), "%q: must be 1-64 characters of A-Z a-z 0-9 . _ -", n)
		}
	}
}

// sameLimits reports whether two steps agree on everything the supervisor
// reads by step name.
func sameLimits(a, b Step) bool {
	ra, rb := a.Retry.Policy(), b.Retry.Policy()
	var ua, ub UndoRetry
	if a.UndoRetry != nil {
		ua = *a.UndoRetry
	}
	if b.UndoRetry != nil {
		ub = *b.UndoRetry
	}
	var ca, cb Callback
	if a.Callback != nil {
		ca = *a.Callback
	}
	if b.Callback != nil {
		cb = *b.Callback
	}
	var wa, wb Wait
	if a.Wait != nil {
		wa = *a.Wait
	}
	if b.Wait != nil {
		wb = *b.Wait
	}
	return a.Timeout == b.Timeout && a.WaitLimit == b.WaitLimit && a.TotalLimit == b.TotalLimit &&
		(a.Callback != nil) == (b.Callback != nil) && ca == cb && (a.Wait != nil) == (b.Wait != nil) && (wa.For == 0) == (wb.For == 0) &&
		(wa.Until == "") == (wb.Until == "") && (wa.Until != "" || wa.For == wb.For) &&
		ra.MaximumAttempts == rb.MaximumAttempts && ra.InitialInterval == rb.InitialInterval &&
		ra.MaximumInterval == rb.MaximumInterval && ra.BackoffCoefficient == rb.BackoffCoefficient &&
		ua.MaximumAttempts == ub.MaximumAttempts && ua.InitialInterval == ub.InitialInterval &&
		ua.MaximumInterval == ub.MaximumInterval && ua.BackoffCoefficient == ub.BackoffCoefficient
}
