// Package cron is the samples' cron job, ported: "every night at 02:00
// (Paris time), reconcile the ledger". The schedule is declared with the
// CDK construct (cdk/, an EventBridge Scheduler schedule; no loop of the
// application's own) or, for the dev server, in schedules.json; each run is
// an order of the workflow "reconcile", whose id is the schedule's name and
// the time the run was scheduled for, so a trigger delivered twice is one
// run. A reconciliation can outlast a night: the schedule's overlap policy
// is "skip", so a run that falls due while the previous one is in flight is
// skipped and recorded (docs/schedules.md).
package cron

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/workflow"
)

// ScheduleName is the schedule's name: every run's order id starts with it.
const ScheduleName = "nightly-recon"

// Expression is when it runs, in EventBridge Scheduler's syntax, read in
// TimeZone.
const (
	Expression = "cron(0 2 * * ? *)"
	TimeZone   = "Europe/Paris"
)

// Payload is every run's payload.
var Payload = json.RawMessage(`{"ledger":"main"}`)

// Workflows are the application's workflows: fetch the day's entries, then
// reconcile them (a reconciliation is recorded under the run's key, so a
// retried step records it once).
func Workflows() []workflow.Workflow {
	return []workflow.Workflow{{Name: "reconcile", Steps: []workflow.Step{
		{Name: "fetch", Agent: "ledger", Action: "fetch entries", Timeout: workflow.Duration(time.Minute)},
		{Name: "reconcile", Agent: "ledger", Action: "reconcile", Timeout: workflow.Duration(5 * time.Minute)},
	}}}
}

// Ledger is the bookkeeping service the agent calls.
type Ledger interface {
	Entries(ctx context.Context, ledger string) (int, error)
	Reconcile(ctx context.Context, key, ledger string, entries int) error
}

// Run is a run's payload.
type Run struct {
	Ledger string `json:"ledger"`
}

// Fetched is the fetch step's result.
type Fetched struct {
	Entries int `json:"entries"`
}

// Agent is the ledger agent.
func Agent(l Ledger) *agent.Agent {
	return agent.New("ledger").
		Step("fetch", func(ctx context.Context, req agent.Request) (any, error) {
			var r Run
			if err := req.DecodePayload(&r); err != nil {
				return nil, agent.Permanent(err)
			}
			n, err := l.Entries(ctx, r.Ledger)
			return Fetched{Entries: n}, err
		}, nil).
		Step("reconcile", func(ctx context.Context, req agent.Request) (any, error) {
			var r Run
			var f Fetched
			if err := req.DecodePayload(&r); err != nil {
				return nil, agent.Permanent(err)
			}
			if err := req.DecodeResult("fetch", &f); err != nil {
				return nil, agent.Permanent(err)
			}
			return nil, l.Reconcile(ctx, req.IdempotencyKey, r.Ledger, f.Entries)
		}, nil)
}
