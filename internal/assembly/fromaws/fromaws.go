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
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
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

// Secrets Manager's stages of the signing key: the scheduler signs with
// the current version and accepts the pending one (a key being introduced)
// and the previous one (the key before the last rotation), for as long as
// they carry their stage (docs/trust.md, "The signing key").
const (
	stageCurrent  = "AWSCURRENT"
	stagePending  = "AWSPENDING"
	stagePrevious = "AWSPREVIOUS"
)

// secretReader is what SigningKeys needs of Secrets Manager.
type secretReader interface {
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SigningKeys is where the scheduler reads its signing keys: from Secrets
// Manager (SAS_SIGNING_KEY_SECRET), readable by the scheduler's role alone
// in a deployment, or, for a local run, SAS_SIGNING_KEY (a key that never
// changes).
func SigningKeys(awsCfg aws.Config, cfg config.Config) (sas.KeySource, error) {
	switch {
	case cfg.SigningKey != "":
		key, err := sas.ParseSigningKey(cfg.SigningKey)
		if err != nil {
			return nil, err
		}
		return func(context.Context) (sas.KeyRing, error) { return sas.KeyRing{Current: key}, nil }, nil
	case cfg.SigningKeySecret == "":
		return nil, ErrNoSigningKey
	}
	return secretKeys(secretsmanager.NewFromConfig(awsCfg), cfg.SigningKeySecret), nil
}

// secretKeys reads the secret's current version, and its pending and
// previous ones where they exist.
func secretKeys(sm secretReader, secret string) sas.KeySource {
	read := func(ctx context.Context, stage string) ([]byte, error) {
		out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(secret), VersionStage: aws.String(stage)})
		var missing *smtypes.ResourceNotFoundException
		switch {
		case errors.As(err, &missing) && stage != stageCurrent:
			return nil, nil // no version has the stage
		case err != nil:
			return nil, fmt.Errorf("reading the signing key %s (%s): %w", secret, stage, err)
		case out.SecretString == nil:
			return nil, fmt.Errorf("the signing key %s (%s) has no string value", secret, stage)
		}
		key, err := sas.ParseSigningKey(*out.SecretString)
		if err != nil {
			return nil, fmt.Errorf("the signing key %s (%s): %w", secret, stage, err)
		}
		return key, nil
	}
	return func(ctx context.Context) (sas.KeyRing, error) {
		var ring sas.KeyRing
		for _, stage := range []string{stageCurrent, stagePending, stagePrevious} {
			key, err := read(ctx, stage)
			if err != nil {
				return sas.KeyRing{}, err
			}
			if stage == stageCurrent {
				ring.Current = key
			} else if key != nil {
				ring.Accepted = append(ring.Accepted, key)
			}
		}
		return ring, nil
	}
}

// SchedulerHandler builds the scheduler's handler from an AWS account: the
// parts (System), the signing keys (SigningKeys) and the service, as the
// Lambda function and the dev server run it. owner is the instance's id
// (LockedBy), unique per process.
func SchedulerHandler(ctx context.Context, awsCfg aws.Config, cfg config.Config, logger *slog.Logger, owner string, metrics io.Writer) (*scheduler.Handler, error) {
	sys, err := System(awsCfg, cfg, logger, metrics)
	if err != nil {
		return nil, err
	}
	keys, err := SigningKeys(awsCfg, cfg)
	if err != nil {
		return nil, err
	}
	// Read at cold start, and again once they are SAS_SIGNING_KEY_MAX_AGE
	// old: a rotation reaches every warm instance within that age.
	signer, err := sas.NewSourcedSigner(ctx, keys, sys.Clock, cfg.SigningKeyMaxAge)
	if err != nil {
		return nil, err
	}
	svc, err := sys.SchedulerSigned(owner, signer)
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
