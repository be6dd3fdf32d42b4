// Package wiring builds the scheduler's and the supervisor's handlers from
// the deployment's configuration (internal/config, the SAS_* variables):
// store, queue, alerter, workflows, limits. The Lambda entry points
// (functions/scheduler, functions/supervisor) and the dev server
// (cmd/sasdev) build them here, so what runs locally is wired as what runs
// in Lambda; only the trigger differs.
package wiring

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/supervisor"
)

// ErrNoAgentQueue is the configuration error of a deployment that names no
// agent queue at all: one queue for every agent, or one per agent
// (docs/agents.md).
var ErrNoAgentQueue = fmt.Errorf("missing configuration: SAS_AGENT_QUEUES or SAS_AGENT_QUEUE_URL")

// ErrNoControlQueue is the configuration error of a deployment without a
// control queue: the supervisor's retries and compensations go there, and
// the scheduler takes them from nowhere else (docs/trust.md).
var ErrNoControlQueue = fmt.Errorf("missing configuration: SAS_CONTROL_QUEUE_URL")

// ErrNoSigningKey is the configuration error of a scheduler without a key.
var ErrNoSigningKey = fmt.Errorf("missing configuration: SAS_SIGNING_KEY_SECRET (or SAS_SIGNING_KEY for a local run)")

// SigningKey reads the key the scheduler signs its agent requests with:
// from Secrets Manager (SAS_SIGNING_KEY_SECRET), readable by the
// scheduler's role alone in a deployment, or, for a local run, from
// SAS_SIGNING_KEY.
func SigningKey(ctx context.Context, awsCfg aws.Config, cfg config.Config) ([]byte, error) {
	switch {
	case cfg.SigningKey != "":
		return sas.ParseSigningKey(cfg.SigningKey)
	case cfg.SigningKeySecret == "":
		return nil, ErrNoSigningKey
	}
	out, err := secretsmanager.NewFromConfig(awsCfg).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(cfg.SigningKeySecret)})
	if err != nil {
		return nil, fmt.Errorf("reading the signing key %s: %w", cfg.SigningKeySecret, err)
	}
	if out.SecretString == nil {
		return nil, fmt.Errorf("the signing key %s has no string value", cfg.SigningKeySecret)
	}
	key, err := sas.ParseSigningKey(*out.SecretString)
	if err != nil {
		return nil, fmt.Errorf("the signing key %s: %w", cfg.SigningKeySecret, err)
	}
	return key, nil
}

// Scheduler builds the scheduler's handler; owner is the instance's id
// (LockedBy), unique per process; metrics receives its EMF lines (nil: none).
func Scheduler(awsCfg aws.Config, cfg config.Config, logger *slog.Logger, owner string, metrics io.Writer) (*scheduler.Handler, error) {
	d, err := load(awsCfg, cfg, logger)
	if err != nil {
		return nil, err
	}
	key, err := SigningKey(context.Background(), awsCfg, cfg)
	if err != nil {
		return nil, err
	}
	svc, err := scheduler.New(scheduler.Config{
		Store:             d.store,
		Queue:             d.queue,
		Clock:             sas.SystemClock{},
		Alerter:           d.alerter,
		Workflows:         d.workflows,
		Owner:             owner,
		AgentQueues:       cfg.AgentQueues,
		IntakeQueueURL:    cfg.IntakeQueueURL,
		SchedulerQueueURL: cfg.SchedulerQueueURL,
		// Retries and compensations are taken from here alone, replies
		// only under the key (docs/trust.md).
		ControlQueueURL:      cfg.ControlQueueURL,
		SigningKey:           key,
		RequireSignedReplies: cfg.RequireSignedReplies,
		StepTimeout:          cfg.StepTimeout,
		PickupTimeout:        cfg.PickupTimeout,
		// The supervisor's failure threshold and (default) backoff.
		Retry:          sas.RetryPolicy{MaxAttempts: cfg.MaxFailures},
		ReplyToAllowed: cfg.ReplyToAllowed,
		Logger:         logger,
		Metrics:        metrics,
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
	d, err := load(awsCfg, cfg, logger)
	if err != nil {
		return nil, err
	}
	limits, err := d.workflows.Limits()
	if err != nil {
		return nil, fmt.Errorf("step limits: %w", err)
	}
	sup, err := supervisor.New(supervisor.Config{
		Store:           d.store,
		Queue:           d.queue,
		Alerter:         d.alerter,
		ControlQueueURL: cfg.ControlQueueURL,
		MaxFailures:     cfg.MaxFailures,
		PickupTimeout:   cfg.PickupTimeout,
		// A held step past its deadline is waited on, not failed, while
		// these queues hold messages (for at most its wait limit).
		BacklogQueueURLs: append(cfg.AgentQueues.All(), cfg.SchedulerQueueURL),
		WaitLimit:        cfg.WaitLimit, // 0: supervisor.DefaultWaitLimit
		Steps:            limits,
		Workflows:        d.workflows,
		Pauses:           d.store, // operators' pauses of agents (docs/console.md)
		StepAgents:       d.workflows.StepAgents(),
		Actor:            actor,
		Logger:           logger,
		Metrics:          metrics,
	})
	if err != nil {
		return nil, err
	}
	return supervisor.NewHandler(sup), nil
}

// deps are what both actors are built on.
type deps struct {
	store     *dynamostore.Store
	queue     sas.Queue
	alerter   sas.Alerter
	workflows sas.Registry
}

// load builds the deps from the configuration. A deployment without an
// agent queue is refused: the scheduler sends to them, and the supervisor
// reads their depth to tell a held step that waits for a busy agent from
// one that is stuck.
func load(awsCfg aws.Config, cfg config.Config, logger *slog.Logger) (deps, error) {
	if cfg.AgentQueues.Empty() {
		return deps{}, ErrNoAgentQueue
	}
	if cfg.ControlQueueURL == "" {
		return deps{}, ErrNoControlQueue
	}
	store, err := dynamostore.FromConfig(awsCfg, cfg)
	if err != nil {
		return deps{}, fmt.Errorf("state store: %w", err)
	}
	// Both read the workflows from the same variable: the supervisor's
	// step limits are those of the workflows the scheduler runs.
	reg, err := registry.Load(cfg.WorkflowsFile, cfg.StepTimeout)
	if err != nil {
		return deps{}, err
	}
	alerter, err := alerts.FromConfig(awsCfg, cfg, logger)
	if err != nil {
		return deps{}, err
	}
	return deps{store: store, queue: sqsqueue.New(sqs.NewFromConfig(awsCfg)), alerter: alerter, workflows: reg}, nil
}
