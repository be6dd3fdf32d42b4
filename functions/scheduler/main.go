// Command scheduler is the scheduler Lambda function, triggered by the intake
// queue and the scheduler queue (agent replies, retries, compensation
// requests). It only wires: environment → SDK clients → adapters → scheduler
// → handler → lambda.Start.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/sqsqueue"
	"github.com/sas-go/sas/internal/workflows"
)

func main() {
	owner := instanceID()
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("owner", owner)
	h, err := setup(context.Background(), os.Getenv, logger, owner)
	if err != nil {
		log.Fatalf("scheduler: %v", err)
	}
	lambda.Start(h.Handle)
}

// required are the variables without which the scheduler cannot work.
var required = []string{"SAS_ORDERS_TABLE", "SAS_STATE_TABLE"}

// setup builds the handler from the environment.
func setup(ctx context.Context, getenv config.Getenv, logger *slog.Logger, owner string) (*scheduler.Handler, error) {
	if err := config.Require(getenv, required...); err != nil {
		return nil, err
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return nil, err
	}
	if cfg.AgentQueues.Empty() {
		// One queue for every agent, or one per agent (docs/agents.md).
		return nil, fmt.Errorf("missing configuration: SAS_AGENT_QUEUES or SAS_AGENT_QUEUE_URL")
	}
	aws, err := awsenv.Load(ctx)
	if err != nil {
		return nil, err
	}
	store, err := dynamostore.FromConfig(aws, cfg)
	if err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	reg, err := workflows.Load(cfg.WorkflowsFile, cfg.StepTimeout)
	if err != nil {
		return nil, err
	}

	alerter, err := alerts.FromConfig(aws, cfg, logger)
	if err != nil {
		return nil, err
	}

	svc, err := scheduler.New(scheduler.Config{
		Store:          store,
		Queue:          sqsqueue.New(sqs.NewFromConfig(aws)),
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

// instanceID is this process's LockedBy: random per cold start, so that two
// execution environments never hold a lease under the same name (a log
// stream name is not guaranteed unique across concurrent environments'
// restarts, a 128-bit random id is).
func instanceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "scheduler-" + hex.EncodeToString(b[:])
}
