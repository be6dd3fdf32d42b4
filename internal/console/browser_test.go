package console_test

import (
	"github.com/sas-go/sas/internal/dev/poller"

	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/console"
	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sasctl"
	"github.com/sas-go/sas/internal/testkit/emulator"
)

// system is a running local system (localrun on the emulators) with the
// console in front of it.
type system struct {
	*localrun.System
	url    string
	login  string // url with the console's secret, as sasctl console prints it
	secret string
}

func startSystem(t *testing.T) *system {
	t.Helper()
	emulator.Require(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sys, err := localrun.Start(ctx, localrun.Options{
		Instances: 1, SupervisorEvery: time.Second, StepTimeout: 5 * time.Second, Workflows: consoleWorkflows(t),
		Faults: remotesim.Faults{Scripts: []remotesim.Script{
			// comp-1 fails at its last step: its first two are undone.
			{OrderID: "comp-1", Path: "/shipments", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultPermanent}}},
			// err-1 and err-2 are refused once: Error, and a resubmit succeeds.
			{OrderID: "err-1", Path: "/payments", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultPermanent, Times: 1}}},
			{OrderID: "err-2", Path: "/payments", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultPermanent, Times: 1}}},
			// err-3 fails in the other workflow: not selected by the filter.
			{OrderID: "err-3", Path: "/payments", Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultPermanent, Times: 1}}},
		}},
	})
	require.NoError(t, err)
	t.Cleanup(sys.Close)
	go sys.Run(ctx)

	app := &sasctl.App{Store: sys.Store, Queue: sys.Queue, IntakeQueueURL: sys.Config.IntakeQueueURL, ControlQueueURL: sys.Config.ControlQueueURL,
		PickupTimeout: sys.Config.PickupTimeout, Actor: "operator:browser-test", Out: io.Discard}
	srv, err := console.New(console.Config{
		Store: sys.Store, Queues: sys.Queue, App: app, QueueRefs: console.QueueRefsOf(sys.Config, sys.Registry),
		Agents: console.AgentsOf(sys.Registry, sys.Config), StepAgents: sys.Registry.StepAgents(), Registry: sys.Registry, Workflows: []string{registry.Order, registry.Payment, notify, expense, split, lines},
		Refresh: time.Second,
	})
	require.NoError(t, err)
	l, err := console.Listen("127.0.0.1:0", false)
	require.NoError(t, err)
	go func() { _ = console.Serve(ctx, l, srv) }()
	return &system{System: sys, url: strings.TrimSuffix(console.URL(l), "/"), login: srv.LoginURL(console.URL(l)), secret: srv.AccessToken()}
}

// split is the order workflow with its first two steps as branches.
const split = "split"

// lines holds each line of an order, two at a time: a fan-out.
const lines = "lines"

// expense is a workflow whose first step waits for a person (the Waiting
// page's approvals).
const expense = "expense"

// notify is a second single-step workflow, a copy of payment, so that a
// filter by workflow has an order in Error to leave out.
const notify = "notify"

// consoleWorkflows are the reference workflows with payment's step
// without an undo (and named pay), and notify beside it: a refused step with an undo is
// undone (docs/protocol.md, "A refusal is not proof of no effect"), so only
// a step without one leaves its order in Error for an operator to resubmit.
func consoleWorkflows(t *testing.T) sas.Registry {
	t.Helper()
	reg, err := registry.Default(5 * time.Second)
	require.NoError(t, err)
	pay := reg[registry.Payment]
	pay.Steps = slices.Clone(pay.Steps)
	for i := range pay.Steps {
		// Its own step name: agents route by step name, and the order
		// workflow's charge keeps its undo.
		pay.Steps[i].Name, pay.Steps[i].Undo = "pay", ""
	}
	other := pay
	other.Name = notify
	// expense waits for a person's approval (a callback step), then pays.
	exp := sas.Workflow{Name: expense, Steps: []sas.StepDef{
		{Name: "approve", Callback: &sas.Callback{Timeout: time.Hour}},
		pay.Steps[0],
	}}
	// split runs the order workflow's reserve and charge at once, then
	// ships after both (branches in parallel).
	ord := reg[registry.Order]
	split := sas.Workflow{Name: split, Steps: slices.Clone(ord.Steps)}
	split.Steps[1].After = []int{}
	split.Steps[2].After = []int{0, 1}
	// lines holds each of the payload's items, two at a time (a fan-out;
	// its own step name, as agents route by step name).
	fan := sas.Workflow{Name: lines, Steps: []sas.StepDef{{Name: "hold", Agent: registry.PaymentsAgent, Action: "POST /reservations",
		Timeout: 5 * time.Second, ForEach: &sas.ForEach{Items: "payload.items", Concurrency: 2}}}}
	out, err := sas.NewRegistry(reg[registry.Order], pay, other, exp, split, fan)
	require.NoError(t, err)
	return out
}

