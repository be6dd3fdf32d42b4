package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Schedules (issue 28 §3; docs/simulation.md, "Invariants"). In a third of
// the seeds (Config.scheduling) the deployment has a schedule, "tick", with
// the overlap policy skip or allow (drawn from the seed). Its trigger fires
// a few scheduled times, each one or two copies at once (EventBridge
// Scheduler delivers at least once, and retries), and now and then a late
// copy of an earlier time; each copy races the others through the intake.
// Two rules hold the system to them:
//   - "run started twice": no two orders are runs of one scheduled time
//     (the payload's "run" says which), checked once settled;
//   - "skip not respected": under skip, a run's order is created only
//     while every other run of the schedule has settled, checked at the
//     write that creates it; a run an operator resubmitted or compensated
//     is not counted (it acts beside the schedule: docs/schedules.md).

const (
	// SabotageRunTwice: the store makes a new order for each submission of
	// a run (the id suffixed with a count), as a submission that did not
	// deduplicate a run's copies would.
	SabotageRunTwice = "run-twice"
	// SabotageOverlap: the store drops the fence of a skip schedule's run
	// (sas.RunClaim.Exclusive) and its state reads as if no run had ever
	// started, so a run starts over one in flight.
	SabotageOverlap = "overlap"
)

const scheduleName = "tick"

// scheduleStart is when the schedule's first run is scheduled for.
var scheduleStart = start.Truncate(time.Hour).Add(time.Hour)

// schedWorld is the world's schedule.
type schedWorld struct {
	left    int                        // scheduled times still to fire
	ticks   []time.Time                // the times fired, in order
	runs    map[string]json.RawMessage // run order id → its payload
	touched map[string]bool            // run orders an operator resubmitted or compensated
	submits int                        // SabotageRunTwice's count
}

// scheduling reports whether this run's deployment has a schedule (a third
// of the seeds, drawn apart from ForSeed's draws, and every seed of its
// planted bugs).
func (c Config) scheduling() bool {
	if c.Sabotage == SabotageRunTwice || c.Sabotage == SabotageOverlap {
		return true
	}
	return splitmix(uint64(c.Seed)^0x7f4a7c15)%3 == 0
}

// overlap is the schedule's policy: skip in two seeds of three that have
// one, and in every seed of SabotageOverlap.
func (c Config) overlap() sas.Overlap {
	if c.Sabotage == SabotageOverlap || splitmix(uint64(c.Seed)^0x2545f491)%3 > 0 {
		return sas.OverlapSkip
	}
	return sas.OverlapAllow
}

func (w *World) initSchedules() {
	w.sch.runs, w.sch.touched = map[string]json.RawMessage{}, map[string]bool{}
	if w.cfg.scheduling() {
		w.sch.left = 3 + w.rng.IntN(4)
	}
}

// schedules is the deployment's SAS_SCHEDULES.
func (w *World) schedules() map[string]sas.ScheduleConfig {
	if !w.cfg.scheduling() {
		return nil
	}
	return map[string]sas.ScheduleConfig{scheduleName: {Overlap: w.cfg.overlap()}}
}

// trigger fires the schedule: the next scheduled time, or a late copy of
// one fired already, in one or two copies.
func (w *World) trigger() {
	var at time.Time
	if len(w.sch.ticks) > 0 && w.rng.IntN(3) == 0 {
		at = w.sch.ticks[w.rng.IntN(len(w.sch.ticks))]
	} else {
		w.sch.left--
		at = scheduleStart.Add(time.Duration(len(w.sch.ticks)) * time.Hour)
		w.sch.ticks = append(w.sch.ticks, at)
	}
	id := sas.RunOrderID(scheduleName, at)
	payload, ok := w.sch.runs[id]
	if !ok {
		w.orders = append(w.orders, id)
		payload = json.RawMessage(fmt.Sprintf(`{"amount":%d,"run":%q}`, 10+len(w.orders), at.Format(time.RFC3339)))
		if w.cfg.fanning() {
			payload = w.runPayload(len(w.orders), at) // fanout.go
		}
		w.sch.runs[id] = payload
	}
	copies := 1 + w.rng.IntN(2)
	for range copies {
		body := sas.Encode(sas.Intake{V: sas.MessageVersion, Kind: sas.KindIntake, Workflow: w.v1.Name, Payload: payload,
			ReplyTo: w.status.url, Schedule: scheduleName, ScheduledAt: at.Format(time.RFC3339)})
		w.nextMsg++
		m := &message{id: fmt.Sprintf("m%d", w.nextMsg), body: body, sentAt: w.clock.Now(), visibleAt: w.clock.Now(), sender: "schedule"}
		w.intake.msgs = append(w.intake.msgs, m)
	}
	w.tracef("schedule %s fires %s (%d copies)", scheduleName, at.Format(time.RFC3339), copies)
}

