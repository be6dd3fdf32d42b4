// Package sim is the protocol simulator (docs/simulation.md, `make sim`): the
// real scheduler, supervisor and agent runtime, built through
// internal/assembly, over the in-memory store, with the queues, the remote
// service, the clock and the deaths of instances modelled. One seed draws the
// workflow, the faults and every interleaving; the invariants are checked
// after every event, and a failing seed replays with its whole trace.
package sim

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Config is one run. Everything not given is drawn from the seed
// (ForSeed), so that one number replays a run.
type Config struct {
	Seed int64
	// Orders submitted at the start, and LateOrders at most submitted
	// during the run.
	Orders, LateOrders int
	// Operator is how many operator commands (resubmit, compensate, one
	// order or all) the run may make.
	Operator int
	// Deploy: a new version of the workflow (Variant) is deployed mid-run.
	Deploy  bool
	Variant string
	// OldAgents: half the replies go out without the version field, as
	// agents built before it existed send them.
	OldAgents bool
	// StoreRefusals: the remote stores a refusal under its key and replays
	// it; otherwise a later call with the same key may succeed.
	StoreRefusals bool
	// FaultEvents is how many events faults are injected for; then the run
	// is calm (every call succeeds, every message is delivered) until it
	// settles, within CalmLimit of virtual time.
	FaultEvents int
	CalmLimit   time.Duration
	// MaxEvents bounds the run.
	MaxEvents int
	// Log, when set, receives the trace as it happens.
	Log io.Writer
	// Forge: a sender that is neither the application, the supervisor nor
	// an operator puts messages on the scheduler queue (docs/trust.md): an
	// intake, a compensate, a reply whose echo is rewritten.
	Forge bool
	// Cancels: the submitter (on the intake queue) or an operator (sasctl
	// cancel) cancels an order or two while they run (cancel.go).
	Cancels bool
	// Burst is how many more orders are submitted at the start, and
	// ServiceTime an agent's virtual time per request: a backlog that
	// outlasts the pick-up allowance (goodput.go).
	Burst       int
	ServiceTime time.Duration
	// Rejections: the remote's refusals of a step are business rejections
	// (agent.Reject) rather than failures. Also on in a third of the seeds
	// whatever ForSeed drew (Config.rejecting, results.go).
	Rejections bool
	// Branches: the workflow is a graph (branches.go). Also on in a third
	// of the seeds whatever ForSeed drew (Config.branching).
	Branches bool
	// Choices: the trip's steps have conditions (choices.go). Also on in
	// half the seeds whatever ForSeed drew (Config.choosing).
	Choices bool
	// Callbacks: the trip has a step the outside world completes
	// (callbacks.go). Also on in a quarter of the seeds whatever ForSeed
	// drew (Config.callbacking).
	Callbacks bool
	// Waits: the trip waits between two steps (waits.go). Also on in a
	// third of the seeds whatever ForSeed drew (Config.waiting).
	Waits bool
	// FanOut: the trip's shipment runs once per line of the order
	// (fanout.go). Also on in a quarter of the seeds whatever ForSeed drew
	// (Config.fanning).
	FanOut bool
	// FanOutFailures: fan-out seeds run the whole mix (remote faults,
	// clock jumps, cancels, bursts, an undo on the fan-out); otherwise
	// they are kept on its happy path (fanout.go).
	FanOutFailures bool
	// Faults is the run's fault mix (faults.go): Swarm's draw for the
	// seed, or DefaultFaults.
	Faults Faults
	// Sabotage plants a known bug in the world (SabotageLoseAlerts,
	// SabotageSkipUndo, SabotageIgnoreTransient, SabotageLoseSuccessor,
	// SabotageOneAlertID, SabotageForgetCancel):
	// the simulator's own tests use it to show that the checks catch what
	// they are for.
	Sabotage string
}

// Sabotages.
const (
	SabotageLoseAlerts = "lose-alerts" // the alerter reports success and sends nothing
	SabotageSkipUndo   = "skip-undo"   // the remote answers undos without undoing
	// SabotageIgnoreTransient: the store refuses a scheduler's count of a
	// failure its agent reported (a Rescue or GiveUp with a Holder) as a
	// lost race, so the transient outcome is acknowledged uncounted and
	// the attempt is left to the supervisor: the bug of issue 19.
	SabotageIgnoreTransient = "ignore-transient"
	// SabotageLoseSuccessor: the agent request a task owes after its
	// Complete claimed the next step is dropped, the send reporting
	// success: a scheduler that loses the successor's request. A twin
	// delivery's re-send of it still goes out, so the rule "lost work" must
	// tell a request lost from one a twin sent.
	SabotageLoseSuccessor = "lose-successor"
	// SabotageOneAlertID: the alerter names every alert alike, so any two
	// events share an id (issue 29, N5's class, at its widest: the sweep
	// seldom makes two events of one step at one state).
	SabotageOneAlertID = "one-alert-id"
	// SabotageForgetCancel: the store answers a cancel of a step in flight
	// as made and writes nothing, so the order runs on to its end (issue
	// 28 §4: a cancelled order ends with nothing standing).
	SabotageForgetCancel = "forget-cancel"
)

