package storetest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// testResults: a forward completion records its step's result on the
// step's record (with the successor's claim in the same write); the undo's
// claim and completion keep it, for the undo and for people to read; a
// completion without one records none.
func testResults(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-res", 3)
	k0, k1, k2 := key("o-res", 0), key("o-res", 1), key("o-res", 2)
	claim(t, s, k0, 0, "a", T0, at(time.Minute))
	recs, err := s.Complete(ctx, sas.CompleteParams{Key: k0, Owner: "a", Attempt: 1, Now: at(time.Second),
		Result: json.RawMessage(`{"bookingId":"B-1","seats":["12A","12B"]}`),
		Next:   &sas.ClaimParams{Key: k1, Owner: "a", Now: at(time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)
	require.JSONEq(t, `{"bookingId":"B-1","seats":["12A","12B"]}`, string(recs[0].Result), "the completed record, as written")
	require.Empty(t, recs[1].Result, "the claimed successor has none yet")
	_, err = s.Complete(ctx, sas.CompleteParams{Key: k1, Owner: "a", Attempt: 1, Now: at(2 * time.Second),
		Next: &sas.ClaimParams{Key: k2, Owner: "a", Now: at(2 * time.Second), CompleteBy: at(time.Minute)}})
	require.NoError(t, err)
	_, err = s.Fail(ctx, sas.FailParams{Key: k2, Owner: "a", Attempt: 1, Now: at(3 * time.Second), Reason: "no seats", Rejected: true})
	require.NoError(t, err)

	v := get(t, s, "o-res")
	require.Equal(t, `{"bookingId":"B-1","seats":["12A","12B"]}`, string(v.Steps[0].Result))
	require.Empty(t, v.Steps[1].Result, "a step that returned nothing")
	require.Empty(t, v.Steps[2].Result)
	require.Equal(t, sas.Results{"step0": json.RawMessage(`{"bookingId":"B-1","seats":["12A","12B"]}`)}, sas.ResultsBefore(v.Steps, 2))
	require.True(t, v.Steps[2].Rejected)
	require.True(t, v.Steps[2].Refused, "a rejection is a refusal: nothing took effect")
	require.False(t, v.Steps[0].Rejected)
	require.Equal(t, sas.Rejected, v.State(), "a rejected step with nothing undone yet")

	// The undo keeps the step's result: claimed, completed.
	r, err := s.Claim(ctx, sas.ClaimParams{Key: k0, From: sas.Processed, Attempt: 1, Owner: "b", Now: at(4 * time.Second), CompleteBy: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, `{"bookingId":"B-1","seats":["12A","12B"]}`, string(r.Result))
	recs, err = s.Complete(ctx, sas.CompleteParams{Key: k0, Owner: "b", Attempt: 2, Now: at(5 * time.Second), Compensation: true,
		Result: json.RawMessage(`{"refund":"R-1"}`)})
	require.NoError(t, err)
	require.Equal(t, `{"bookingId":"B-1","seats":["12A","12B"]}`, string(recs[0].Result), "an undo's result is not recorded")
	got, err := s.GetStep(ctx, k0)
	require.NoError(t, err)
	require.Equal(t, sas.Compensated, got.ProcessState)
	require.Equal(t, `{"bookingId":"B-1","seats":["12A","12B"]}`, string(got.Result))
	require.Equal(t, sas.Rejected, get(t, s, "o-res").State(), "compensated after a rejection")

	// The largest result a step may have (in multi-byte characters) is
	// stored and read back as written.
	submit(t, s, "o-res-big", 1)
	kb := key("o-res-big", 0)
	claim(t, s, kb, 0, "a", T0, at(time.Minute))
	big := json.RawMessage(`"` + strings.Repeat("é", (sas.MaxResultBytes-2)/2) + `"`)
	require.Len(t, big, sas.MaxResultBytes)
	_, err = s.Complete(ctx, sas.CompleteParams{Key: kb, Owner: "a", Attempt: 1, Now: at(time.Second), Result: big})
	require.NoError(t, err)
	got, err = s.GetStep(ctx, kb)
	require.NoError(t, err)
	require.Equal(t, string(big), string(got.Result))
}

// testFailedWithEffect: a step whose effect happened but whose result was
// over the bounds fails owing its undo (a resubmit keeps its key), and a
// rejection is cleared by a resubmit.
func testFailedWithEffect(t *testing.T, h Harness) {
	s := h.New(t).Store
	submit(t, s, "o-big", 1)
	k := key("o-big", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	r, err := s.Fail(ctx, sas.FailParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Second), Reason: "ResultTooLarge", Effect: true})
	require.NoError(t, err)
	require.Equal(t, sas.Error, r.ProcessState)
	require.True(t, r.UndoOwed, "its effect happened: a resubmit keeps its key")
	require.Equal(t, sas.Error, get(t, s, "o-big").State(), "not a rejection: an operator's")

	submit(t, s, "o-rej", 1)
	k = key("o-rej", 0)
	claim(t, s, k, 0, "a", T0, at(time.Minute))
	r, err = s.Fail(ctx, sas.FailParams{Key: k, Owner: "a", Attempt: 1, Now: at(time.Second), Reason: "card declined", Rejected: true})
	require.NoError(t, err)
	require.True(t, r.Rejected && r.Refused)
	require.Equal(t, sas.Rejected, get(t, s, "o-rej").State())
	r, err = s.Resubmit(ctx, sas.ResubmitParams{Key: k, Attempt: 1, Now: at(2 * time.Second), PickupBy: at(time.Minute), Actor: "op"})
	require.NoError(t, err)
	require.False(t, r.Rejected, "a resubmitted step is no longer rejected")
	got, err := s.GetStep(ctx, k)
	require.NoError(t, err)
	require.False(t, got.Rejected)
}
