package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/console"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/memstore"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sasctl"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// TestWaitingListsCallbackStepsAndSendsOnlyWhatStillWaits: the Waiting page
// lists the callback steps in Processing (not an agent's step in flight),
// escaped; an approve or reject is a confirmation first, then one
// completion naming the waiting attempt on the control queue; a bad form,
// a rejection without a reason, or a step that no longer waits sends
// nothing.
func TestWaitingListsCallbackStepsAndSendsOnlyWhatStillWaits(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(t0)
	q := memqueue.New(memqueue.Options{Clock: clock})
	control, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: "control"})
	require.NoError(t, err)
	st := memstore.New(memstore.Config{Shards: 2})
	reg, err := sas.NewRegistry(
		sas.Workflow{Name: "expense", Steps: []sas.StepDef{{Name: "approve", Callback: &sas.Callback{Timeout: 72 * time.Hour}}}},
		sas.Workflow{Name: "payment", Steps: []sas.StepDef{{Name: "charge", Agent: "payments", Action: "POST /payments", Timeout: time.Minute}}},
	)
	require.NoError(t, err)
	app := &sasctl.App{Store: st, Queue: q, Clock: clock, ControlQueueURL: control.URL, Actor: "operator:test", Out: io.Discard}
	srv, err := console.New(console.Config{Store: st, Queues: memQueues{q}, App: app, Clock: clock, Registry: reg, AccessToken: testSecret})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	for id, wf := range map[string]string{"e-1": "expense", "p-1": "payment"} {
		_, err := st.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: id, Workflow: wf, Steps: reg[wf].StepNames(),
			Payload: []byte(`{"note":"<script>alert(1)</script>"}`)}, Now: t0, PickupBy: t0.Add(time.Minute),
			Claim: &sas.ClaimParams{Owner: "s-1", CompleteBy: t0.Add(72 * time.Hour)}})
		require.NoError(t, err)
	}

	page := get(t, ts.URL+"/waiting")
	require.Contains(t, page, `data-order="e-1"`)
	require.NotContains(t, page, `data-order="p-1"`, "an agent's step in flight waits for no person")
	require.NotContains(t, page, "<script>alert(1)")
	csrf := tokenRE.FindStringSubmatch(page)[1]
	named := url.Values{"order": {"e-1"}, "step": {"0"}, "attempt": {"1"}, "holder": {"s-1"}}
	with := func(kv ...string) url.Values {
		f := url.Values{}
		for k, v := range named {
			f[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	sent := func() []string {
		msgs, err := q.Receive(ctx, sas.ReceiveParams{QueueURL: control.URL, Max: 10, Visibility: time.Hour})
		require.NoError(t, err)
		var out []string
		for _, m := range msgs {
			out = append(out, m.Body)
		}
		return out
	}

	resp, body := postAction(t, ts.URL, "approve", csrf, with())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `id="confirm"`, "a confirmation first")
	resp, _ = postAction(t, ts.URL, "approve", csrf, with("attempt", "x"))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, body = postAction(t, ts.URL, "reject", csrf, with("confirm", "1"))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "a rejection needs a reason")
	resp, _ = postAction(t, ts.URL, "approve", csrf, with("confirm", "1", "result", "{not json"))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Empty(t, sent(), "nothing sent for a bad form")

	resp, _ = postAction(t, ts.URL, "approve", csrf, with("confirm", "1", "result", `{"ok":true}`))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	job := finishedJob(t, ts.URL+resp.Header.Get("Location"))
	require.Contains(t, job, "1 of 1 done, 0 failed")
	bodies := sent()
	require.Len(t, bodies, 1)
	var m sas.Completion
	require.NoError(t, json.Unmarshal([]byte(bodies[0]), &m))
	require.Equal(t, &sas.WaitingStep{OrderID: "e-1", Step: 0, Attempt: 1, Holder: "s-1"}, m.Step)
	require.Equal(t, sas.OutcomeDone, m.Outcome)
	require.Equal(t, "operator:test", m.Actor)
	require.Empty(t, m.Token)

	// The step no longer waits (completed meanwhile): the confirmation says
	// so, and a confirmed approve's job fails with the reason, sending nothing.
	_, err = st.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "e-1"}, Owner: "s-1", Attempt: 1, Now: t0.Add(time.Hour)})
	require.NoError(t, err)
	resp, body = postAction(t, ts.URL, "approve", csrf, with())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `id="not-waiting"`)
	resp, _ = postAction(t, ts.URL, "approve", csrf, with("confirm", "1"))
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	job = finishedJob(t, ts.URL+resp.Header.Get("Location"))
	require.Contains(t, job, "not waiting for this completion")
	require.Empty(t, sent())
	require.NotContains(t, get(t, ts.URL+"/waiting"), `data-order="e-1"`)
}

var regexpFinished = regexp.MustCompile(`data-finished="true"`)

// finishedJob reads a job's page until it says the job finished.
func finishedJob(t *testing.T, u string) string {
	t.Helper()
	job := get(t, u)
	for i := 0; i < 500 && !regexpFinished.MatchString(job); i++ {
		time.Sleep(20 * time.Millisecond)
		job = get(t, u)
	}
	return job
}
