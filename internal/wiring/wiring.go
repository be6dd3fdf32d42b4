// Package wiring builds the scheduler's and the supervisor's handlers from
// the deployment's configuration (internal/config, the SAS_* variables):
// store, queue, alerter, workflows, limits. The Lambda entry points
// (functions/scheduler, functions/supervisor) and the dev server
// (cmd/sasdev) build them here, so what runs locally is wired as what runs
// in Lambda; only the trigger differs.
package wiring

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/supervisor"
	"github.com/sas-go/sas/internal/workflows"
)

// ErrNoAgentQueue is the configuration error of a deployment that names no
// agent queue at all (docs/agents.md).
var ErrNoAgentQueue = fmt.Errorf("missing configuration: SAS_AGENT_QUEUES or SAS_AGENT_QUEUE_URL")

// Scheduler builds the scheduler's handler; owner is the instance's id
// (LockedBy), unique per process.
func Scheduler(awsCfg aws.Config, cfg config.Config, logger *slog.Logger, owner string) (*scheduler.Handler, error) {
	if cfg.AgentQueues.Empty() {
		return nil, ErrNoAgentQueue
	}
	store, err := dynamostore.FromConfig(awsCfg, cfg)
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	reg, err := workflows.Load(cfg.WorkflowsFile, cfg.StepTimeout)
	if err != nil {
		return nil, err
	}
	alerter, err := alerts.FromConfig(awsCfg, cfg, logger)
	if err != nil {
		return nil, err
	}
	svc, err := scheduler.New(scheduler.Config{
		Store:          store,
		Queue:          sqsqueue.New(sqs.NewFromConfig(awsCfg)),
		Clock:          sas.SystemClock{},
		Alerter:        alerter,
		Workflows:      reg,
		Owner:          owner,
		AgentQueues:    cfg.AgentQueues,
		IntakeQueueURL: cfg.IntakeQueueURL,
		StepTimeout:    cfg.StepTimeout,
		PickupTimeout:  cfg.PickupTimeout,
		ReplyToAllowed: cfg.ReplyToAllowed,
		Logger:         logger,
	})
	if err != nil {
		return nil, err
	}
	return scheduler.NewHandler(svc), nil
}

// Supervisor builds the supervisor's handler. actor names the instance in
// the records' history; metrics receives its EMF lines (Lambda ships stdout
// to CloudWatch Logs).
func Supervisor(awsCfg aws.Config, cfg config.Config, logger *slog.Logger, actor string, metrics io.Writer) (*supervisor.Handler, error) {
	if cfg.AgentQueues.Empty() {
		// The agent queues' depth tells a held step that waits for a busy
		// agent from one that is stuck.
		return nil, ErrNoAgentQueue
	}
	store, err := dynamostore.FromConfig(awsCfg, cfg)
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	// The step limits come from the workflows the scheduler runs, read
	// from the same variable.
	reg, err := workflows.Load(cfg.WorkflowsFile, cfg.StepTimeout)
	if err != nil {
		return nil, err
	}
	limits, err := reg.Limits()
	if err != nil {
		return nil, fmt.Errorf("step limits: %w", err)
	}
	alerter, err := alerts.FromConfig(awsCfg, cfg, logger)
	if err != nil {
		return nil, err
	}
	sup, err := supervisor.New(supervisor.Config{
		Store:             store,
		Queue:             sqsqueue.New(sqs.NewFromConfig(awsCfg)),
		Alerter:           alerter,
		SchedulerQueueURL: cfg.SchedulerQueueURL,
		MaxFailures:       cfg.MaxFailures,
		PickupTimeout:     cfg.PickupTimeout,
		// A held step past its deadline is waited on, not failed, while
		// these queues hold messages (for at most its wait limit).
		BacklogQueueURLs: append(cfg.AgentQueues.All(), cfg.SchedulerQueueURL),
		WaitLimit:        cfg.WaitLimit, // 0: supervisor.DefaultWaitLimit
		Steps:            limits,
		Actor:            actor,
		Logger:           logger,
		Metrics:          metrics,
	})
	if err != nil {
		return nil, err
	}
	return supervisor.NewHandler(sup), nil
}
