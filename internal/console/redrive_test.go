package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
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

// sqsLike is memqueue with dead-letter queues and, as SQS stamps it on
// every message, the sender's id: here the body's "testSender", since
// memqueue knows no senders.
type sqsLike struct {
	*memqueue.Queue
	dlq map[string]string
}

func (q sqsLike) DeadLetterQueue(_ context.Context, u string) (string, error) { return q.dlq[u], nil }

func (q sqsLike) Receive(ctx context.Context, p sas.ReceiveParams) ([]sas.InboundMessage, error) {
	msgs, err := q.Queue.Receive(ctx, p)
	for i := range msgs {
		var b struct {
			Sender string `json:"testSender"`
		}
		_ = json.Unmarshal([]byte(msgs[i].Body), &b)
		msgs[i].SenderID = b.Sender
	}
	return msgs, err
}

// TestRedriveShowsEachMessageAndMovesNoForgedControlMessage: the control
// queue's dead-letter queue holds a compensate the supervisor sent, one
// planted by a principal that is neither the supervisor nor an operator,
// and a retry with no sender. The dry run shows each message (id, kind,
// order, sender) and moves nothing; the confirmed run moves the
// supervisor's alone and leaves the other two where they were, each
// reported with why.
func TestRedriveShowsEachMessageAndMovesNoForgedControlMessage(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(t0)
	q := memqueue.New(memqueue.Options{Clock: clock})
	control, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: "control"})
	require.NoError(t, err)
	dlq, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: "control-dlq"})
	require.NoError(t, err)
	st := memstore.New(memstore.Config{Shards: 2})
	app := &sasctl.App{Store: st, Queue: q, Clock: clock, ControlQueueURL: control.URL, Actor: "operator:test", Out: io.Discard}
	srv, err := console.New(console.Config{Store: st, Queues: sqsLike{q, map[string]string{control.URL: dlq.URL}}, App: app, Clock: clock,
		QueueRefs: []console.QueueRef{{Name: "control", URL: control.URL}}, AccessToken: testSecret,
		ControlSenders: []string{"AROASUPERVISOR", "AROAOPERATOR"}})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)

	bodies := map[string]string{
		"supervisor": `{"v":1,"kind":"compensate","orderId":"o-good","testSender":"AROASUPERVISOR:sweep-1"}`,
		"forged":     `{"v":1,"kind":"compensate","orderId":"o-victim","testSender":"AROAEVIL:mallory"}`,
		"no sender":  `{"v":1,"kind":"retry","orderId":"o-anon","step":1}`,
	}
	var out []sas.OutboundMessage
	for id, b := range bodies {
		out = append(out, sas.OutboundMessage{ID: strings.ReplaceAll(id, " ", "-"), Body: b})
	}
	res, err := q.Send(ctx, sas.SendParams{QueueURL: dlq.URL, Messages: out})
	require.NoError(t, err)
	require.Empty(t, res.Failed)

	csrf := tokenRE.FindStringSubmatch(get(t, ts.URL+"/"))[1]
	post := func(form url.Values) (*http.Response, string) { return postAction(t, ts.URL, "redrive", csrf, form) }
	depth := func(u string) int {
		d, err := q.Depth(ctx, u)
		require.NoError(t, err)
		return d.Visible
	}

	// The dry run: every message, with its sender; two refused; nothing moved.
	resp, plan := post(url.Values{"queue": {"control"}})
	require.Equal(t, http.StatusOK, resp.StatusCode, plan)
	rows := regexp.MustCompile(`<tr data-order="([^"]*)" class="(acting|refused)"`).FindAllStringSubmatch(plan, -1)
	got := map[string]string{}
	for _, r := range rows {
		got[r[1]] = r[2]
	}
	require.Equal(t, map[string]string{"o-good": "acting", "o-victim": "refused", "o-anon": "refused"}, got)
	for _, want := range []string{"AROAEVIL:mallory", "AROASUPERVISOR:sweep-1", "neither the supervisor nor a known operator", "SQS names no sender", "compensate", "retry"} {
		require.Contains(t, plan, want)
	}
	require.Equal(t, 3, depth(dlq.URL), "a dry run hands every message back")
	require.Zero(t, depth(control.URL), "a dry run moves nothing")

	// The confirmed run.
	resp, _ = post(url.Values{"queue": {"control"}, "confirm": {"1"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	job := resp.Header.Get("Location")
	var page string
	require.Eventually(t, func() bool {
		page = get(t, ts.URL+job)
		return strings.Contains(page, `data-finished="true"`)
	}, time.Minute, 10*time.Millisecond)
	require.Contains(t, page, "3 of 3 done, 2 failed")
	require.Contains(t, page, "AROAEVIL:mallory")

	moved, err := q.Receive(ctx, sas.ReceiveParams{QueueURL: control.URL, Max: 10})
	require.NoError(t, err)
	require.Len(t, moved, 1)
	// Carried as a redrive, so that the scheduler takes it for a
	// redelivery (docs/console.md), with who sent it first.
	var rd sas.Redrive
	require.NoError(t, json.Unmarshal([]byte(moved[0].Body), &rd))
	require.Equal(t, sas.Redrive{V: sas.MessageVersion, Kind: sas.KindRedrive, Queue: sas.RedriveControl, Body: bodies["supervisor"],
		MessageID: rd.MessageID, Sender: "AROASUPERVISOR:sweep-1", Actor: "operator:test"}, rd)
	require.NotEmpty(t, rd.MessageID)
	clock.Advance(2 * time.Minute) // the refused ones' visibility
	left, err := q.Receive(ctx, sas.ReceiveParams{QueueURL: dlq.URL, Max: 10})
	require.NoError(t, err)
	var kept []string
	for _, m := range left {
		kept = append(kept, m.Body)
	}
	require.ElementsMatch(t, []string{bodies["forged"], bodies["no sender"]}, kept, "left in the dead-letter queue")
}

// TestRedriveCarriesTheSchedulersDeadLettersAsRedeliveries: a dead letter
// of the intake or the scheduler queue goes back through the control
// queue, inside a sas.Redrive naming its queue, its id and its sender, so
// that the scheduler takes it for a redelivery and sends again the request
// its first delivery claimed; an agent queue's dead letter goes back to
// its own queue as it is (an agent reports a late pick-up whatever its
// receive count).
func TestRedriveCarriesTheSchedulersDeadLettersAsRedeliveries(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(t0)
	q := memqueue.New(memqueue.Options{Clock: clock})
	mk := func(name string) string {
		c, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: name})
		require.NoError(t, err)
		return c.URL
	}
	intake, sched, control, agent := mk("intake"), mk("scheduler"), mk("control"), mk("agent")
	dlqs := map[string]string{intake: mk("intake-dlq"), sched: mk("scheduler-dlq"), agent: mk("agent-dlq")}
	st := memstore.New(memstore.Config{Shards: 2})
	app := &sasctl.App{Store: st, Queue: q, Clock: clock, IntakeQueueURL: intake, ControlQueueURL: control, Actor: "operator:test", Out: io.Discard}
	srv, err := console.New(console.Config{Store: st, Queues: sqsLike{q, dlqs}, App: app, Clock: clock,
		QueueRefs: []console.QueueRef{{Name: "intake", URL: intake}, {Name: "scheduler", URL: sched}, {Name: "control", URL: control},
			{Name: "agent payments", Agents: []string{"payments"}, URL: agent}},
		AccessToken: testSecret})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)

	bodies := map[string]string{
		intake: `{"orderId":"o-1","workflow":"payment","testSender":"AROASHOP:web"}`,
		sched:  `{"v":1,"kind":"agent.reply","orderId":"o-2","step":0,"attempt":1,"lockedBy":"s-1","outcome":"done","testSender":"AROAAGENT:payments"}`,
		agent:  `{"v":1,"kind":"agent.request","orderId":"o-3","step":0,"attempt":1}`,
	}
	for u, b := range bodies {
		res, err := q.Send(ctx, sas.SendParams{QueueURL: dlqs[u], Messages: []sas.OutboundMessage{{ID: "m", Body: b}}})
		require.NoError(t, err)
		require.Empty(t, res.Failed)
	}
	csrf := tokenRE.FindStringSubmatch(get(t, ts.URL+"/"))[1]
	redrive := func(name string, confirm bool) string {
		form := url.Values{"queue": {name}}
		if confirm {
			form.Set("confirm", "1")
		}
		resp, b := postAction(t, ts.URL, "redrive", csrf, form)
		if !confirm {
			return b
		}
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		job := resp.Header.Get("Location")
		var page string
		require.Eventually(t, func() bool {
			page = get(t, ts.URL+job)
			return strings.Contains(page, `data-finished="true"`)
		}, time.Minute, 10*time.Millisecond)
		require.Contains(t, page, "1 of 1 done, 0 failed")
		return page
	}
	require.Contains(t, redrive("intake", false), "as a redelivery of itself", "the dry run says where it goes")
	require.Contains(t, redrive("agent payments", false), "move back to "+agent)

	redrive("intake", true)
	redrive("scheduler", true)
	redrive("agent payments", true)

	moved, err := q.Receive(ctx, sas.ReceiveParams{QueueURL: control, Max: 10})
	require.NoError(t, err)
	require.Len(t, moved, 2)
	got := map[string]sas.Redrive{}
	for _, m := range moved {
		var rd sas.Redrive
		require.NoError(t, json.Unmarshal([]byte(m.Body), &rd))
		require.Equal(t, sas.KindRedrive, rd.Kind)
		require.NoError(t, rd.Check())
		got[rd.Queue] = rd
	}
	require.Equal(t, bodies[intake], got[sas.RedriveIntake].Body)
	require.Equal(t, "AROASHOP:web", got[sas.RedriveIntake].Sender)
	require.Equal(t, bodies[sched], got[sas.RedriveScheduler].Body)
	require.Equal(t, "AROAAGENT:payments", got[sas.RedriveScheduler].Sender)
	for _, u := range []string{intake, sched} {
		d, err := q.Depth(ctx, u)
		require.NoError(t, err)
		require.Zero(t, d.Visible, "nothing went back to %s itself", u)
	}
	back, err := q.Receive(ctx, sas.ReceiveParams{QueueURL: agent, Max: 10})
	require.NoError(t, err)
	require.Len(t, back, 1)
	require.Equal(t, bodies[agent], back[0].Body, "an agent's dead letter goes back as it is")
}

// postAction posts form, with the console's CSRF token, to an action of the
// console at base, following no redirect, and returns the response and its
// body.
func postAction(t *testing.T, base, action, csrf string, form url.Values) (*http.Response, string) {
	t.Helper()
	form.Set("csrf", csrf)
	req, _ := http.NewRequest(http.MethodPost, base+"/actions/"+action, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(withSecret(req))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}
