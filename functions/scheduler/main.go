// Command scheduler is the scheduler Lambda function, triggered by the intake
// queue and the scheduler queue (agent replies, retries, compensation
// requests). It only wires: environment → SDK clients → adapters → scheduler
// → handler → lambda.Start.
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
	"github.com/sas-go/sas/internal/scheduler"
)

func main() {
	owner := instanceID()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("holder", owner)
	h, err := setup(context.Background(), os.Getenv, logger, owner)
	if err != nil {
		log.Fatalf("scheduler: %v", err)
	}
	lambda.Start(h.Handle)
}

// required are the variables without which the scheduler cannot work.
var required = []string{"SAS_ORDERS_TABLE", "SAS_STATE_TABLE"}

// setup builds the handler from the environment: the parts from AWS
// (internal/assembly/fromaws), the scheduler as the dev server, the local
// runs and the test kit build it (internal/assembly).
func setup(ctx context.Context, getenv config.Getenv, logger *slog.Logger, owner string) (*scheduler.Handler, error) {
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
	// Its EMF metric lines go to stdout, its log to stderr; Lambda ships both
	// to CloudWatch Logs (internal/metrics).
	return fromaws.SchedulerHandler(ctx, aws, cfg, logger, owner, os.Stdout)
}

// instanceID is this process's LockedBy: random per cold start, so that two
// execution environments never hold a lease under the same name (a log
// stream name is not guaranteed unique across concurrent environments'
// restarts, a 128-bit random id is).
func instanceID() string {
	return "scheduler-" + sas.RandomID(16)
}
