package storediff

import (
	"fmt"
	"time"

	"pgregory.net/rapid"

	"github.com/sas-go/sas/internal/sas"
)

// Schedules' runs (sas.RunClaim, sas.ScheduleStore): a run's submission,
// fenced or not on the running order seen, a skipped run, and the
// schedule's state read back after each, so that the comparison covers it.

var runSchedules = []string{"s1", "s2"}

func runAt(t *rapid.T, label string) time.Time {
	return t0.Truncate(time.Hour).Add(time.Duration(rapid.IntRange(0, 3).Draw(t, label)) * time.Hour)
}

// withSchedule is what a schedule write answered, with the schedule's
// state read back.
type withSchedule struct {
	Answer   any
	Schedule sas.ScheduleState
	Read     []string
}

func scheduleAfter(s sas.StateStore, name string, answer any) withSchedule {
	st, err := s.GetSchedule(ctx, name)
	return withSchedule{Answer: answer, Schedule: st, Read: renderErr(err)}
}

func (m *machine) scheduleWrites() map[string]func(*rapid.T) op {
	return map[string]func(*rapid.T) op{
		"submitRun": func(t *rapid.T) op {
			name := rapid.SampledFrom(runSchedules).Draw(t, "schedule")
			at := runAt(t, "runAt")
			id := sas.RunOrderID(name, at)
			o := sas.Order{OrderID: id, Workflow: "trip", Steps: []string{"step0"}}
			prev := ""
			if rapid.Bool().Draw(t, "prevSeen") {
				prev = sas.RunOrderID(name, runAt(t, "prevAt"))
			}
			p := sas.SubmitParams{Order: o, Now: m.now, PickupBy: m.deadline(t, "pickupBy"),
				Run: &sas.RunClaim{Schedule: name, ScheduledAt: at, Prev: prev, Exclusive: rapid.Bool().Draw(t, "exclusive")}}
			if rapid.IntRange(0, 9).Draw(t, "notItsRun") == 9 {
				p.Run.ScheduledAt = at.Add(time.Minute) // invalid: not the order's run
			}
			return op{name: "SubmitRun", desc: fmt.Sprintf("%s prev=%q exclusive=%v", id, prev, p.Run.Exclusive), orders: []string{id},
				apply: func(s sas.StateStore, _ int) (any, error) {
					res, err := s.Submit(ctx, p)
					return scheduleAfter(s, name, res), err
				}}
		},
		"skipRun": func(t *rapid.T) op {
			name := rapid.SampledFrom(runSchedules).Draw(t, "schedule")
			at := runAt(t, "runAt")
			p := sas.SkipRunParams{Schedule: name, OrderID: sas.RunOrderID(name, at), ScheduledAt: at}
			if rapid.IntRange(0, 9).Draw(t, "notItsRun") == 9 {
				p.OrderID = "o-1"
			}
			return op{name: "SkipRun", desc: p.OrderID,
				apply: func(s sas.StateStore, _ int) (any, error) {
					st, err := s.SkipRun(ctx, p)
					return scheduleAfter(s, name, st), err
				}}
		},
	}
}

func (m *machine) scheduleReads() map[string]func(*rapid.T) op {
	return map[string]func(*rapid.T) op{
		"getSchedule": func(t *rapid.T) op {
			name := rapid.SampledFrom(append(runSchedules, "never")).Draw(t, "schedule")
			return op{name: "GetSchedule", desc: name,
				apply: func(s sas.StateStore, _ int) (any, error) { return s.GetSchedule(ctx, name) }}
		},
	}
}