// ForSeed draws a run's configuration from its seed.
func ForSeed(seed int64) Config {
	r := rand.New(rand.NewPCG(uint64(seed), 0xc0f))
	cfg := Config{
		Seed:          seed,
		Orders:        1 + r.IntN(3),
		LateOrders:    r.IntN(2),
		Operator:      r.IntN(4),
		Deploy:        r.IntN(3) == 0,
		Variant:       Variants[r.IntN(len(Variants))],
		OldAgents:     r.IntN(4) == 0,
		StoreRefusals: r.IntN(2) == 0,
		FaultEvents:   100 + r.IntN(300),
		CalmLimit:     6 * time.Hour,
		MaxEvents:     20000,
		Forge:         r.IntN(4) == 0,
		Faults:        Swarm(seed),
	}
	cfg.Burst, cfg.ServiceTime = drawBurst(r) // the draws above are as before bursts
	// Drawn last, so that every draw before it is the one a seed made
	// before cancellations (issue 28 §4): a seed without them replays as it
	// did.
	cfg.Cancels = r.IntN(3) == 0
	return cfg
}

// Result is what a run found.
type Result struct {
	Config     Config
	Events     int
	Violations []Violation
	Trace      []string
	// Virtual is the virtual time the run took.
	Virtual time.Duration
	// What the run did, for the sweep's figures.
	Orders, Calls, Alerts, DeadLettered int
	// Redriven counts the dead letters the operator moved back (redrive.go).
	Redriven int
	// CancelsWhileBranching counts the cancels that landed while two steps
	// or more of their order were in flight (cancel.go).
	CancelsWhileBranching int
}

// Failed reports whether the run broke an invariant.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// Replay is the command that replays the run: the seed, and the fault mix
// when it is not the seed's own draw.
func (r Result) Replay() string {
	cmd := fmt.Sprintf("go run ./cmd/sassim -seed %d -v", r.Config.Seed)
	switch r.Config.Faults {
	case Swarm(r.Config.Seed):
	case DefaultFaults:
		cmd += " -swarm=false"
	default:
		cmd += " -swarm=false -faults " + r.Config.Faults.String()
	}
	if r.Config.FanOutFailures {
		cmd += " -fanout-failures"
	}
	return cmd
}