func (s *system) submit(t *testing.T, id, wf, payload string) {
	t.Helper()
	in := sas.Intake{V: sas.MessageVersion, OrderID: id, Workflow: wf}
	if payload != "" {
		in.Payload = json.RawMessage(payload)
	}
	require.NoError(t, s.Submit(context.Background(), in))
}

// settle waits until the orders are in the given state (outcomes: the
// bound is generous).
func (s *system) settle(t *testing.T, state sas.ProcessState, ids ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, id := range ids {
		for {
			v, err := s.Store.GetOrder(ctx, id)
			if err == nil && v.State() == state && v.Settled() {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("order %s never reached %s (now %s, %v)", id, state, v.State(), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func TestConsoleInABrowser(t *testing.T) {
	s := startSystem(t)
	b := newBrowser(t)
	xss := `<script>alert(1)</script>`
	s.submit(t, "ok-1", registry.Order, `{"amount":42}`)
	s.submit(t, "ok-2", registry.Payment, `{"amount":7}`)
	s.submit(t, "xss-1", registry.Payment, fmt.Sprintf(`{"note":%q,"img":"<img src=x onerror=alert(2)>"}`, xss))
	s.submit(t, "comp-1", registry.Order, `{"amount":99}`)
	s.submit(t, "err-1", registry.Payment, `{"amount":1}`)
	s.submit(t, "err-2", registry.Payment, `{"amount":2}`)
	s.submit(t, "err-3", notify, `{"amount":3}`)
	s.settle(t, sas.Processed, "ok-1", "ok-2", "xss-1")
	s.settle(t, sas.Compensated, "comp-1")
	s.settle(t, sas.Error, "err-1", "err-2", "err-3")

	t.Run("overview", func(t *testing.T) {
		// The URL the console prints: its secret becomes the browser's
		// cookie, and every page after this one is opened without it.
		b.Run(t, chromedp.Navigate(s.login), chromedp.WaitVisible("#by-workflow", chromedp.ByQuery))
		var at string
		b.Run(t, chromedp.Evaluate(`location.href`, &at))
		require.Equal(t, s.url+"/", at, "the secret left the address bar")
		b.WaitText(t, "#by-workflow", "payment")
		b.WaitText(t, "#failures", "err-1")
		b.Shot(t, "overview")
	})

	t.Run("the list shows the orders", func(t *testing.T) {
		b.Run(t, chromedp.Navigate(s.url+"/orders"), chromedp.WaitVisible("#orders", chromedp.ByQuery))
		var ids []string
		b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll('#orders tr[data-order]')].map(r => r.dataset.order)`, &ids))
		for _, id := range []string{"ok-1", "ok-2", "xss-1", "comp-1", "err-1", "err-2", "err-3"} {
			require.Contains(t, ids, id)
		}
		b.Shot(t, "orders")
	})

	t.Run("a processed order shows each step's queue wait and execution", func(t *testing.T) {
		b.Run(t, chromedp.Navigate(s.url+"/orders/ok-1"), chromedp.WaitVisible("#steps", chromedp.ByQuery))
		var waits, runs, history []string
		b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll('#steps li.step .queue-wait')].map(e => e.textContent.trim())`, &waits),
			chromedp.Evaluate(`[...document.querySelectorAll('#steps li.step .execution')].map(e => e.textContent.trim())`, &runs),
			chromedp.Evaluate(`[...document.querySelectorAll('#history td.execution')].map(e => e.textContent.trim())`, &history))
		require.Len(t, waits, 3, "reserve, charge, ship")
		require.Len(t, runs, 3)
		for i := range waits {
			// Reported by the agent (the local run's pollers give it SQS's
			// SentTimestamp): a duration, not "—".
			require.Regexp(t, `^[0-9.]+(ms|s|m)`, waits[i], "step %d's queue wait", i)
			require.Regexp(t, `^[0-9.]+(ms|s|m)`, runs[i], "step %d's execution", i)
		}
		require.Len(t, history, 3, "one outcome per step in the history")
		b.Shot(t, "order-processed")
	})

	t.Run("a compensated order shows its undo chain in order", func(t *testing.T) {
		b.Run(t, chromedp.Navigate(s.url+"/orders/comp-1"), chromedp.WaitVisible("#undos", chromedp.ByQuery))
		var chain []string
		var state string
		b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll('#undos li[data-step]')].map(li => li.querySelector('b').textContent)`, &chain),
			chromedp.Text("#order-state", &state, chromedp.ByQuery))
		require.Equal(t, []string{"1 · charge", "0 · reserve"}, chain, "newest step first: the order the undos ran")
		require.Equal(t, "Compensated", state)
		b.Shot(t, "order")
	})

	t.Run("an order with branches shows which step follows which", func(t *testing.T) {
		s.submit(t, "split-1", split, `{"amount":12}`)
		s.settle(t, sas.Processed, "split-1")
		b.Run(t, chromedp.Navigate(s.url+"/orders/split-1"), chromedp.WaitVisible("#steps", chromedp.ByQuery))
		var heads []string
		b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll('#steps li.step .head')].map(e => e.textContent.replace(/\s+/g, ' ').trim())`, &heads))
		require.Len(t, heads, 3)
		require.NotContains(t, heads[0], "after", "reserve starts with the order")
		require.NotContains(t, heads[1], "after", "charge starts with the order too: a branch")
		require.Contains(t, heads[2], "after reserve, charge", "ship joins the two branches")
		v, err := s.Store.GetOrder(context.Background(), "split-1")
		require.NoError(t, err)
		at := func(i int, to sas.ProcessState) time.Time {
			for _, h := range v.Steps[i].History {
				if h.To == to {
					return h.At
				}
			}
			t.Fatalf("step %d never reached %s", i, to)
			return time.Time{}
		}
		require.True(t, at(1, sas.Processing).Before(at(0, sas.Processed)), "charge was claimed before reserve finished: the branches ran at once")
		b.Shot(t, "order-branches")
	})

	t.Run("a fan-out shows its elements done of all and each element's state", func(t *testing.T) {
		s.submit(t, "lines-1", lines, `{"items":[{"sku":"a"},{"sku":"b"},{"sku":"c"},{"sku":"d"},{"sku":"e"}]}`)
		s.settle(t, sas.Processed, "lines-1")
		b.Run(t, chromedp.Navigate(s.url+"/orders/lines-1"), chromedp.WaitVisible("#steps .fan-out-elements", chromedp.ByQuery))
		var head, states string
		var rows []string
		b.Run(t, chromedp.Text("#steps li.step .head", &head, chromedp.ByQuery),
			chromedp.Text("#steps .element-states", &states, chromedp.ByQuery),
			chromedp.Evaluate(`[...document.querySelectorAll('#steps table.elements tbody tr')].map(e => [...e.cells].map(c => c.textContent.trim()).join(' '))`, &rows))
		require.Contains(t, head, "5/5 elements done")
		require.Equal(t, "elements started: Processed 5", strings.TrimSpace(states))
		require.Len(t, rows, 5)
		for i, r := range rows {
			require.Contains(t, r, fmt.Sprintf(`%d Processed 1 {"sku":"%c"}`, i, 'a'+i))
			require.Contains(t, r, fmt.Sprintf(`"idempotencyKey":"lines-1:0:i%d"`, i), "the remote saw the element's own key")
		}
		b.Shot(t, "order-fan-out")
	})

	t.Run("a payload holding a script renders as text and runs nothing", func(t *testing.T) {
		b.Run(t, chromedp.Navigate(s.url+"/orders/xss-1"), chromedp.WaitVisible("#payload", chromedp.ByQuery))
		var payload string
		var scripts, imgs int
		b.Run(t, chromedp.Text("#payload", &payload, chromedp.ByQuery),
			chromedp.Evaluate(`document.scripts.length`, &scripts),
			chromedp.Evaluate(`document.images.length`, &imgs))
		require.Contains(t, payload, xss)
		require.Contains(t, payload, "<img src=x onerror=alert(2)>")
		require.Equal(t, 1, scripts, "only the console's own script")
		require.Zero(t, imgs)
		time.Sleep(time.Second) // a dialog would open at once; give a live refresh a chance too
		b.NoDialog(t)
		b.Shot(t, "order-xss")
	})

	t.Run("a bulk resubmit's dry run lists exactly the filter's orders and the real one moves them", func(t *testing.T) {
		b.Run(t, chromedp.Navigate(s.url+"/orders?state=Error&workflow=payment"), chromedp.WaitVisible("#bulk-resubmit", chromedp.ByQuery))
		b.Run(t, submitForm("#bulk-resubmit"), chromedp.WaitVisible("#plan", chromedp.ByQuery))
		var acting []string
		b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll('#plan tr.acting')].map(r => r.dataset.order)`, &acting))
		slices.Sort(acting)
		require.Equal(t, []string{"err-1", "err-2"}, acting, "the payment orders in Error, not err-3 (notify workflow)")
		b.Shot(t, "resubmit-dry-run")
		for _, id := range []string{"err-1", "err-2"} {
			v, err := s.Store.GetOrder(context.Background(), id)
			require.NoError(t, err)
			require.Equal(t, sas.Error, v.State(), "a dry run changes nothing")
		}

		b.Run(t, submitForm("#confirm"), chromedp.WaitVisible("#job-status", chromedp.ByQuery))
		b.WaitText(t, "#job-status", "finished")
		status := b.WaitText(t, "#job-status", "2 of 2 done, 0 failed")
		require.Contains(t, status, "finished")
		b.Shot(t, "resubmit-job")
		s.settle(t, sas.Processed, "err-1", "err-2")
		v, err := s.Store.GetOrder(context.Background(), "err-3")
		require.NoError(t, err)
		require.Equal(t, sas.Error, v.State(), "outside the filter: untouched")
	})

	t.Run("a cross-site POST is refused", func(t *testing.T) {
		// Another origin (another port on the same host) posts a form to the
		// console, as a malicious page would, with a guessed token.
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/actions/pause">
<input name="agent" value="payments"><input name="csrf" value="guess"></form>
<script>document.getElementById('f').submit()</script>`, s.url)
		}))
		defer evil.Close()
		var body string
		b.Run(t, chromedp.Navigate(evil.URL), chromedp.WaitReady("body", chromedp.ByQuery))
		body = b.WaitText(t, "body", "refused")
		require.Contains(t, body, "refused")
		all, err := s.Store.AgentPauses(context.Background())
		require.NoError(t, err)
		require.False(t, all.Paused(registry.PaymentsAgent), "the cross-site POST paused nothing")

		// Without a browser, holding the console's secret: no Origin, a
		// foreign Origin, or no CSRF token: all refused.
		for name, req := range map[string]func() *http.Request{
			"no origin": func() *http.Request { return post(s.url+"/actions/pause", "", url.Values{"agent": {"payments"}}) },
			"foreign":   func() *http.Request { return post(s.url+"/actions/pause", evil.URL, url.Values{"agent": {"payments"}}) },
			"no token":  func() *http.Request { return post(s.url+"/actions/pause", s.url, url.Values{"agent": {"payments"}}) },
		} {
			r := req()
			r.Header.Set("Authorization", "Bearer "+s.secret)
			resp, err := http.DefaultClient.Do(r)
			require.NoError(t, err, name)
			resp.Body.Close()
			require.Equal(t, http.StatusForbidden, resp.StatusCode, name)
		}
		// Without the secret: nothing at all.
		resp, err := http.DefaultClient.Do(post(s.url+"/actions/pause", s.url, url.Values{"agent": {"payments"}}))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no secret")
	})

	t.Run("a person approves one waiting step and rejects another", func(t *testing.T) {
		ctx := context.Background()
		s.submit(t, "exp-1", expense, `{"amount":120,"by":"ana"}`)
		s.submit(t, "exp-2", expense, `{"amount":9000,"by":"bo"}`)
		for _, id := range []string{"exp-1", "exp-2"} {
			s.waitStep(t, id, 0, sas.Processing)
		}
		b.Run(t, chromedp.Navigate(s.url+"/waiting"), chromedp.WaitVisible("#waiting", chromedp.ByQuery))
		b.WaitText(t, "#waiting", "exp-2")
		var listed []string
		b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll('#waiting tr[data-order]')].map(r => r.dataset.order)`, &listed))
		slices.Sort(listed)
		require.Equal(t, []string{"exp-1", "exp-2"}, listed, "the two callback steps, and no agent's step in flight")
		b.Shot(t, "waiting")

		// Approve exp-1 with a result: a confirmation first, then the job.
		b.Run(t, submitForm(`#waiting tr[data-order="exp-1"] form.approve`), chromedp.WaitVisible("#confirm", chromedp.ByQuery))
		v, err := s.Store.GetOrder(ctx, "exp-1")
		require.NoError(t, err)
		require.Equal(t, sas.Processing, v.Steps[0].ProcessState, "the confirmation page changes nothing")
		b.Run(t, chromedp.SetValue("#result", `{"approvedBy":"ana's manager"}`, chromedp.ByQuery))
		b.Shot(t, "approve-confirm")
		b.Run(t, submitForm("#confirm"), chromedp.WaitVisible("#job-status", chromedp.ByQuery))
		b.WaitText(t, "#job-status", "1 of 1 done, 0 failed")
		s.settle(t, sas.Processed, "exp-1")
		v, err = s.Store.GetOrder(ctx, "exp-1")
		require.NoError(t, err)
		require.JSONEq(t, `{"approvedBy":"ana's manager"}`, string(v.Steps[0].Result), "the approval's result is the step's")
		h := v.Steps[0].History
		require.Contains(t, h[len(h)-1].Reason, "(says operator:browser-test)", "the history names the approver")

		// Reject exp-2: a reason is asked for; the order ends Rejected.
		b.Run(t, chromedp.Navigate(s.url+"/waiting"), chromedp.WaitVisible(`#waiting tr[data-order="exp-2"] form.reject`, chromedp.ByQuery))
		b.Run(t, submitForm(`#waiting tr[data-order="exp-2"] form.reject`), chromedp.WaitVisible("#reason", chromedp.ByQuery))
		b.Run(t, chromedp.SetValue("#reason", "over the travel budget", chromedp.ByQuery))
		b.Run(t, submitForm("#confirm"), chromedp.WaitVisible("#job-status", chromedp.ByQuery))
		b.WaitText(t, "#job-status", "1 of 1 done, 0 failed")
		s.settle(t, sas.Rejected, "exp-2")
		v, err = s.Store.GetOrder(ctx, "exp-2")
		require.NoError(t, err)
		require.Contains(t, v.Steps[0].LastError, "over the travel budget")
		require.Contains(t, v.Steps[0].LastError, "operator:browser-test", "the rejection names who rejected it")
		require.Equal(t, sas.Pending, v.Steps[1].ProcessState, "the payment never ran")

		// Nothing waits now; a confirmation page opened for a step that no
		// longer waits says so, and sends nothing.
		b.Run(t, chromedp.Navigate(s.url+"/waiting"), chromedp.WaitVisible("#waiting", chromedp.ByQuery))
		b.WaitText(t, "#waiting", "nothing waits for people")
		b.Shot(t, "waiting-empty")
		r := v.Steps[0]
		b.Run(t, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible("#agent-pauses form", chromedp.ByQuery)) // a page with the CSRF token
		b.Run(t, chromedp.Evaluate(fmt.Sprintf(`(() => { const f = document.createElement('form'); f.method = 'post'; f.action = '/actions/approve';
			for (const [k, v] of Object.entries({csrf: document.querySelector('input[name=csrf]')?.value || '', order: 'exp-2', step: '0', attempt: '%d', holder: 'gone'})) {
				const i = document.createElement('input'); i.type = 'hidden'; i.name = k; i.value = v; f.appendChild(i) }
			document.body.appendChild(f); f.requestSubmit() })()`, r.Attempt), nil))
		b.WaitText(t, "#not-waiting", "no longer waits")
	})

	t.Run("pausing an agent shows its requests waiting", func(t *testing.T) {
		b.Run(t, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible(`#agent-pauses tr[data-agent="payments"] form`, chromedp.ByQuery))
		b.Run(t, submitForm(`#agent-pauses tr[data-agent="payments"] form`))
		b.WaitText(t, `#agent-pauses tr[data-agent="payments"]`, "paused")
		s.waitPollersPaused(t)
		s.submit(t, "paused-1", registry.Payment, `{"amount":5}`)
		s.submit(t, "paused-2", registry.Order, `{"amount":6}`)
		b.WaitText(t, "#queues", "paused")
		// The requests wait in the agent queue: visible, not consumed.
		b.Run(t, chromedp.Navigate(s.url+"/orders/paused-1"), chromedp.WaitVisible("#steps", chromedp.ByQuery))
		b.WaitText(t, "#order-state", "Processing")
		b.WaitText(t, "#steps", "agent payments paused: waiting")
		b.Run(t, chromedp.Navigate(s.url+"/"), chromedp.WaitVisible("#queues", chromedp.ByQuery))
		var visible int
		deadline := time.Now().Add(time.Minute)
		for visible < 2 && time.Now().Before(deadline) {
			b.Run(t, chromedp.Evaluate(`[...document.querySelectorAll('#queues tr.paused td.num:nth-child(2)')].reduce((n, td) => n + parseInt(td.textContent, 10), 0)`, &visible))
			time.Sleep(500 * time.Millisecond)
		}
		require.GreaterOrEqual(t, visible, 2, "both orders' requests wait in the paused agent's queue")
		b.Shot(t, "overview-paused")

		b.Run(t, submitForm(`#agent-pauses tr[data-agent="payments"] form`))
		b.WaitText(t, `#agent-pauses tr[data-agent="payments"]`, "running")
		s.settle(t, sas.Processed, "paused-1", "paused-2")
	})
}

// waitStep waits until step i of the order is in the given state.
func (s *system) waitStep(t *testing.T, id string, i int, state sas.ProcessState) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		v, err := s.Store.GetOrder(context.Background(), id)
		if err == nil && len(v.Steps) > i && v.Steps[i].ProcessState == state {
			return
		}
		require.True(t, time.Now().Before(deadline), "step %d of order %s never reached %s (%v)", i, id, state, err)
		time.Sleep(200 * time.Millisecond)
	}
}

// waitPollersPaused waits until every agent poller has skipped a poll for
// the pause: from then on none receives (a receive already in progress
// when the pause was written could still take a request).
func (s *system) waitPollersPaused(t *testing.T) {
	t.Helper()
	base := map[*poller.Poller]int{}
	for _, p := range s.Pollers {
		base[p] = p.Stats().Paused
	}
	deadline := time.Now().Add(time.Minute)
	for _, p := range s.Pollers {
		if !strings.HasPrefix(p.Name, "agent-") {
			continue
		}
		for p.Stats().Paused <= base[p] {
			require.True(t, time.Now().Before(deadline), "poller %s never paused", p.Name)
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func post(u, origin string, form url.Values) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return req
}
