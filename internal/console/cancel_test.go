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
		resp, body := postAction(t, ts.URL, token, action, form)
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
