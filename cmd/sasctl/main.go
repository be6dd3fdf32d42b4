// Command sasctl is the operator's command line (see internal/sasctl).
// It reads the same environment variables as the functions.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"os/user"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/sasctl"
	"github.com/sas-go/sas/internal/sqsqueue"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sasctl:", err)
		if errors.Is(err, sasctl.ErrUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(os.Stdout, sasctl.Usage)
		return sasctl.ErrUsage
	}
	cfg, err := config.Load(os.Getenv)
	if err != nil {
		return err
	}
	if err := config.Require(os.Getenv, "SAS_ORDERS_TABLE", "SAS_STATE_TABLE"); err != nil {
		return err
	}
	awsCfg, err := awsenv.Load(ctx)
	if err != nil {
		return err
	}
	store, err := dynamostore.FromConfig(awsCfg, cfg)
	if err != nil {
		return err
	}
	actor := "operator"
	if u, err := user.Current(); err == nil {
		actor = "operator:" + u.Username
	}
	app := &sasctl.App{
		Store: store, Queue: sqsqueue.New(sqs.NewFromConfig(awsCfg)),
		IntakeQueueURL: cfg.IntakeQueueURL, SchedulerQueueURL: cfg.SchedulerQueueURL,
		PickupTimeout: cfg.PickupTimeout, Actor: actor, Out: os.Stdout,
	}
	return app.Run(ctx, args)
}
