// Package supervisor is the Supervisor of the Scheduler Agent Supervisor
// pattern (docs/pattern.md §2, §4.6; docs/protocol.md "Supervisor"). Each run finds
// the steps whose deadline has passed (Processing and Compensating past
// CompleteBy, Pending past its pick-up deadline), and for each one either
// hands it back to the schedulers after a growing delay or, at the failure
// threshold, gives up on it, alerts an operator and, for a forward step, asks
// the scheduler to compensate the order. Only what ran can fail: a step
// whose request may still be queued is waited on, and one no scheduler
// claimed is handed back with no failure counted (decide.go).
//
// Several supervisors may run at once: every write is fenced on the record
// as the index showed it, so exactly one of them acts on a stuck step and
// the others lose the race, which is counted, not treated as an error.
//
// The shape follows river's job rescuer: RunOnce does one bounded sweep and
// is what tests and the Lambda handler call; Run is a ticker around it.
//
// Each run's Report is logged as one structured line and published as
// CloudWatch Embedded Metric Format on stdout (see report.go for why EMF
// rather than PutMetricData).
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// AlertSource is the Source of the alerts the supervisor raises.
const AlertSource = "supervisor"

// sweptStates are the states that carry a deadline, in the order a run
// visits them.
var sweptStates = []sas.ProcessState{sas.Processing, sas.Pending, sas.Compensating}

// maxReportedErrors bounds the errors RunOnce returns in full; the report
// counts them all.
const maxReportedErrors = 10

// Supervisor sweeps for stuck steps. It is safe for concurrent use.
type Supervisor struct {
	cfg    Config
	policy policy
	defs   *sas.Definitions // the definition each order runs on
	mu     sync.Mutex       // one metrics line at a time
}

// New fills in the configuration's defaults, checks it and returns a
// supervisor.
func New(cfg Config) (*Supervisor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Supervisor{
		cfg: cfg,
		policy: policy{MaxFailures: cfg.MaxFailures, BaseBackoff: cfg.BaseBackoff, MaxBackoff: cfg.MaxBackoff,
			Undo: cfg.UndoRetry, PickupTimeout: cfg.PickupTimeout, WaitLimit: cfg.WaitLimit, Horizon: cfg.DeliveryHorizon, Steps: cfg.Steps},
		defs: sas.NewDefinitions(cfg.Workflows, cfg.Store),
	}, nil
}

// Config returns the configuration in force, defaults included.
func (s *Supervisor) Config() Config { return s.cfg }

// Run runs a sweep at once and then every interval until ctx ends, for the
// local runtime (in Lambda the EventBridge schedule is the ticker). A sweep's
// errors are in its logged report and do not stop the loop. It returns
// ctx.Err().
func (s *Supervisor) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return fmt.Errorf("running the supervisor: %w", &sas.ValidationError{Field: "interval", Reason: fmt.Sprintf("%s: want a positive interval", interval)})
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	return s.run(ctx, t.C)
}

func (s *Supervisor) run(ctx context.Context, ticks <-chan time.Time) error {
	for {
		_, _ = s.RunOnce(ctx) // logged and published by RunOnce
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticks:
		}
	}
}

// RunOnce does one sweep: page by page through every swept state, until
// nothing due is left that it has not looked at, the time budget is spent, or
// ctx ends. It logs the report as one line, publishes it as metrics, and
// returns it; the error is non-nil when something failed (a query, a write, a
// send, an alert) or ctx ended, and the report says what was done anyway.
func (s *Supervisor) RunOnce(ctx context.Context) (Report, error) {
	start := s.cfg.Clock.Now()
	r := &sweep{
		s:        s,
		ctx:      ctx,
		deadline: start.Add(s.cfg.Budget),
		seen:     map[sas.StepKey]bool{},
		rep:      Report{Actor: s.cfg.Actor, Started: start, ByState: map[sas.ProcessState]StateCounts{}},
	}
	r.owed()
	if r.readPauses() {
		r.all()
	}
	r.rep.Elapsed = s.cfg.Clock.Now().Sub(start)
	r.rep.log(ctx, s.cfg.Logger)
	s.publish(r.rep)
	return r.rep, r.err()
}

func (s *Supervisor) publish(rep Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.cfg.Metrics.Write(rep.emf()); err != nil {
		s.cfg.Logger.Warn("writing the metrics line", slog.String("err", err.Error()))
	}
}

