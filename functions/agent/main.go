// Command agent is the agent Lambda function: it reads agent.request messages
// from the agent queue, calls the payments service, and replies to the
// scheduler (internal/agent). This file only wires.
package main

import (
	"context"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/agent"
	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/httpagent"
	"github.com/sas-go/sas/internal/sqsqueue"
)

// Remote-call settings that are not configuration: they follow from the
// design, not from the deployment.
const (
	// attemptTimeout bounds one try, so a hung connection costs one try and
	// not the whole step.
	attemptTimeout = 10 * time.Second
)

func main() {
	handler, err := build(context.Background(), os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(handler)
}

// build wires environment → SDK client → queue adapter → HTTP caller →
// service, and returns the typed handler.
func build(ctx context.Context, getenv config.Getenv) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return nil, err
	}
	if err := config.Require(getenv, "SAS_SCHEDULER_QUEUE_URL", "SAS_PAYMENTS_URL"); err != nil {
		return nil, err
	}
	awsCfg, err := awsenv.Load(ctx)
	if err != nil {
		return nil, err
	}
	caller, err := httpagent.New(httpagent.Config{AttemptTimeout: attemptTimeout, MaxResponseBytes: agent.MaxResponseBytes})
	if err != nil {
		return nil, err
	}
	svc, err := agent.FromConfig(cfg, agent.Deps{
		Queue:  sqsqueue.New(sqs.NewFromConfig(awsCfg)),
		Caller: caller,
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil)),
	})
	if err != nil {
		return nil, err
	}
	return svc.Handle, nil
}
