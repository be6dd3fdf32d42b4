package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/sas"
)

// Defaults for an Agent's in-process retries of transient errors.
const (
	// DefaultTries bounds the runs of a step's Func for one delivery of its
	// request, the first included.
	DefaultTries = 3
	// DefaultBackoff is the longest first wait between two runs; it
	// doubles for each later wait, up to DefaultMaxBackoff.
	DefaultBackoff = 200 * time.Millisecond
	// DefaultMaxBackoff caps the wait between two runs.
	DefaultMaxBackoff = 2 * time.Second
)

// Agent serves the steps of one agent name (the "agent" of a workflow
// step): a Func for each step it does, and optionally one for each step's
// undo. Build it with New and Step before handing it to NewHandler or
// Start; it must not change after that.
//
// Mistakes in the definition (an empty name, a step registered twice, a
// nil Func) do not panic: Err reports them, and NewHandler and Start refuse
// the agent with them, so they stop the cold start rather than an order.
type Agent struct {
	name     string
	steps    map[string]step
	fallback *step
	guards   []func(Request) error
	tries    int
	backoff  time.Duration
	maxWait  time.Duration
	errs     []error

	// The circuit breakers of the steps' dependencies (breaker.go), shared
	// by every request this Agent serves in its process.
	breakerCfg BreakerConfig
	breakerMu  sync.Mutex
	breakers   map[string]*httpcall.Breaker

	// http is the HTTP agent's step runner, when HTTP built the agent
	// (RejectStatuses configures it).
	http *httpStep
}

// step is one step's pair of functions; undo may be nil. dependency names
// the breaker it shares (DependsOn); "" is the agent's.
type step struct {
	do, undo   Func
	dependency string
}

// Option tunes an Agent.
type Option func(*Agent)

// Tries bounds how often a step's Func runs for one attempt when it fails
// transiently (the first run included; default DefaultTries). 1 turns
// in-process retries off: every transient failure then fails the attempt,
// and the step's retry policy decides. Less than 1 is a mistake that Err
// reports.
func Tries(n int) Option {
	return func(a *Agent) {
		if n < 1 {
			a.fail("Tries", fmt.Sprintf("%d: at least 1", n))
		}
		a.tries = n
	}
}

// Backoff sets the waits between in-process runs of a failed step: the
// n-th wait is drawn from [w/2, w] with w = min(maxWait, first·2^(n-1))
// (jittered, so that agents hit by the same outage do not retry in step).
// Defaults DefaultBackoff and DefaultMaxBackoff; both must be positive and
// first at most maxWait.
func Backoff(first, maxWait time.Duration) Option {
	return func(a *Agent) {
		if first <= 0 || maxWait < first {
			a.fail("Backoff", fmt.Sprintf("first %s, max %s: want 0 < first <= max", first, maxWait))
		}
		a.backoff, a.maxWait = first, maxWait
	}
}