// sweep is the state of one RunOnce.
type sweep struct {
	s        *Supervisor
	ctx      context.Context
	deadline time.Time
	// seen holds every record this run has decided on. A record is acted on
	// at most once per run: a stale index entry (DynamoDB's index is
	// eventually consistent) is not written twice, and a step handed back
	// with a short pick-up deadline is not run through all its failures
	// within one sweep before any scheduler had the chance to claim it.
	seen map[sas.StepKey]bool
	rep  Report
	errs []error
	// backlog is what the backlog queues held when first needed this run
	// (-1: not configured, or the read failed); read once per run, and only
	// when a held step is due.
	backlog     int
	backlogRead bool
	// limits holds the limits of each order's steps read this run, by
	// order id (nil: the order or its definition could not be read).
	limits map[string][]sas.StepLimits
	// traces holds the trace context of each order read this run (for
	// its limits), which its retry message carries; an order not read
	// sends none, and the scheduler takes the stored one.
	traces map[string]string
	// pauses are the agents' pauses as read at the start of the run.
	pauses sas.Pauses
}

// stepLimits are the limits rec's step has on the definition its order
// runs on, the defaults filled in. The order is read once per run and only
// for a due step, which is off the happy path. A step whose order or
// definition is not to be found gets the deployed limits by step name; one
// whose read failed otherwise (the store throttled or unavailable) gets
// none, ok false: it is left to a later sweep, since the deployed limits
// may be tighter than its own and give it up early.
func (r *sweep) stepLimits(rec sas.StepRecord) (lim sas.StepLimits, ok bool) {
	p := r.s.policy
	if len(r.s.cfg.Workflows) == 0 || !sas.Due(rec, r.s.cfg.Clock.Now()) {
		return p.limits(rec.StepName, sas.StepLimits{}, false), true
	}
	steps, read := r.limits[rec.OrderID]
	if !read {
		if steps, ok = r.readLimits(rec); !ok {
			return sas.StepLimits{}, false
		}
		if r.limits == nil {
			r.limits = map[string][]sas.StepLimits{}
		}
		r.limits[rec.OrderID] = steps
	}
	if k := sas.StepOf(rec.Step); k < len(steps) {
		// An element of a fan-out has its step's limits (docs/decisions.md,
		// "Fan-out elements are records of their own").
		return p.limits(rec.StepName, steps[k], true), true
	}
	return p.limits(rec.StepName, sas.StepLimits{}, false), true
}

// readLimits reads the limits of the steps of rec's order: nil (the
// deployed ones) when the order or its definition is not to be found, and
// ok false when a read failed otherwise.
func (r *sweep) readLimits(rec sas.StepRecord) (steps []sas.StepLimits, ok bool) {
	cfg := r.s.cfg
	r.rep.Reads.Requests++
	v, err := cfg.Store.GetOrder(r.ctx, rec.OrderID)
	if err != nil {
		if !errors.Is(err, sas.ErrNotFound) {
			cfg.Logger.LogAttrs(r.ctx, slog.LevelWarn, "reading the order for its step limits; the step is left to a later sweep",
				stepAttrs(rec, slog.String("err", err.Error()))...)
			return nil, false
		}
		cfg.Logger.LogAttrs(r.ctx, slog.LevelWarn, "reading the order for its step limits; using the deployed limits",
			stepAttrs(rec, slog.String("err", err.Error()))...)
		return nil, true
	}
	if r.traces == nil {
		r.traces = map[string]string{}
	}
	r.traces[rec.OrderID] = v.Order.Trace
	w, _, err := r.s.defs.Get(r.ctx, v.Order.Workflow, v.Order.Version)
	if err != nil {
		attrs := stepAttrs(rec, slog.String("workflow", v.Order.Workflow), slog.String("version", v.Order.Version),
			slog.String("err", err.Error()))
		if !errors.Is(err, sas.ErrNotFound) {
			cfg.Logger.LogAttrs(r.ctx, slog.LevelWarn, "finding the definition the order runs on; the step is left to a later sweep", attrs...)
			return nil, false
		}
		cfg.Logger.LogAttrs(r.ctx, slog.LevelWarn, "finding the definition the order runs on; using the deployed limits", attrs...)
		return nil, true
	}
	out := make([]sas.StepLimits, len(w.Steps))
	for i, s := range w.Steps {
		out[i] = s.Limits()
	}
	return out, true
}

