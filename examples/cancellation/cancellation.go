// Package cancellation is Temporal's cancellation sample, ported: a job
// provisions its resources, runs a long piece of work, waits for a person
// to review the output, and publishes it. Its submitter may cancel it at
// any point (a cancel on the intake queue; an operator with `sasctl
// cancel`). The step in flight is let to settle, no later step starts,
// and what took effect is undone, newest first: the work cleaned up, the
// resources released (Temporal's cleanup activity is each step's undo). A
// cancel during the review ends the wait at once, not at its timeout. The
// order ends Cancelled and no operator is paged (docs/protocol.md,
// "Cancellation").
package cancellation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/workflow"
)

// Workflows are the application's workflows.
func Workflows() []workflow.Workflow {
	d := workflow.Duration(time.Minute)
	return []workflow.Workflow{{Name: "job", Steps: []workflow.Step{
		{Name: "provision", Agent: "jobs", Action: "provision", Undo: "release", Timeout: d},
		{Name: "process", Agent: "jobs", Action: "process", Undo: "clean up", Timeout: d},
		{Name: "review", Callback: &workflow.Callback{Timeout: workflow.Duration(72 * time.Hour)}},
		{Name: "publish", Agent: "jobs", Action: "publish", Timeout: d},
	}}}
}

// Job is an order's payload.
type Job struct {
	Dataset string `json:"dataset"`
}

// Review is what the reviewer sends as the review step's result.
type Review struct {
	By string `json:"reviewedBy"`
}

// Cluster is the service the agent calls. Each call is made at most once
// per idempotency key; an undo of a key never done is a no-op.
type Cluster interface {
	Provision(ctx context.Context, key, dataset string) error
	Release(ctx context.Context, key string) error
	Process(ctx context.Context, key, dataset string) error
	CleanUp(ctx context.Context, key string) error
	Publish(ctx context.Context, key, reviewedBy string) error
}

// Jobs is the agent of the job's steps.
func Jobs(c Cluster) *agent.Agent {
	return agent.New("jobs").
		Step("provision", func(ctx context.Context, req agent.Request) (any, error) {
			j, err := job(req)
			if err != nil {
				return nil, err
			}
			return nil, c.Provision(ctx, req.IdempotencyKey, j.Dataset)
		}, func(ctx context.Context, req agent.Request) (any, error) {
			return nil, c.Release(ctx, req.IdempotencyKey)
		}).
		Step("process", func(ctx context.Context, req agent.Request) (any, error) {
			j, err := job(req)
			if err != nil {
				return nil, err
			}
			return nil, c.Process(ctx, req.IdempotencyKey, j.Dataset)
		}, func(ctx context.Context, req agent.Request) (any, error) {
			return nil, c.CleanUp(ctx, req.IdempotencyKey)
		}).
		Step("publish", func(ctx context.Context, req agent.Request) (any, error) {
			var r Review
			if err := req.DecodeResult("review", &r); err != nil || r.By == "" {
				return nil, agent.Permanent(errors.New("no reviewer in the review's result"))
			}
			return nil, c.Publish(ctx, req.IdempotencyKey, r.By)
		}, nil)
}

// job reads the payload; a malformed one is a permanent failure.
func job(req agent.Request) (Job, error) {
	var j Job
	if err := req.DecodePayload(&j); err != nil || j.Dataset == "" {
		return j, agent.Permanent(fmt.Errorf("not a job: %v", err))
	}
	return j, nil
}