// New returns an agent that serves the requests addressed to name, with no
// steps yet.
func New(name string, opts ...Option) *Agent {
	a := &Agent{name: name, steps: map[string]step{}, tries: DefaultTries, backoff: DefaultBackoff, maxWait: DefaultMaxBackoff,
		breakerCfg: BreakerConfig{}.withDefaults()}
	if name == "" {
		a.fail("name", "required: it is the agent name workflow steps give")
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Name is the agent's name.
func (a *Agent) Name() string { return a.name }

// Step registers the step called name: do runs it, undo compensates it.
// undo may be nil for a step with nothing to undo (a compensation request
// for it is then a permanent failure naming the step, since the scheduler
// should never ask for it). opts tune the step (DependsOn). It returns a,
// so that calls chain.
func (a *Agent) Step(name string, do, undo Func, opts ...StepOption) *Agent {
	switch {
	case name == "":
		a.fail("Step", "a step needs a name")
	case do == nil:
		a.fail("Step", fmt.Sprintf("step %q: do is nil", name))
	default:
		if _, dup := a.steps[name]; dup {
			a.fail("Step", fmt.Sprintf("step %q registered twice", name))
		}
		st := step{do: do, undo: undo}
		for _, o := range opts {
			o(&st)
		}
		a.steps[name] = st
	}
	return a
}

// Default registers the functions for every step not registered with
// Step: do for the step, undo (may be nil) for its compensation. Without
// it, a request for an unknown step is a permanent failure naming the step
// and the agent. The HTTP agent is built on it.
func (a *Agent) Default(do, undo Func) *Agent {
	switch {
	case do == nil:
		a.fail("Default", "do is nil")
	case a.fallback != nil:
		a.fail("Default", "set twice")
	default:
		a.fallback = &step{do: do, undo: undo}
	}
	return a
}

// Guard registers a check that every request must pass before any Func of
// the agent runs for it: a non-nil error refuses the request as a
// permanent failure, with "agent <name> refused the request: " and the
// error's text as the reason, and nothing is run. Guards run in the order
// registered, on every request (undos included), before the step is looked
// up. The built-in HTTP agent guards itself this way so that it calls only
// the actions its workflows define, whoever wrote the request.
func (a *Agent) Guard(check func(Request) error) *Agent {
	if check == nil {
		a.fail("Guard", "check is nil")
		return a
	}
	a.guards = append(a.guards, check)
	return a
}

// refused is the first guard's refusal of req, nil when every guard lets
// it through.
func (a *Agent) refused(req Request) error {
	for _, g := range a.guards {
		if err := g(req); err != nil {
			return permanentf(err, "agent %q refused the request: %v", a.name, err)
		}
	}
	return nil
}

// Err reports the mistakes in the agent's definition so far, nil if none.
// They wrap the module's validation error, one per mistake.
func (a *Agent) Err() error {
	return errors.Join(a.errs...)
}

func (a *Agent) fail(field, reason string) {
	a.errs = append(a.errs, fmt.Errorf("agent %q: %w", a.name, &sas.ValidationError{Field: field, Reason: reason}))
}

// lookup is the Func for req and the breaker guarding it (nil: none), or
// the permanent failure to report.
func (a *Agent) lookup(req Request) (Func, *httpcall.Breaker, error) {
	st, ok := a.steps[req.Step]
	if !ok {
		if a.fallback == nil {
			return nil, nil, permanentf(nil, "agent %q has no step %q (it serves: %s)", a.name, req.Step, a.stepNames())
		}
		st = *a.fallback
	}
	if !req.Undo {
		return st.do, a.breakerFor(st.dependency), nil
	}
	if st.undo == nil {
		return nil, nil, permanentf(nil, "agent %q: step %q has no undo, so its compensation cannot be served", a.name, req.Step)
	}
	// An undo has its dependency's breaker of its own: one step's
	// failures (a forward call's) never refuse another step's undo.
	return st.undo, a.breakerFor(undoBreakerOf(a.name, st.dependency)), nil
}

// undoBreakerOf names the breaker the undos of a dependency share.
func undoBreakerOf(agentName, dependency string) string {
	if dependency == "" {
		dependency = "agent:" + agentName
	}
	return dependency + " (undos)"
}

func (a *Agent) stepNames() string {
	names := make([]string, 0, len(a.steps))
	for n := range a.steps {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "no steps"
	}
	return strings.Join(names, ", ")
}

// wait is the jittered wait after the n-th failed run (n from 1).
func (a *Agent) wait(n int) time.Duration {
	w := a.backoff
	for i := 1; i < n && w < a.maxWait; i++ {
		w *= 2
	}
	w = min(w, a.maxWait)
	return w/2 + time.Duration(rand.Int64N(int64(w/2)+1))
}

// runner runs an Agent's steps for the Service (internal/agenthost), which
// decodes the request, sets the deadline, and sends the reply.
type runner struct {
	a     *Agent
	clock Clock
	sleep func(context.Context, time.Duration) error
	log   *slog.Logger
	wrap  func(Func) Func // HandlerConfig.Middleware; nil: none
}

var _ agenthost.Runner = (*runner)(nil)

// Run runs the step's Func until it succeeds, fails for good, or runs out of
// tries or time, and says so in the Service's terms: a result; an
// *agenthost.PermanentError for a failure to report; an *agenthost.RedeliveryError
// for a wait the service asked for; any other error for no outcome.
func (r *runner) Run(ctx context.Context, sreq sas.AgentRequest) (json.RawMessage, error) {
	deadline, _ := ctx.Deadline() // the Service always sets one
	req := requestOf(sreq, deadline)
	req.clock = r.clock
	if err := r.a.refused(req); err != nil {
		return nil, &agenthost.PermanentError{Reason: err.Error(), Err: err}
	}
	fn, brk, err := r.a.lookup(req)
	if err != nil {
		return nil, &agenthost.PermanentError{Reason: err.Error()}
	}
	if r.wrap != nil {
		fn = r.wrap(fn)
	}
	what := fmt.Sprintf("agent %s, step %s", r.a.name, req.Step)
	if req.Undo {
		what += " (undo)"
	}
	tries := r.a.tries
	if req.Tries > 0 {
		tries = req.Tries // the step's own (retry.attempts)
	}
	if req.Undo {
		// An operator's resubmit gave the step a new key; an effect under an
		// older one may exist too (a late success), so the undo undoes each
		// older key first. Undoing a key that never took effect is a no-op
		// by the undo's contract (docs/protocol.md, "Idempotency keys").
		for _, k := range sreq.PriorKeys {
			prior := req
			prior.IdempotencyKey = k
			if _, err := r.run(ctx, prior, fn, brk, what+" under "+k, tries, deadline); err != nil {
				return nil, err
			}
		}
	}
	return r.run(ctx, req, fn, brk, what, tries, deadline)
}

// run runs fn for req until it succeeds, fails for good, or runs out of
// tries or time.
func (r *runner) run(ctx context.Context, req Request, fn Func, brk *httpcall.Breaker, what string, tries int, deadline time.Time) (json.RawMessage, error) {
	for try := 1; ; try++ {
		res, err := r.call(ctx, req, fn, brk)
		if errors.Is(err, ErrCircuitOpen) && brk != nil {
			// Refused: a failed try, and the next ones would be refused
			// too while the breaker rests. The attempt ends now; the
			// scheduler's retry policy says when the step runs again.
			return nil, fmt.Errorf("%s, try %d: %w", what, try, err)
		}
		if err == nil {
			return r.encode(req, res), nil
		}
		c, asked := classify(err)
		if name := agenthost.ErrorTypeOf(err, nil); c != permanent && name != "" && slices.Contains(req.nonRetryable, name) {
			// The step's retry policy lists it: no further try, no
			// further attempt.
			return nil, &agenthost.PermanentError{Reason: fmt.Sprintf("non-retryable error %s: %s", name, err.Error()), Err: err}
		}
		switch {
		case c == permanent:
			return nil, &agenthost.PermanentError{Reason: err.Error(), Err: err, Rejected: rejected(err)}
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%s: the step's time is up (%w): %w", what, context.Cause(ctx), err)
		case c == spent:
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		wait := asked
		if c == transient {
			wait = r.a.wait(try)
		}
		if try >= tries || !r.clock.Now().Add(wait).Before(deadline) {
			if c == later {
				return nil, &agenthost.RedeliveryError{Delay: asked, Err: fmt.Errorf("%s, try %d: %w", what, try, err)}
			}
			return nil, fmt.Errorf("%s: no outcome after %d tries: %w", what, try, err)
		}
		r.log.Info("agent: step failed; trying again", "agent", r.a.name, "order", req.OrderID, "stepName", req.Step,
			"undo", req.Undo, "try", try, "wait", wait.String(), "err", err.Error())
		if serr := r.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("%s: waiting to try again: %w (last failure: %w)", what, serr, err)
		}
	}
}

// call runs fn once behind brk (nil: no breaker). A run brk refuses fails
// with a *circuitOpenError and is not made.
func (r *runner) call(ctx context.Context, req Request, fn Func, brk *httpcall.Breaker) (any, error) {
	if brk == nil {
		return fn(ctx, req)
	}
	ticket, ok := brk.Allow(r.clock.Now())
	if !ok {
		return nil, &circuitOpenError{dependency: r.a.dependencyOf(req)}
	}
	res, err := fn(ctx, req)
	var pe *permanentError
	var ra *retryAfterError
	// A Permanent error is the service answering, and so is a step's own
	// RetryAfter (a poll told "not yet"): neither is a failure of the
	// dependency. A failure, or a context that ended during the run (a
	// hang), is.
	brk.Report(ticket, err != nil && !errors.As(err, &pe) && !errors.As(err, &ra), r.clock.Now())
	return res, err
}

// dependencyOf names the breaker req's step shares, for messages.
func (a *Agent) dependencyOf(req Request) string {
	if st, ok := a.steps[req.Step]; ok && st.dependency != "" {
		return st.dependency
	}
	return "of agent " + a.name
}

// encode makes a Func's result the reply's JSON.
func (r *runner) encode(req Request, res any) json.RawMessage {
	switch v := res.(type) {
	case nil:
		return nil
	case json.RawMessage:
		return v
	}
	b, err := json.Marshal(res)
	if err != nil {
		r.log.Error("agent: the step's result cannot be encoded as JSON; reported done without it",
			"agent", r.a.name, "order", req.OrderID, "stepName", req.Step, "err", err.Error())
		return nil
	}
	return b
}