// queueBacklog returns the messages the backlog queues hold, reading them
// on the run's first call. A failed read is an error of the run, and the
// run then treats every passed deadline as a failure, as without queues.
func (r *sweep) queueBacklog() int {
	if r.backlogRead {
		return r.backlog
	}
	r.backlogRead, r.backlog = true, -1
	cfg := r.s.cfg
	if len(cfg.BacklogQueueURLs) == 0 {
		return -1
	}
	dr := cfg.Queue.(sas.DepthReader) // checked by New
	total := 0
	for _, url := range cfg.BacklogQueueURLs {
		d, err := dr.Depth(r.ctx, url)
		if err != nil {
			r.fail(sas.Processing, fmt.Errorf("reading the depth of %s: %w", url, err))
			return -1
		}
		// Visible and in flight only: a delayed message is an attempt
		// scheduled after a failed one (issue 19), not a request waiting
		// its turn, and must not make a stuck step look busy.
		total += d.Backlog()
	}
	r.backlog = total
	r.rep.Backlog = total
	return total
}

func (r *sweep) all() {
	active := append([]sas.ProcessState(nil), sweptStates...)
	// One page per state per round, so that a flood of one kind (say,
	// thousands of expired Processing steps after an agent outage) cannot
	// starve the others until the budget runs out.
	for len(active) > 0 {
		var next []sas.ProcessState
		for _, state := range active {
			if stop := r.stop(); stop != "" {
				r.rep.Stopped = stop
				return
			}
			if r.page(state) {
				next = append(next, state)
			}
		}
		active = next
	}
	r.rep.Stopped = StopDrained
}

// readPauses reads the agents' pauses. Without them the run decides
// nothing: it might give up on a paused agent's steps.
func (r *sweep) readPauses() bool {
	if r.s.cfg.Pauses == nil {
		return true
	}
	ps, err := r.s.cfg.Pauses.AgentPauses(r.ctx)
	if err != nil {
		r.fail(sas.Processing, fmt.Errorf("reading the agents' pauses: %w", err))
		return false
	}
	r.pauses = ps
	return true
}

// stop says whether the run must end, and why.
func (r *sweep) stop() Stop {
	switch {
	case r.ctx.Err() != nil:
		return StopCanceled
	case !r.s.cfg.Clock.Now().Before(r.deadline):
		return StopBudget
	}
	return ""
}

// page acts on one page of due records in one state. It reports whether
// another page may hold more: false once a query returns nothing this run
// has not already seen.
func (r *sweep) page(state sas.ProcessState) bool {
	cfg := r.s.cfg
	now := cfg.Clock.Now()
	res, err := cfg.Store.FindDue(r.ctx, sas.FindDueParams{State: state, Now: now, Limit: cfg.PageSize})
	r.rep.Pages++
	if err != nil {
		r.fail(state, fmt.Errorf("finding due %s steps: %w", state, err))
		return false
	}
	r.rep.Reads.Requests += res.Stats.Requests
	r.rep.Reads.ItemsRead += res.Stats.ItemsRead

	fresh := make([]sas.StepRecord, 0, len(res.Records))
	for _, rec := range res.Records {
		if !rec.DueAt.After(now) {
			r.rep.observeDue(now, rec.DueAt)
		}
		if !r.seen[rec.Key()] {
			fresh = append(fresh, rec)
		}
	}
	if len(fresh) == 0 {
		return false
	}
	// FindDue's limit is per index shard, so a page can hold up to
	// shards×PageSize records. The oldest PageSize of them are exactly the
	// oldest PageSize due overall; the rest come back on the next page.
	sort.SliceStable(fresh, func(i, j int) bool { return fresh[i].DueAt.Before(fresh[j].DueAt) })
	if len(fresh) > cfg.PageSize {
		fresh = fresh[:cfg.PageSize]
	}

	var out effects
	for _, rec := range fresh {
		if r.stop() != "" {
			break // what was done so far is still sent below
		}
		r.seen[rec.Key()] = true
		r.act(rec, &out)
	}
	r.flush(&out)
	return true
}