// Summary is the failure report: the violations, the replay command and the
// last events of the trace.
func (r Result) Summary(lines int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d broke %d invariant(s) after %d events (%s virtual); replay: %s\n",
		r.Config.Seed, len(r.Violations), r.Events, r.Virtual.Round(time.Millisecond), r.Replay())
	fmt.Fprintf(&b, "config: %+v\n", r.Config)
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	tr := r.Trace
	if len(tr) > lines {
		fmt.Fprintf(&b, "... %d earlier events cut (the replay shows all)\n", len(tr)-lines)
		tr = tr[len(tr)-lines:]
	}
	for _, l := range tr {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// Run runs one seed's simulation to its end: every order settled and
// checked, an invariant broken, or a bound reached (itself a violation:
// an order that never settles).
func Run(cfg Config) (res Result) {
	w := newWorld(cfg)
	defer func() {
		w.cleanup()
		res = Result{Config: cfg, Events: w.events, Violations: w.violations, Trace: w.trace,
			Virtual: w.clock.Now().Sub(start), Orders: len(w.orders), Calls: w.remote.calls, Alerts: len(w.alerts),
			DeadLettered: w.deadLettered, Redriven: w.redriven, CancelsWhileBranching: w.cancelsWhileBranching}
	}()
	for range cfg.Orders + cfg.Burst {
		w.submit()
	}
	for ; ; w.events++ {
		if len(w.violations) > 0 {
			return
		}
		if w.faults && w.events >= cfg.FaultEvents {
			w.faults, w.calmSince = false, w.clock.Now()
			w.tracef("calm: no more faults")
		}
		if !w.faults && len(w.tasks) == 0 && w.settled() {
			w.final()
			return
		}
		if w.events >= cfg.MaxEvents || (!w.faults && w.clock.Now().Sub(w.calmSince) > cfg.CalmLimit) {
			w.unsettled()
			return
		}
		if w.faults {
			w.chaos()
		} else {
			w.calm()
		}
	}
}

// cleanup kills the tasks still stopped, so that no goroutine outlives the
// run.
func (w *World) cleanup() {
	for len(w.tasks) > 0 {
		w.kill(w.tasks[0])
	}
}

// calm moves the run towards its end: resume a task, else deliver a
// message, else let time pass to the next message or sweep.
func (w *World) calm() {
	if len(w.tasks) > 0 {
		w.step(w.tasks[w.rng.IntN(len(w.tasks))], choice{})
		return
	}
	if q, msgs := w.visible(); q != nil {
		w.deliver(q, msgs)
		return
	}
	if w.redriveDeadLetters() { // redrive.go
		return
	}
	if w.outsideCalm() { // callbacks.go
		return
	}
	w.idle()
}

// idle lets time pass when nothing can run now: to the moment the next
// message becomes visible, or to the next sweep, which then runs.
func (w *World) idle() {
	now := w.clock.Now()
	next := now.Add(sweepEvery)
	for _, q := range w.queues {
		if q.consumer == "" {
			continue
		}
		for _, m := range q.msgs {
			if !m.gone && m.visibleAt.After(now) && m.visibleAt.Before(next) {
				next = m.visibleAt
			}
		}
	}
	w.clock.Set(next)
	if next.Equal(now.Add(sweepEvery)) {
		w.sweep(w.rng.IntN(len(w.supervisors)))
	}
}

// visible picks a queue with visible messages and up to a batch of them.
func (w *World) visible() (*queue, []*message) {
	now := w.clock.Now()
	var cands []*queue
	for _, q := range w.queues {
		if q.consumer != "" && len(q.visible(now)) > 0 {
			cands = append(cands, q)
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	q := cands[w.rng.IntN(len(cands))]
	vis := q.visible(now)
	w.rng.Shuffle(len(vis), func(i, j int) { vis[i], vis[j] = vis[j], vis[i] })
	batch := 1
	if q.consumer == "scheduler" {
		batch = 1 + w.rng.IntN(3) // the agents' SDK runs a batch's requests concurrently: one at a time here
	}
	return q, vis[:min(batch, len(vis))]
}

// chaos picks the next event at random, faults included.
func (w *World) chaos() {
	type event struct {
		weight float64
		run    func()
	}
	var evs []event
	add := func(weight float64, run func()) {
		if weight > 0 {
			evs = append(evs, event{weight, run})
		}
	}
	for _, t := range w.tasks {
		add(6, func() { w.step(t, w.faultAt(t)) })
	}
	if q, msgs := w.visible(); q != nil {
		add(5, func() { w.deliver(q, msgs) })
	}
	if q, m := w.inFlight(); q != nil {
		add(w.cfg.Faults.Duplicate, func() {
			w.tracef("duplicate delivery of %s", m.id)
			m.duplicated = true
			w.deliver(q, []*message{m})
		})
	}
	add(0.8, func() { w.sweep(w.rng.IntN(len(w.supervisors))) })
	add(1.5, func() {
		d := time.Duration(100+w.rng.IntN(5000)) * time.Millisecond
		w.clock.Advance(d)
		w.tracef("time passes: %s", d)
	})
	if !w.clock.Now().Before(w.storeDownUntil) {
		add(w.cfg.Faults.Outage, w.outage)
	}
	add(w.cfg.Faults.Jump, func() {
		d := time.Duration(30+w.rng.IntN(600)) * time.Second
		w.clock.Advance(d)
		w.tracef("the clock jumps: %s", d)
	})
	if w.opsLeft > 0 && len(w.orders) > 0 {
		add(0.25, w.operatorEvent)
	}
	if w.submitsLeft > 0 {
		add(0.1, func() { w.submitsLeft--; w.submit() })
	}
	if w.sch.left > 0 {
		add(0.6, w.trigger)
	}
	if w.cfg.Forge && len(w.orders) > 0 {
		add(0.15, w.forge)
	}
	if w.cb != nil && len(w.cb.tokens) > 0 {
		add(0.5, w.outside)        // callbacks.go
		add(0.15, w.operatorNamed) // agenttoken.go
	}
	if w.cfg.Cancels && w.cancelsLeft > 0 && len(w.orders) > 0 {
		add(0.2, w.cancelEvent)
	}
	if w.cfg.Deploy && !w.deployed {
		add(0.05, func() {
			w.deployed = true
			w.tracef("deploy: version %.8s (%s)", w.v2.Version(), w.cfg.Variant)
			w.deploy(w.v2, "-v2")
		})
	}
	total := 0.0
	for _, e := range evs {
		total += e.weight
	}
	x := w.rng.Float64() * total
	for _, e := range evs {
		if x < e.weight {
			e.run()
			return
		}
		x -= e.weight
	}
	evs[len(evs)-1].run()
}

func (w *World) inFlight() (*queue, *message) {
	now := w.clock.Now()
	var all []*message
	var qs []*queue
	for _, q := range w.queues {
		if q.consumer == "" {
			continue
		}
		for _, m := range q.inFlight(now) {
			all, qs = append(all, m), append(qs, q)
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	i := w.rng.IntN(len(all))
	return qs[i], all[i]
}

func (w *World) operatorEvent() {
	w.opsLeft--
	id := w.orders[w.rng.IntN(len(w.orders))]
	// An operator mostly acts on what needs one: an order with a failed step.
	var failed []string
	for _, o := range w.orders {
		if v, err := w.view(o); err == nil && slices.ContainsFunc(v.Steps, func(r sas.StepRecord) bool { return r.ProcessState == sas.Error }) {
			failed = append(failed, o)
		}
	}
	if len(failed) > 0 && w.rng.IntN(4) > 0 {
		id = failed[w.rng.IntN(len(failed))]
	}
	switch w.rng.IntN(4) {
	case 0, 1:
		w.operate("resubmit", id)
	case 2:
		w.operate("resubmit", "-all")
	default:
		w.operate("compensate", id)
	}
}
