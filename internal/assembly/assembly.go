// Package assembly puts the system together: from the adapters a place has
// built (store, queue, alerter, workflows, clock, logs) and the
// deployment's configuration (internal/config), it builds the scheduler,
// the supervisor and the agents' handlers, each in one place.
//
// Every place that runs the system builds it here: the Lambda entry points
// (functions/*, through fromaws, which loads the adapters from an AWS
// account), the dev server (cmd/sasdev), the local runs on the emulators
// (internal/dev/localrun) and the test kit (sastest, in memory on a fake
// clock). What differs between them is what they hand in (the adapters,
// the clock) and the trigger that feeds the handlers (Lambda's event
// sources, pollers, a test's loop), not how the actors are configured. So
// a rule such as which queues count as a backlog (BacklogQueues) is changed
// here, once; the queues' timing rules are internal/sizing's.
package assembly

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/supervisor"
)

// Parts are the adapters a system is assembled from, built by the place
// that runs it.
type Parts struct {
	// Store is the state store. When it keeps the operators' pauses of
	// agents (sas.PauseReader), the supervisor reads them there.
	Store sas.StateStore
	// Queue sends and receives every message; the supervisor reads queue
	// depths through it (sas.DepthReader).
	Queue sas.Queue
	// Alerter tells operators about given-up steps.
	Alerter sas.Alerter
	// Workflows are the deployed workflows.
	Workflows sas.Registry
	// Clock is the actors' time; nil: the wall clock.
	Clock sas.Clock
	// Logger receives the actors' logs; nil: slog.Default().
	Logger *slog.Logger
	// Metrics receives the actors' EMF lines (internal/metrics); nil: none.
	Metrics io.Writer
}

// System is the system assembled from Parts under a deployment's
// configuration. A System is a value: a place that gives one actor other
// parts (a log of its own, a skewed clock, a queue that injects faults)
// changes a copy.
type System struct {
	Config config.Config
	Parts
	// BaseBackoff and MaxBackoff are the supervisor's retry backoff, which
	// the scheduler's retry policy shares; zero takes the supervisor's
	// defaults. A deployment leaves them unset; local runs shorten them.
	BaseBackoff, MaxBackoff time.Duration
	// UndoRetry is the retry policy of an undo whose step sets none, and
	// OwedRetry how long after a give-up a sweep re-sends what it owes,
	// for the scheduler and the supervisor alike; zero takes their
	// defaults (sas.DefaultUndoRetry, 30 s). A deployment leaves them
	// unset; the simulator shortens them, so that its runs settle.
	UndoRetry sas.RetryPolicy
	OwedRetry time.Duration
}

// WithLog is s with its logs and metrics going to logger and metrics: a
// place that gives each actor a log of its own.
func (s System) WithLog(logger *slog.Logger, metrics io.Writer) System {
	s.Logger, s.Metrics = logger, metrics
	return s
}

// BacklogQueues are the queues that may hold a held step's request or its
// reply: every agent queue and lane, and the scheduler queue. While one of
// them holds messages, the supervisor waits on a held step past its
// deadline instead of failing it (docs/protocol.md, "Waiting is not
// executing").
func BacklogQueues(cfg config.Config) []string {
	return append(cfg.AgentQueues.All(), cfg.SchedulerQueueURL)
}

// Scheduler builds a scheduler. owner is the instance's id (LockedBy),
// unique per process; key is what it signs its agent requests with, for
// good (a local run's). The trigger wraps it: scheduler.NewHandler.
func (s System) Scheduler(owner string, key []byte) (*scheduler.Service, error) {
	return s.scheduler(owner, key, nil)
}

// SchedulerSigned is Scheduler with a signer of its own: a deployment's,
// which re-reads its keys (fromaws.SigningKeys, sas.NewSourcedSigner).
func (s System) SchedulerSigned(owner string, signer *sas.Signer) (*scheduler.Service, error) {
	return s.scheduler(owner, nil, signer)
}

func (s System) scheduler(owner string, key []byte, signer *sas.Signer) (*scheduler.Service, error) {
	return scheduler.New(scheduler.Config{
		Store:             s.Store,
		Queue:             s.Queue,
		Clock:             s.Clock,
		Alerter:           s.Alerter,
		Workflows:         s.Workflows,
		Owner:             owner,
		AgentQueues:       s.Config.AgentQueues,
		IntakeQueueURL:    s.Config.IntakeQueueURL,
		SchedulerQueueURL: s.Config.SchedulerQueueURL,
		// Retries and compensations are taken from here alone, replies
		// only under the key (docs/trust.md).
		ControlQueueURL:      s.Config.ControlQueueURL,
		SigningKey:           key,
		Signer:               signer,
		RequireSignedReplies: s.Config.RequireSignedReplies,
		StepTimeout:          s.Config.StepTimeout,
		PickupTimeout:        s.Config.PickupTimeout,
		// The supervisor's failure threshold and backoff.
		Retry:            sas.RetryPolicy{MaxAttempts: s.Config.MaxFailures, InitialInterval: s.BaseBackoff, MaxInterval: s.MaxBackoff},
		UndoRetry:        s.UndoRetry,
		OwedRetry:        s.OwedRetry,
		ReplyToAllowed:   s.Config.ReplyToAllowed,
		SubmitterReplyTo: s.Config.SubmitterReplyTo,
		Tenants:          s.Config.Tenants,
		Schedules:        s.Config.Schedules,
		Logger:           s.Logger,
		Metrics:          s.Metrics,
	})
}

// Supervisor builds a supervisor. actor names the instance in the records'
// history. The trigger runs it: supervisor.NewHandler, or RunOnce.
func (s System) Supervisor(actor string) (*supervisor.Supervisor, error) {
	limits, err := s.Workflows.Limits()
	if err != nil {
		return nil, fmt.Errorf("step limits: %w", err)
	}
	metrics := s.Metrics
	if metrics == nil {
		metrics = io.Discard // the supervisor's own default is stdout
	}
	var pauses sas.PauseReader
	if p, ok := s.Store.(sas.PauseReader); ok {
		pauses = p // operators' pauses of agents (docs/console.md)
	}
	return supervisor.New(supervisor.Config{
		Store:           s.Store,
		Queue:           s.Queue,
		Alerter:         s.Alerter,
		ControlQueueURL: s.Config.ControlQueueURL,
		Clock:           s.Clock,
		MaxFailures:     s.Config.MaxFailures,
		PickupTimeout:   s.Config.PickupTimeout,
		BaseBackoff:     s.BaseBackoff,
		MaxBackoff:      s.MaxBackoff,
		UndoRetry:       s.UndoRetry,
		OwedRetry:       s.OwedRetry,
		// A held step past its deadline is waited on, not failed, while
		// these queues hold messages (for at most its wait limit).
		BacklogQueueURLs: BacklogQueues(s.Config),
		WaitLimit:        s.Config.WaitLimit, // 0: supervisor.DefaultWaitLimit
		Steps:            limits,
		Workflows:        s.Workflows,
		Pauses:           pauses,
		StepAgents:       s.Workflows.StepAgents(),
		Actor:            actor,
		Logger:           s.Logger,
		Metrics:          metrics,
	})
}