// act decides on one record and makes the fenced write. Messages and alerts
// wait in out until the page is done, so that one page costs one batched send.
func (r *sweep) act(rec sas.StepRecord, out *effects) {
	cfg := r.s.cfg
	now := cfg.Clock.Now()
	// An operator's pause (docs/console.md, "Pausing an agent"): a paused
	// agent's steps are left alone, and afterwards judged with the time
	// paused left out. The write below is fenced on rec as stored.
	seen, hold := r.pauses.Adjust(rec, cfg.StepAgents[rec.StepName]...)
	if hold {
		if sas.Due(rec, now) {
			r.rep.Held++
		}
		return
	}
	lim, ok := r.stepLimits(seen)
	if !ok {
		return // its own limits unread: judged by a later sweep, not by the deployed ones
	}
	if seen.ProcessState.Leased() && seen.LockedBy != "" && sas.Due(seen, now) && !lim.Timer {
		// For the report only: no decision reads it. (A wait step's due
		// time is no stall: its queues are not read.)
		r.queueBacklog()
	}
	d := r.s.policy.decide(seen, lim, now)
	if d.Action != skip && fanOutUndo(seen, lim) {
		if d, ok = r.decideFanOutUndo(seen, lim, now, d); !ok { // fanout.go
			return
		}
	}
	if d.Action == skip {
		return
	}
	state, key := rec.ProcessState, rec.Key()
	r.rep.DueFound++
	r.rep.count(state, func(c *StateCounts) { c.Due++ })

	switch d.Action {
	case wait:
		// No failure, no message: the request already in the queue is
		// the one live request for the step.
		got, err := cfg.Store.Wait(r.ctx, sas.WaitParams{
			Key: key, From: state, Owner: rec.LockedBy, Attempt: rec.Attempt, DueAt: rec.DueAt,
			WaitingSince: rec.WaitingSince, Now: now, Until: d.Until, Actor: cfg.Actor, Reason: d.Reason,
		})
		if err != nil {
			r.writeFailed(rec, "waiting on", err)
			return
		}
		r.rep.Waited++
		r.rep.count(state, func(c *StateCounts) { c.Waited++ })
		cfg.Logger.LogAttrs(r.ctx, slog.LevelDebug, "waiting on step", stepAttrs(got, slog.Time("until", d.Until),
			slog.String("reason", d.Reason))...)

	case rescue:
		// The message becomes visible after the backoff; a scheduler then
		// has PickupTimeout to claim the step before a sweep re-drives it.
		got, err := cfg.Store.Rescue(r.ctx, sas.RescueParams{
			Key: key, From: state, Attempt: rec.Attempt, Now: now,
			PickupBy: now.Add(d.Backoff + cfg.PickupTimeout), Actor: cfg.Actor, Reason: d.Reason, Lost: d.Lost,
			WaitingSince: d.Since,
		})
		if own, ok := sas.OwnWrite(err, cfg.Actor, now, sas.RescueTarget(state), rec.Attempt); ok {
			got, err = own, nil // committed; its retry lost to it (docs/protocol.md, "Ambiguous commits")
		}
		if err != nil {
			r.writeFailed(rec, "rescuing", err)
			return
		}
		r.rep.Rescued++
		if d.Lost {
			r.rep.NothingRan++
		}
		r.rep.count(state, func(c *StateCounts) { c.Rescued++ })
		cfg.Logger.LogAttrs(r.ctx, slog.LevelDebug, "rescued step", stepAttrs(got, slog.String("from", string(state)),
			slog.Duration("backoff", d.Backoff), slog.String("reason", d.Reason))...)
		out.unit(got, state).Send(outbox.Message{
			QueueURL: cfg.ControlQueueURL, Delay: d.Backoff, What: "retry for " + key.String(),
			Body: sas.Encode(sas.Retry{
				V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: key.OrderID, Step: key.Step,
				Attempt: got.Attempt, Reason: d.Reason,
				Trace: sas.ChildTrace(r.traces[key.OrderID], fmt.Sprintf("%s %s %d", sas.KindRetry, key, got.Attempt)),
			}),
		})

	case fire:
		// A held wait step: its next look moved on a pick-up timeout (a
		// Wait: no failure, WaitingSince keeps the due time), so that the
		// next page finds the next waits and of racing supervisors one
		// sends. The scheduler's end of the wait is fenced on the due
		// time; should this retry be lost, the step is due again at its
		// next look. An order that starts later (Pending, unheld) is not
		// written: a page of them per sweep.
		if rec.LockedBy != "" {
			if _, err := cfg.Store.Wait(r.ctx, sas.WaitParams{
				Key: key, From: state, Owner: rec.LockedBy, Attempt: rec.Attempt, DueAt: rec.DueAt,
				WaitingSince: rec.WaitingSince, Now: now, Until: d.Until, Actor: cfg.Actor, Reason: d.Reason,
			}); err != nil {
				r.writeFailed(rec, "moving the next look of", err)
				return
			}
		}
		r.rep.Fired++
		cfg.Logger.LogAttrs(r.ctx, slog.LevelDebug, "wait step due", stepAttrs(rec, slog.String("reason", d.Reason))...)
		out.unit(rec, state).Send(outbox.Message{
			QueueURL: cfg.ControlQueueURL, What: "the end of wait step " + key.String(),
			Body: sas.Encode(sas.Retry{
				V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: key.OrderID, Step: key.Step,
				Attempt: rec.Attempt, Reason: d.Reason,
				Trace: sas.ChildTrace(r.traces[key.OrderID], fmt.Sprintf("%s %s %d", sas.KindRetry, key, rec.Attempt)),
			}),
		})

	case giveUp:
		// The write records what the give-up owes (the alert, and for a
		// forward step the compensate request), due again at OwedAt: if
		// this run dies before sending, or a send fails, a later sweep
		// finds it by FindOwed and sends it then.
		got, err := cfg.Store.GiveUp(r.ctx, sas.GiveUpParams{
			Key: key, From: state, Attempt: rec.Attempt, Now: now, Actor: cfg.Actor, Reason: d.Reason,
			OwedAt: now.Add(cfg.OwedRetry),
		})
		if own, ok := sas.OwnWrite(err, cfg.Actor, now, sas.GiveUpTarget(state), rec.Attempt); ok {
			got, err = own, nil
		}
		if err != nil {
			r.writeFailed(rec, "giving up on", err)
			return
		}
		r.rep.GaveUp++
		r.rep.count(state, func(c *StateCounts) { c.GaveUp++ })
		cfg.Logger.LogAttrs(r.ctx, slog.LevelWarn, "gave up on step", stepAttrs(got, slog.String("from", string(state)),
			slog.String("reason", d.Reason))...)
		r.owe(got, state, out)
	}
}

