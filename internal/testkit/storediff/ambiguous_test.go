// Package storediff holds the differential test of the two state stores
// (internal/memstore, and internal/dynamostore on DynamoDB Local;
// docs/state-store.md, "The differential test"), and Ambiguous, the
// ambiguous commit both stores are put through.
package storediff

import (
	"context"

	"github.com/sas-go/sas/internal/sas"
)

// Ambiguous is a store whose writes commit and lose their response: a write
// that succeeded is sent again, as the AWS SDK retries a request it got no
// answer to, and the caller gets the retry's answer. A fenced retry fails
// its condition against the write it repeats, so the caller sees a lost
// race whose Current is its own write; an idempotent one answers the same
// again. (The SDK gives a transaction an idempotency token, so its own
// retry of Complete-with-Next succeeds; this sends a fresh request, as a
// redelivered message does, which is the harder case.)
type Ambiguous struct{ sas.StateStore }

var _ sas.StateStore = Ambiguous{}

// again runs f and, when it succeeded, runs it again and returns that.
func again[R any](f func() (R, error)) (R, error) {
	if r, err := f(); err != nil {
		return r, err
	}
	return f()
}

func (a Ambiguous) Submit(ctx context.Context, p sas.SubmitParams) (sas.SubmitResult, error) {
	return again(func() (sas.SubmitResult, error) { return a.StateStore.Submit(ctx, p) })
}

func (a Ambiguous) Claim(ctx context.Context, p sas.ClaimParams) (sas.StepRecord, error) {
	return again(func() (sas.StepRecord, error) { return a.StateStore.Claim(ctx, p) })
}

func (a Ambiguous) Complete(ctx context.Context, p sas.CompleteParams) ([]sas.StepRecord, error) {
	return again(func() ([]sas.StepRecord, error) { return a.StateStore.Complete(ctx, p) })
}

func (a Ambiguous) Fail(ctx context.Context, p sas.FailParams) (sas.StepRecord, error) {
	return again(func() (sas.StepRecord, error) { return a.StateStore.Fail(ctx, p) })
}

func (a Ambiguous) Rescue(ctx context.Context, p sas.RescueParams) (sas.StepRecord, error) {
	return again(func() (sas.StepRecord, error) { return a.StateStore.Rescue(ctx, p) })
}

func (a Ambiguous) GiveUp(ctx context.Context, p sas.GiveUpParams) (sas.StepRecord, error) {
	return again(func() (sas.StepRecord, error) { return a.StateStore.GiveUp(ctx, p) })
}

func (a Ambiguous) Wait(ctx context.Context, p sas.WaitParams) (sas.StepRecord, error) {
	return again(func() (sas.StepRecord, error) { return a.StateStore.Wait(ctx, p) })
}

func (a Ambiguous) Heartbeat(ctx context.Context, p sas.HeartbeatParams) (sas.StepRecord, error) {
	return again(func() (sas.StepRecord, error) { return a.StateStore.Heartbeat(ctx, p) })
}

func (a Ambiguous) Resubmit(ctx context.Context, p sas.ResubmitParams) (sas.StepRecord, error) {
	return again(func() (sas.StepRecord, error) { return a.StateStore.Resubmit(ctx, p) })
}

func (a Ambiguous) NoteEffect(ctx context.Context, p sas.NoteEffectParams) (sas.StepRecord, error) {
	return again(func() (sas.StepRecord, error) { return a.StateStore.NoteEffect(ctx, p) })
}

func (a Ambiguous) Settle(ctx context.Context, p sas.SettleParams) (sas.StepRecord, error) {
	return again(func() (sas.StepRecord, error) { return a.StateStore.Settle(ctx, p) })
}

func (a Ambiguous) PutDefinition(ctx context.Context, w sas.Workflow) error {
	_, err := again(func() (struct{}, error) { return struct{}{}, a.StateStore.PutDefinition(ctx, w) })
	return err
}

func (a Ambiguous) Cancel(ctx context.Context, p sas.CancelParams) (sas.StepRecord, error) {
	return again(func() (sas.StepRecord, error) { return a.StateStore.Cancel(ctx, p) })
}

func (a Ambiguous) SkipRun(ctx context.Context, p sas.SkipRunParams) (sas.ScheduleState, error) {
	return again(func() (sas.ScheduleState, error) { return a.StateStore.SkipRun(ctx, p) })
}

func (a Ambiguous) StartFanOut(ctx context.Context, p sas.StartFanOutParams) ([]sas.StepRecord, error) {
	return again(func() ([]sas.StepRecord, error) { return a.StateStore.(sas.FanOutStore).StartFanOut(ctx, p) })
}

func (a Ambiguous) CompleteElement(ctx context.Context, p sas.CompleteElementParams) ([]sas.StepRecord, error) {
	return again(func() ([]sas.StepRecord, error) { return a.StateStore.(sas.FanOutStore).CompleteElement(ctx, p) })
}

func (a Ambiguous) ListElements(ctx context.Context, p sas.ListElementsParams) (sas.ListElementsResult, error) {
	return a.StateStore.(sas.FanOutStore).ListElements(ctx, p)
}