// skippedRun: id is a run of the schedule that the policy may have
// skipped, so that it was never stored is no violation.
func (w *World) skippedRun(id string) bool {
	_, ok := w.sch.runs[id]
	return ok
}

// submitRun is the store's Submit of a schedule's run, with its planted
// bugs, and the rule "skip not respected" checked on what it created.
func (s *store) submitRun(ctx context.Context, p sas.SubmitParams) (sas.SubmitResult, error) {
	w := s.w
	switch w.cfg.Sabotage {
	case SabotageRunTwice:
		w.sch.submits++
		p.Order.OrderID = fmt.Sprintf("%s.%d", p.Order.OrderID, w.sch.submits)
		p.Run = nil
		w.orders = append(w.orders, p.Order.OrderID)
		w.sch.runs[p.Order.OrderID] = p.Order.Payload
	case SabotageOverlap:
		p.Run.Exclusive = false
	}
	res, err := s.submit(ctx, p)
	if err == nil && res.Created && w.cfg.overlap() == sas.OverlapSkip {
		for other := range w.sch.runs {
			if other == p.Order.OrderID || w.sch.touched[other] {
				continue
			}
			if v, gerr := w.view(other); gerr == nil && !v.Settled() {
				w.violate("skip not respected", "run %s of schedule %s started while run %s was in flight (%s)",
					p.Order.OrderID, scheduleName, other, steps(v))
			}
		}
	}
	return res, err
}

// checkRuns is "run started twice": once settled, no two orders carry the
// payload of one scheduled time.
func (w *World) checkRuns() {
	byRun := map[string]string{}
	for _, id := range w.orders {
		if _, ok := w.sch.runs[id]; !ok {
			continue
		}
		v, err := w.view(id)
		if err != nil {
			continue
		}
		var p struct {
			Run string `json:"run"`
		}
		if json.Unmarshal(v.Order.Payload, &p) != nil || p.Run == "" {
			continue
		}
		if first, ok := byRun[p.Run]; ok {
			w.violate("run started twice", "orders %s and %s are both the run of schedule %s scheduled for %s", first, id, scheduleName, p.Run)
			continue
		}
		byRun[p.Run] = id
	}
}

func (s *store) GetSchedule(ctx context.Context, name string) (sas.ScheduleState, error) {
	if stop(ctx, opRead, "GetSchedule %s", name).fault == faultUnavailable {
		return sas.ScheduleState{}, errUnavailable
	}
	st, err := s.mem.GetSchedule(ctx, name)
	if err == nil && s.w.cfg.Sabotage == SabotageOverlap {
		st.Running, st.LastRunAt = "", time.Time{}
	}
	return st, err
}

func (s *store) SkipRun(ctx context.Context, p sas.SkipRunParams) (sas.ScheduleState, error) {
	if stop(ctx, opWrite, "SkipRun %s %s", p.Schedule, p.OrderID).fault == faultUnavailable {
		return sas.ScheduleState{}, errUnavailable
	}
	st, err := s.mem.SkipRun(ctx, p)
	if err == nil {
		s.w.tracef("  SkipRun: %s of %s skipped (%d skipped)", p.OrderID, p.Schedule, st.Skipped)
	}
	return st, err
}
