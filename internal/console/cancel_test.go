package console_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// The console cancels an order as sasctl does: a dry run that says what
// would happen, a confirmation, and the operator in the step's history;
// its compensate dry run refuses an order with a step in flight, where the
// scheduler would drop the request.
func TestTheConsoleCancelsWithADryRunAndRefusesACompensateInFlight(t *testing.T) {
	ts, st := fast(t, false)
	ctx := context.Background()
	k := sas.StepKey{OrderID: "o-1"}
	_, err := st.Claim(ctx, sas.ClaimParams{Key: k, Owner: "s", Now: t0, CompleteBy: t0.Add(time.Hour)})
	require.NoError(t, err)
	page := get(t, ts.URL+"/orders/o-1")
	require.Contains(t, page, `action="/actions/cancel"`)
	token := tokenRE.FindStringSubmatch(page)[1]
	send := func(action string, form url.Values) (int, string) {
		resp, body := postAction(t, ts.URL, action, token, form)
		return resp.StatusCode, body
	}

	code, body := send("compensate", url.Values{"id": {"o-1"}})
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "refuse: step 0 (charge) is Processing and could still take effect")
	require.NotContains(t, body, `id="confirm"`, "nothing to confirm")

	code, body = send("cancel", url.Values{"id": {"o-1"}})
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "Dry run: cancel")
	require.Contains(t, body, "in flight (attempt 1): the cancel takes effect when it settles")
	r, err := st.GetStep(ctx, k)
	require.NoError(t, err)
	require.False(t, r.Cancelled, "a dry run changes nothing")

	code, _ = send("cancel", url.Values{"id": {"o-1"}, "confirm": {"1"}, "reason": {"customer called"}})
	require.Equal(t, http.StatusSeeOther, code)
	require.Eventually(t, func() bool {
		r, err = st.GetStep(ctx, k)
		return err == nil && r.Cancelled
	}, 10*time.Second, 10*time.Millisecond, "the job runs the cancel")
	require.Equal(t, "cancel requested by operator:test: customer called", r.History[len(r.History)-1].Reason)
}

// An order with two branches in flight: the dry run says the cancel
// marks each, and the confirmed cancel does.
func TestTheConsoleCancelsEveryBranchInFlight(t *testing.T) {
	ts, st := fast(t, false)
	ctx := context.Background()
	o := sas.Order{OrderID: "o-br", Workflow: "trip", Steps: []string{"quote", "flight", "hotel", "pay"}, After: [][]int{{}, {0}, {0}, {1, 2}}}
	_, err := st.Submit(ctx, sas.SubmitParams{Order: o, Now: t0, PickupBy: t0.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(time.Hour)}})
	require.NoError(t, err)
	claim := func(step int) sas.ClaimParams {
		return sas.ClaimParams{Key: sas.StepKey{OrderID: "o-br", Step: step}, Owner: "s", Now: t0, CompleteBy: t0.Add(time.Hour)}
	}
	next := claim(1)
	_, err = st.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-br"}, Owner: "s", Attempt: 1, Now: t0, Graph: true,
		Next: &next, More: []sas.ClaimParams{claim(2)}})
	require.NoError(t, err)
	token := tokenRE.FindStringSubmatch(get(t, ts.URL+"/orders/o-br"))[1]

	resp, body := postAction(t, ts.URL, "cancel", token, url.Values{"id": {"o-br"}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "2 steps in flight at once: the cancel marks each and takes effect when they have settled")

	resp, _ = postAction(t, ts.URL, "cancel", token, url.Values{"id": {"o-br"}, "confirm": {"1"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Eventually(t, func() bool {
		v, err := st.GetOrder(ctx, "o-br")
		return err == nil && v.Steps[1].Cancelled && v.Steps[2].Cancelled
	}, 10*time.Second, 10*time.Millisecond, "the job marks both branches")
}
