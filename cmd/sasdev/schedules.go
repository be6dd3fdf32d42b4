package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/dev/poller"
	"github.com/sas-go/sas/internal/schedules"
)

// scheduleTick is how often the dev server looks for due runs: runs are
// sent within it of their scheduled time (EventBridge Scheduler's own
// precision is a minute).
const scheduleTick = time.Second

// loadSchedules reads -schedules and checks each names a workflow the
// dev server runs; it sets SAS_SCHEDULES for the scheduler, as the
// construct does (docs/schedules.md, "Locally").
func (s *server) loadSchedules() ([]schedules.Schedule, error) {
	if s.opts.Schedules == "" {
		return nil, nil
	}
	ss, err := schedules.Load(s.opts.Schedules)
	if err != nil {
		return nil, err
	}
	for _, sc := range ss {
		if !s.reg.Has(sc.Workflow) {
			return nil, fmt.Errorf("-schedules %s: schedule %s runs workflow %q, which the dev server does not run", s.opts.Schedules, sc.Name, sc.Workflow)
		}
	}
	b, err := json.Marshal(schedules.Configs(ss))
	if err != nil {
		return nil, err
	}
	s.env["SAS_SCHEDULES"] = string(b)
	return ss, nil
}

// startSchedules runs the schedules' loop, EventBridge Scheduler's stand-in.
func (s *server) startSchedules(ctx context.Context, ss []schedules.Schedule, intakeURL string) {
	if len(ss) == 0 {
		return
	}
	loop := &schedules.Loop{Schedules: ss, Queue: s.queue, IntakeURL: intakeURL}
	for _, sc := range ss {
		s.con.info("schedule %s (%s): next run %s", sc.Name, sc.Expression, sc.Next(time.Now()).Format(time.RFC3339))
	}
	s.pollersDone.Add(1)
	go func() {
		defer s.pollersDone.Done()
		poller.Ticker(ctx, scheduleTick, func(ctx context.Context) {
			sent, err := loop.RunOnce(ctx, time.Now())
			for _, id := range sent {
				s.con.info("schedule: sent run %s", id)
			}
			if err != nil && ctx.Err() == nil {
				s.con.info("schedule: %v", err)
			}
		})
	}()
}
