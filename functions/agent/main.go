// Command agent is the built-in agent's Lambda function: an HTTP agent of
// the public SDK (package agent) that calls each step's action on one
// service and replies to the scheduler (internal/builtinagent). This file
// only wires: environment → SDK clients → assembly → handler → lambda.Start.
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/assembly"
	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/awssecret"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/sqsqueue"
)

func main() {
	handler, err := build(context.Background(), os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(handler)
}

// build wires environment → SQS client → the built-in agent, hosted by the
// assembly (internal/assembly) as the dev server and the local runs host it
// → the SDK's handler, and returns the typed handler.
func build(ctx context.Context, getenv config.Getenv) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return nil, err
	}
	var missing []string
	if cfg.SchedulerQueueURL == "" {
		missing = append(missing, agent.EnvSchedulerQueueURL)
	}
	if getenv(builtinagent.EnvBaseURL) == "" && cfg.PaymentsURL == "" {
		missing = append(missing, builtinagent.EnvBaseURL+" (or SAS_PAYMENTS_URL)")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing configuration: %s", strings.Join(missing, ", "))
	}
	awsCfg, err := awsenv.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("configuring the agent handler: %w", err)
	}
	// The auth header's value is read once, at cold start, from the secret
	// its ARN names (Secrets Manager or SSM), granted to this agent's role
	// alone; a function started after a rotation reads the new value.
	d, err := builtinagent.DepsFromEnv(ctx, getenv, awssecret.New(awsCfg))
	if err != nil {
		return nil, err
	}
	sys := assembly.System{Config: cfg, Parts: assembly.Parts{
		Queue: sqsqueue.New(sqs.NewFromConfig(awsCfg)),
		// JSON lines on stderr; its EMF lines on stdout, which Lambda
		// ships to CloudWatch Logs.
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil)), Metrics: os.Stdout,
	}}
	h, err := sys.BuiltinAgent(d, assembly.Hosting{})
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}
