package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/assembly"
	"github.com/sas-go/sas/internal/assembly/fromaws"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dev/poller"
	"github.com/sas-go/sas/internal/dev/rig"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/supervisor"
)

// startActors starts the scheduler's pollers, the supervisor's schedule and
// the agents.
func (s *server) startActors(ctx context.Context, cfg config.Config) error {
	schedLog, schedFile, err := s.logger("scheduler.log")
	if err != nil {
		return err
	}
	// Built as functions/scheduler and functions/supervisor build them
	// (internal/assembly, on parts loaded by internal/assembly/fromaws);
	// only the triggers differ: pollers and a ticker.
	owner := "scheduler-" + sas.RandomID(16)
	// Its EMF metric lines go to its log, as the supervisor's below.
	sched, err := s.scheduler(ctx, cfg, schedLog.With("holder", owner), owner, schedFile)
	if err != nil {
		return fmt.Errorf("the scheduler: %w", err)
	}
	supLog, supFile, err := s.logger("supervisor.log")
	if err != nil {
		return err
	}
	// Its EMF metric lines go to its log, as Lambda ships them with the
	// function's stdout.
	sup, err := s.supervisor(cfg, supLog, "supervisor:sasdev-"+sas.RandomID(6), supFile)
	if err != nil {
		return fmt.Errorf("the supervisor: %w", err)
	}
	s.tracker = newTracker(s.con, s.store, sas.IntakeRules{Workflows: s.reg.Has, ReplyToAllowed: cfg.ReplyToAllowed})

	// As the event source mappings feed the scheduler function: two
	// batches in hand per queue.
	for _, q := range []struct {
		name, url string
		intake    bool
	}{{"intake", cfg.IntakeQueueURL, true}, {"scheduler", cfg.SchedulerQueueURL, false}, {"control", cfg.ControlQueueURL, false}} {
		p := &poller.Poller{
			Name: q.name, Queue: s.queue, QueueURL: q.url, QueueARN: sas.LocalQueueARN(s.aws.Region, q.url),
			BatchSize: 10, Wait: 20 * time.Second, Workers: 2, Handler: s.tracker.observe(sched.Handle, q.intake), Logger: schedLog,
		}
		s.pollersDone.Add(1)
		go func() {
			defer s.pollersDone.Done()
			_ = p.Run(ctx)
		}()
	}
	// As the EventBridge schedule runs the supervisor function.
	s.pollersDone.Add(2)
	go func() {
		defer s.pollersDone.Done()
		poller.Ticker(ctx, s.opts.SupervisorEvery, func(ctx context.Context) {
			if _, err := sup.Handle(ctx, events.CloudWatchEvent{ID: "sasdev", DetailType: "Scheduled Event", Time: time.Now()}); err != nil && ctx.Err() == nil {
				supLog.Warn("supervisor sweep failed", "err", err)
			}
		})
	}()
	go func() {
		defer s.pollersDone.Done()
		s.tracker.run(ctx)
	}()

	// The built-in agents, as functions/agent builds one: on the same
	// queue client and workflows, each with its own log.
	builtin := assembly.System{Config: cfg, Parts: assembly.Parts{Queue: s.queue, Workflows: s.reg}}
	for _, name := range s.builtin {
		if err := s.procs.startBuiltin(ctx, builtin, name, s.simURL); err != nil {
			return err
		}
	}
	agentEnv := rig.MergeEnv(os.Environ(), []string{
		"SAS_SCHEDULER_QUEUE_URL=" + cfg.SchedulerQueueURL,
		"SAS_AGENT_PRIORITY_QUEUE_URL=", // no lanes here, whatever the shell says
		"AWS_LAMBDA_RUNTIME_API=",       // not in Lambda: agent.Start polls
	})
	for _, a := range s.opts.Agents {
		if err := s.procs.start(ctx, a.Name, rig.MergeEnv(agentEnv, []string{"SAS_AGENT_QUEUE_URL=" + s.agentQueues[a.Name]})); err != nil {
			return err
		}
	}
	return nil
}

// scheduler builds the scheduler's handler as functions/scheduler does.
func (s *server) scheduler(ctx context.Context, cfg config.Config, logger *slog.Logger, owner string, metrics io.Writer) (*scheduler.Handler, error) {
	return fromaws.SchedulerHandler(ctx, s.aws, cfg, logger, owner, metrics)
}

// supervisor builds the supervisor's handler as functions/supervisor does.
func (s *server) supervisor(cfg config.Config, logger *slog.Logger, actor string, metrics io.Writer) (*supervisor.Handler, error) {
	return fromaws.SupervisorHandler(s.aws, cfg, logger, actor, metrics)
}

// logger is a JSON logger writing to a file of the log directory, as
// Lambda's would write to CloudWatch.
func (s *server) logger(name string) (*slog.Logger, io.Writer, error) {
	f, err := openLog(filepath.Join(s.opts.Dir, name))
	if err != nil {
		return nil, nil, err
	}
	s.closers = append(s.closers, f)
	return slog.New(slog.NewJSONHandler(f, nil)), f, nil
}

// openLog opens a log file for appending.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening a log: %w", err)
	}
	return f, nil
}
