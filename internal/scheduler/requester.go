package scheduler

import "context"

// requesterKey carries who asked for a compensation, and why, from the
// compensate message to the undo's claim (claimUndo), which records them
// in the step's history (sas.ClaimParams.RequestedBy).
type requesterKey struct{}

type requester struct{ by, why string }

func withRequester(ctx context.Context, by, why string) context.Context {
	return context.WithValue(ctx, requesterKey{}, requester{by, why})
}

func requesterOf(ctx context.Context) (by, why string) {
	r, _ := ctx.Value(requesterKey{}).(requester)
	return r.by, r.why
}