func (r *sweep) writeFailed(rec sas.StepRecord, op string, err error) {
	if errors.Is(err, sas.ErrLostRace) {
		// Another supervisor acted first, the agent's reply landed, or a
		// scheduler claimed the step: the fenced write changed nothing.
		r.rep.LostRaces++
		r.rep.count(rec.ProcessState, func(c *StateCounts) { c.LostRaces++ })
		r.s.cfg.Logger.LogAttrs(r.ctx, slog.LevelDebug, "lost the race for step", stepAttrs(rec, slog.String("err", err.Error()))...)
		return
	}
	r.fail(rec.ProcessState, fmt.Errorf("%s step %s: %w", op, rec.Key(), err))
}

// fail counts and logs an error and keeps the first few for RunOnce's error.
func (r *sweep) fail(state sas.ProcessState, err error) {
	r.rep.Errors++
	r.rep.count(state, func(c *StateCounts) { c.Errors++ })
	r.s.cfg.Logger.LogAttrs(r.ctx, slog.LevelError, "supervisor error", slog.String("state", string(state)), slog.String("err", err.Error()))
	if len(r.errs) < maxReportedErrors {
		r.errs = append(r.errs, err)
	}
}

func (r *sweep) err() error {
	errs := r.errs
	if r.rep.Stopped == StopCanceled {
		errs = append(errs, fmt.Errorf("sweep interrupted: %w", r.ctx.Err()))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("supervisor %s: %d errors in the sweep: %w", r.s.cfg.Actor, r.rep.Errors, errors.Join(errs...))
}

func stepAttrs(rec sas.StepRecord, more ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{
		slog.String("order", rec.OrderID),
		slog.Int("step", rec.Step),
		slog.String("stepName", rec.StepName),
		slog.String("state", string(rec.ProcessState)),
		slog.Int("attempt", rec.Attempt),
		slog.Int("failures", rec.FailureCount),
	}, more...)
}
