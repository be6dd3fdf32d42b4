package sastest

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Schedule is one schedule of the kit's deployment, as the CDK construct
// declares it (docs/schedules.md): its runs are orders of Workflow with
// Payload (anything encoding/json encodes as an object; nil for none), and
// Overlap is "allow" (the default) or "skip". When it runs is the test's
// to say: FireSchedule.
type Schedule struct {
	Name     string
	Workflow string
	Payload  any
	Overlap  string
}

// Fired is what one trigger of a schedule did.
type Fired struct {
	// OrderID is the run's order id, "<schedule>-<scheduled time>"
	// (whether or not it started).
	OrderID string
	// Started: the run's order exists (this trigger made it, or an
	// earlier copy of it did). Skipped: the overlap policy skipped it.
	Started, Skipped bool
}

// FireSchedule sends the intake that EventBridge Scheduler sends when the
// schedule falls due at at, and lets the scheduler take it: the run starts,
// or, under "skip" while the schedule's previous run is in flight, is
// skipped. It does not drive the run: Settle does, or the next Run, Settle
// or Advance moves it on. Firing the same time again is a redelivered
// trigger: the same run, never a second one.
func (e *Env) FireSchedule(name string, at time.Time) Fired {
	e.t.Helper()
	sc, ok := e.schedules[name]
	if !ok {
		e.t.Fatalf("sastest: FireSchedule(%q): no schedule of that name in Options.Schedules", name)
	}
	var payload json.RawMessage
	if sc.Payload != nil {
		b, err := json.Marshal(sc.Payload)
		if err != nil || len(bytes.TrimSpace(b)) == 0 || bytes.TrimSpace(b)[0] != '{' {
			e.t.Fatalf("sastest: schedule %s: the payload must encode as a JSON object (%s, %v)", name, b, err)
		}
		payload = b
	}
	id := sas.RunOrderID(name, at)
	e.ran[id] = true
	e.send(e.intakeURL, sas.Encode(sas.Intake{V: sas.MessageVersion, Kind: sas.KindIntake, Workflow: sc.Workflow,
		Payload: payload, ReplyTo: e.statusURL, Schedule: name, ScheduledAt: at.UTC().Format(time.RFC3339)}))
	for e.deliver(e.sched, e.intakeURL) > 0 {
	}
	f := Fired{OrderID: id}
	switch _, err := e.store.GetOrder(e.ctx, id); {
	case err == nil:
		f.Started = true
	case errors.Is(err, sas.ErrNotFound):
		st, serr := e.store.GetSchedule(e.ctx, name)
		f.Skipped = serr == nil && st.LastSkipped == id
		if !f.Skipped {
			for _, s := range e.statuses(id) {
				if s.Status == sas.StatusRejected {
					e.t.Fatalf("sastest: FireSchedule(%q): the run was rejected: %s", name, s.Reason)
				}
			}
			e.t.Fatalf("sastest: FireSchedule(%q): the run neither started nor was skipped (see the logs)", name)
		}
	default:
		e.t.Fatalf("sastest: FireSchedule(%q): reading the run: %v", name, err)
	}
	return f
}

// Settle drives the deployment until the order (a run FireSchedule
// started) is settled, and returns how it ended, as Run does.
func (e *Env) Settle(orderID string) Result {
	e.t.Helper()
	v, err := e.store.GetOrder(e.ctx, orderID)
	if err != nil {
		e.t.Fatalf("sastest: Settle(%q): %v", orderID, err)
	}
	start := e.clock.Now()
	v, statuses := e.drive(orderID, start.Add(e.opts.Timeout+e.waits(v.Order.Workflow)))
	return e.result(v, statuses, e.clock.Now().Sub(start))
}

// scheduleConfigs checks the schedules and returns them by name, and as
// the deployment's SAS_SCHEDULES.
func (e *Env) scheduleConfigs(schedules []Schedule) map[string]sas.ScheduleConfig {
	e.schedules = map[string]Schedule{}
	if len(schedules) == 0 {
		return nil
	}
	cfg := map[string]sas.ScheduleConfig{}
	for _, sc := range schedules {
		switch {
		case !sas.ValidScheduleName(sc.Name):
			e.t.Fatalf("sastest: schedule %q: a name is 1-64 characters of A-Z a-z 0-9 _ -", sc.Name)
		case !e.reg.Has(sc.Workflow):
			e.t.Fatalf("sastest: schedule %q: no workflow %q (workflows: %v)", sc.Name, sc.Workflow, e.workflowNames())
		case !sas.Overlap(sc.Overlap).Valid():
			e.t.Fatalf("sastest: schedule %q: overlap %q: want allow or skip", sc.Name, sc.Overlap)
		}
		if _, dup := e.schedules[sc.Name]; dup {
			e.t.Fatalf("sastest: two schedules are named %q", sc.Name)
		}
		e.schedules[sc.Name] = sc
		cfg[sc.Name] = sas.ScheduleConfig{Overlap: sas.Overlap(sc.Overlap)}
	}
	return cfg
}
