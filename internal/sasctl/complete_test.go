package sasctl

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// TestCompleteSendsOnlyWhatTheStepWaitsFor: sasctl complete, fail and
// heartbeat send a completion to the control queue when the token's step
// waits for it, and otherwise send nothing and say why.
func TestCompleteSendsOnlyWhatTheStepWaitsFor(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-w", Workflow: "expense", Steps: []string{"approve"}}, Now: t0, PickupBy: t0.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(72 * time.Hour)}})
	require.NoError(t, err)
	signer, err := sas.NewSigner(sas.NewSigningKey())
	require.NoError(t, err)
	tok := signer.MintToken(sas.Token{OrderID: "o-w", Step: 0, Attempt: 1, Holder: "s", IssuedAt: t0})

	require.NoError(t, f.app.Run(ctx, []string{"complete", tok, "-result", `{"approvedBy":"bob"}`}))
	require.Contains(t, f.out.String(), "sent done for step 0 (approve) of order o-w")
	require.NoError(t, f.app.Run(ctx, []string{"fail", "-token", tok, "-reason", "over budget", "-reject"}))
	require.NoError(t, f.app.Run(ctx, []string{"heartbeat", tok}))
	bodies := f.receive(t, f.schq)
	require.Len(t, bodies, 3)
	require.JSONEq(t, `{"v":1,"kind":"complete","token":"`+tok+`","outcome":"done","result":{"approvedBy":"bob"},"actor":"operator:test"}`, bodies[0])
	require.JSONEq(t, `{"v":1,"kind":"complete","token":"`+tok+`","outcome":"failed","reason":"over budget","rejected":true,"actor":"operator:test"}`, bodies[1])
	require.JSONEq(t, `{"v":1,"kind":"complete","token":"`+tok+`","outcome":"heartbeat","actor":"operator:test"}`, bodies[2])

	// A malformed one is refused before anything is read or sent.
	require.ErrorIs(t, f.app.Run(ctx, []string{"complete", tok, "-result", `{not json`}), sas.ErrInvalid)
	require.ErrorIs(t, f.app.Run(ctx, []string{"complete", "no-token-here"}), sas.ErrBadToken)

	// The step no longer waits: nothing is sent, and the command says so.
	_, err = f.store.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-w"}, Owner: "s", Attempt: 1, Now: t0.Add(time.Hour)})
	require.NoError(t, err)
	err = f.app.Run(ctx, []string{"complete", tok})
	require.ErrorContains(t, err, "is Processed at attempt 1, not waiting for this completion (attempt 1): nothing sent")
	require.Empty(t, f.receive(t, f.schq))
}

// TestCompleteByOrderAndStep: an operator names the waiting step instead of
// giving its token; sasctl reads the attempt waiting now and sends a
// completion naming it (believed from the control queue alone).
func TestCompleteByOrderAndStep(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	_, err := f.store.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-n", Workflow: "expense", Steps: []string{"approve"}}, Now: t0, PickupBy: t0.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(72 * time.Hour)}})
	require.NoError(t, err)

	require.NoError(t, f.app.Run(ctx, []string{"fail", "-order", "o-n", "-step", "0", "-reason", "over budget", "-reject"}))
	require.Contains(t, f.out.String(), "sent failed for step 0 (approve) of order o-n")
	bodies := f.receive(t, f.schq)
	require.Len(t, bodies, 1)
	require.JSONEq(t, `{"v":1,"kind":"complete","step":{"orderId":"o-n","step":0,"attempt":1,"holder":"s"},"outcome":"failed","reason":"over budget","rejected":true,"actor":"operator:test"}`, bodies[0])

	require.ErrorIs(t, f.app.Run(ctx, []string{"complete", "-order", "o-n"}), ErrUsage, "-order needs -step")
	require.ErrorIs(t, f.app.Run(ctx, []string{"complete", "-order", "o-n", "-step", "0", "-token", "x~y"}), ErrUsage, "one or the other")
	require.ErrorIs(t, f.app.Run(ctx, []string{"complete", "-order", "o-none", "-step", "0"}), sas.ErrNotFound)

	_, err = f.store.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-n"}, Owner: "s", Attempt: 1, Now: t0.Add(time.Hour)})
	require.NoError(t, err)
	require.ErrorContains(t, f.app.Run(ctx, []string{"complete", "-order", "o-n", "-step", "0"}), "is Processed at attempt 1, not waiting for this completion")
	require.Empty(t, f.receive(t, f.schq))
}
