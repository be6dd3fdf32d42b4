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
	require.ErrorContains(t, err, "is Processed at attempt 1, not waiting for this token (attempt 1): nothing sent")
	require.Empty(t, f.receive(t, f.schq))
}
