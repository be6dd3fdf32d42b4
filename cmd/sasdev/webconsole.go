package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/sas-go/sas/internal/config"
	webconsole "github.com/sas-go/sas/internal/console"
	"github.com/sas-go/sas/internal/sasctl"
)

// startConsole serves the web console (internal/console) on the
// -console address, as `sasctl console` would against this system, and
// watches the agents' pauses to stop and restart their polling.
func (s *server) startConsole(ctx context.Context, cfg config.Config) error {
	s.pollersDone.Add(1)
	go func() {
		defer s.pollersDone.Done()
		s.watchPauses(ctx)
	}()
	if s.opts.ConsoleAddr == "" {
		return nil
	}
	logger, _, err := s.logger("console.log")
	if err != nil {
		return err
	}
	app := &sasctl.App{Store: s.store, Queue: s.queue, IntakeQueueURL: cfg.IntakeQueueURL, ControlQueueURL: cfg.ControlQueueURL,
		PickupTimeout: cfg.PickupTimeout, Actor: "operator:sasdev (unverified)", Out: io.Discard}
	srv, err := webconsole.New(webconsole.Config{Store: s.store, Queues: s.queue, App: app,
		QueueRefs: webconsole.QueueRefsOf(cfg, s.reg), Agents: webconsole.AgentsOf(s.reg, cfg), StepAgents: s.reg.StepAgents(), Registry: s.reg,
		Workflows: slices.Sorted(maps.Keys(s.reg)), Logger: logger})
	if err != nil {
		return err
	}
	l, err := webconsole.Listen(s.opts.ConsoleAddr, false)
	var inUse *net.OpError
	if err != nil && errors.As(err, &inUse) && s.opts.ConsoleAddr == webconsole.DefaultAddr {
		l, err = webconsole.Listen("127.0.0.1:0", false) // the default port is taken: any free one
	}
	if err != nil {
		return err
	}
	s.consoleURL = srv.LoginURL(webconsole.URL(l))
	s.pollersDone.Add(1)
	go func() {
		defer s.pollersDone.Done()
		if err := webconsole.Serve(ctx, l, srv); err != nil {
			logger.Error("console stopped", "err", err)
		}
	}()
	return nil
}

// watchPauses applies the operators' pauses to the agents this process
// runs (docs/console.md, "Pausing an agent"): locally the pollers stop.
func (s *server) watchPauses(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if ps, err := s.store.AgentPauses(ctx); err == nil {
			for _, a := range agentsOf(s.reg) {
				s.procs.setPaused(a, ps.Paused(a))
			}
		} else if ctx.Err() == nil {
			slog.Default().Debug("reading the agents' pauses", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
