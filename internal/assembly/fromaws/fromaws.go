// Package fromaws loads the assembly's parts from an AWS account (or the
// emulators the AWS endpoint variables point at), as the deployment's
// configuration (internal/config, the SAS_* variables) names them: the
// DynamoDB store, the SQS queues, the alerter, the workflows, and the
// scheduler's signing key. The Lambda entry points (functions/scheduler,
// functions/supervisor) and the dev server (cmd/sasdev) build on it; what
// they build is the assembly's (internal/assembly).
//
// It is apart from package assembly so that the test kit, which assembles
// in memory, does not carry the AWS clients only this loading needs.
package fromaws

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/assembly"
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

// System loads the parts the scheduler and the supervisor are built on and
// returns the system they make. logger and metrics receive the actors'
// logs and EMF lines. A deployment without an agent queue is refused: the
// scheduler sends to them, and the supervisor reads their depth to tell a
// held step that waits for a busy agent from one that is stuck.
func System(awsCfg aws.Config, cfg config.Config, logger *slog.Logger, metrics io.Writer) (assembly.System, error) {
	if cfg.AgentQueues.Empty() {
		return assembly.System{}, ErrNoAgentQueue
	}
	if cfg.ControlQueueURL == "" {
		return assembly.System{}, ErrNoControlQueue
	}
	store, err := dynamostore.FromConfig(awsCfg, cfg)
	if err != nil {
		return assembly.System{}, fmt.Errorf("state store: %w", err)
	}
	// The scheduler and the supervisor read the workflows from the same
	// variable: the supervisor's step limits are those of the workflows
	// the scheduler runs.
	reg, err := registry.Load(cfg.WorkflowsFile, cfg.StepTimeout)
	if err != nil {
		return assembly.System{}, err
	}
	alerter, err := alerts.FromConfig(awsCfg, cfg, logger)
	if err != nil {
		return assembly.System{}, err
	}
	return assembly.System{Config: cfg, Parts: assembly.Parts{
		Store: store, Queue: sqsqueue.New(sqs.NewFromConfig(awsCfg)), Alerter: alerter, Workflows: reg,
		Logger: logger, Metrics: metrics,
	}}, nil
}

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

// SchedulerHandler builds the scheduler's handler from an AWS account: the
// parts (System), the signing key (SigningKey) and the service, as the
// Lambda function and the dev server run it. owner is the instance's id
// (LockedBy), unique per process.
func SchedulerHandler(ctx context.Context, awsCfg aws.Config, cfg config.Config, logger *slog.Logger, owner string, metrics io.Writer) (*scheduler.Handler, error) {
	sys, err := System(awsCfg, cfg, logger, metrics)
	if err != nil {
		return nil, err
	}
	key, err := SigningKey(ctx, awsCfg, cfg)
	if err != nil {
		return nil, err
	}
	svc, err := sys.Scheduler(owner, key)
	if err != nil {
		return nil, err
	}
	return scheduler.NewHandler(svc), nil
}

// SupervisorHandler builds the supervisor's handler from an AWS account, as
// the Lambda function and the dev server run it; actor names the instance
// in the records' history.
func SupervisorHandler(awsCfg aws.Config, cfg config.Config, logger *slog.Logger, actor string, metrics io.Writer) (*supervisor.Handler, error) {
	sys, err := System(awsCfg, cfg, logger, metrics)
	if err != nil {
		return nil, err
	}
	sup, err := sys.Supervisor(actor)
	if err != nil {
		return nil, err
	}
	return supervisor.NewHandler(sup), nil
}
