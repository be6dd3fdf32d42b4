// Command supervisor is the supervisor Lambda function, run by an
// EventBridge schedule (docs/pattern.md §3). It only wires: environment → SDK clients
// → adapters → supervisor → handler → lambda.Start.
package main

import (
	"context"
	"log"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sas-go/sas/internal/assembly/fromaws"
	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/supervisor"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	h, err := setup(context.Background(), os.Getenv, logger)
	if err != nil {
		log.Fatalf("supervisor: %v", err)
	}
	lambda.Start(h.Handle)
}

// required are the variables without which the supervisor cannot work.
// The agent queues (SAS_AGENT_QUEUES or SAS_AGENT_QUEUE_URL) are read (their depth) to tell a held step that waits for a
// busy agent from one that is stuck.
var required = []string{"SAS_ORDERS_TABLE", "SAS_STATE_TABLE", "SAS_SCHEDULER_QUEUE_URL"}

// setup builds the handler from the environment: the parts from AWS
// (internal/assembly/fromaws), the supervisor as the dev server, the local
// runs and the test kit build it (internal/assembly).
func setup(ctx context.Context, getenv config.Getenv, logger *slog.Logger) (*supervisor.Handler, error) {
	if err := config.Require(getenv, required...); err != nil {
		return nil, err
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return nil, err
	}
	aws, err := awsenv.Load(ctx)
	if err != nil {
		return nil, err
	}
	// EMF: Lambda ships stdout to CloudWatch Logs.
	return fromaws.SupervisorHandler(aws, cfg, logger, actor(getenv), os.Stdout)
}

// actor names this instance in the records' history: the Lambda log stream,
// so a history entry leads to the logs of the run that wrote it.
func actor(getenv config.Getenv) string {
	if s := getenv("AWS_LAMBDA_LOG_STREAM_NAME"); s != "" {
		return "supervisor:" + s
	}
	return "supervisor:" + sas.RandomID(6)
}
