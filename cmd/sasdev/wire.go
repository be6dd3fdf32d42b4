package main

import (
	"crypto/rand"
	"encoding/hex"
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

// The scheduler and the supervisor are built here from the configuration
// the functions read (config.Load over the variables the stack sets), with
// the same constructors and the same handlers, wired as functions/scheduler
// and functions/supervisor wire them; only the trigger differs (pollers and
// a ticker instead of the event source mappings and the schedule). Keep the
// two in step when a function's wiring changes.

// newScheduler is functions/scheduler's setup.
func newScheduler(awsCfg aws.Config, cfg config.Config, logger *slog.Logger) (*scheduler.Handler, error) {
	if cfg.AgentQueues.Empty() {
		return nil, fmt.Errorf("missing configuration: SAS_AGENT_QUEUES or SAS_AGENT_QUEUE_URL")
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
	owner := "scheduler-" + randomHex(16)
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
		Logger:         logger.With("owner", owner),
	})
	if err != nil {
		return nil, err
	}
	return scheduler.NewHandler(svc), nil
}

// newSupervisor is functions/supervisor's setup. Its EMF metric lines go
// to its log, as Lambda ships them with the function's stdout.
func newSupervisor(awsCfg aws.Config, cfg config.Config, logger *slog.Logger, metrics io.Writer) (*supervisor.Handler, error) {
	if cfg.AgentQueues.Empty() {
		return nil, fmt.Errorf("missing configuration: SAS_AGENT_QUEUES or SAS_AGENT_QUEUE_URL")
	}
	store, err := dynamostore.FromConfig(awsCfg, cfg)
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
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
		BacklogQueueURLs:  append(cfg.AgentQueues.All(), cfg.SchedulerQueueURL),
		WaitLimit:         cfg.WaitLimit,
		Steps:             limits,
		Actor:             "supervisor:sasdev-" + randomHex(6),
		Logger:            logger,
		Metrics:           metrics,
	})
	if err != nil {
		return nil, err
	}
	return supervisor.NewHandler(sup), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
