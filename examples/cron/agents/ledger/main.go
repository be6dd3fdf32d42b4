// Command ledger is the cron example's agent: a Lambda function (or, under
// the dev server, a poller) serving the reconcile workflow's steps against a
// ledger that logs what it would do.
package main

import (
	"context"
	"log"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/examples/cron"
)

type logLedger struct{}

func (logLedger) Entries(context.Context, string) (int, error) { return 0, nil }

func (logLedger) Reconcile(_ context.Context, key, ledger string, entries int) error {
	log.Printf("reconciled ledger %s (%d entries) under %s", ledger, entries, key)
	return nil
}

func main() {
	if err := agent.Start(cron.Agent(logLedger{})); err != nil {
		log.Fatal(err)
	}
}
