// Command agent is the built-in agent's Lambda function: an HTTP agent of
// the public SDK (package agent) that calls each step's action on one
// service and replies to the scheduler (internal/builtinagent). This file
// only wires.
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/agenthost"
	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/awssecret"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/config"
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

// build wires environment → HTTP caller → the built-in agent → the SDK's
// handler (SQS client included), and returns the typed handler.
func build(ctx context.Context, getenv config.Getenv) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return nil, err
	}
	var missing []string
	if getenv(agent.EnvSchedulerQueueURL) == "" {
		missing = append(missing, agent.EnvSchedulerQueueURL)
	}
	if getenv(builtinagent.EnvBaseURL) == "" && cfg.PaymentsURL == "" {
		missing = append(missing, builtinagent.EnvBaseURL+" (or SAS_PAYMENTS_URL)")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing configuration: %s", strings.Join(missing, ", "))
	}
	client, err := agent.NewHTTPClient(agent.HTTPOptions{AttemptTimeout: attemptTimeout, MaxResponseBytes: agenthost.MaxResponseBytes})
	if err != nil {
		return nil, err
	}
	// The auth header's value is read once, at cold start, from the secret
	// its ARN names (Secrets Manager or SSM), granted to this agent's role
	// alone; a function started after a rotation reads the new value.
	d, err := builtinagent.DepsFromEnv(ctx, getenv, lazySecrets{})
	if err != nil {
		return nil, err
	}
	d.Client = client
	// JSON lines on stderr, as the SDK's handler logs.
	d.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	a, err := builtinagent.Agent(cfg, d)
	if err != nil {
		return nil, err
	}
	h, err := agent.FromEnv(ctx, getenv, a)
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}

// lazySecrets builds the AWS clients only when a secret is read.
type lazySecrets struct{}

func (lazySecrets) Value(ctx context.Context, arn string) (string, error) {
	cfg, err := awsenv.Load(ctx)
	if err != nil {
		return "", err
	}
	return awssecret.New(cfg).Value(ctx, arn)
}
