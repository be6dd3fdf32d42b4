package console_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net"
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

// memQueues is memqueue with no dead-letter queues.
type memQueues struct{ *memqueue.Queue }

func (memQueues) DeadLetterQueue(context.Context, string) (string, error) { return "", nil }

var t0 = clocktest.T0

// fast is a console on the in-memory store and queue, behind httptest.
func fast(t *testing.T, readOnly bool) (*httptest.Server, *memstore.Store) {
	t.Helper()
	ctx := context.Background()
	clock := clocktest.New(t0)
	q := memqueue.New(memqueue.Options{Clock: clock})
	control, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: "control"})
	require.NoError(t, err)
	st := memstore.New(memstore.Config{Shards: 2})
	app := &sasctl.App{Store: st, Queue: q, Clock: clock, ControlQueueURL: control.URL, Actor: "operator:test", Out: io.Discard}
	srv, err := console.New(console.Config{Store: st, Queues: memQueues{q}, App: app, Clock: clock, ReadOnly: readOnly,
		Agents: []string{"payments"}, QueueRefs: []console.QueueRef{{Name: "control", URL: control.URL}}, AccessToken: testSecret})
	require.NoError(t, err)
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	_, err = st.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-1", Workflow: "payment", Steps: []string{"charge"},
		Payload: []byte(`{"note":"</pre><script>alert(1)</script>"}`)}, Now: t0, PickupBy: t0.Add(time.Minute)})
	require.NoError(t, err)
	return ts, st
}

// testSecret is the fast console's per-launch secret.
const testSecret = "s3cret-of-this-launch"

// withSecret adds the console's secret to a request, as its cookie.
func withSecret(req *http.Request) *http.Request {
	req.AddCookie(&http.Cookie{Name: "sas-console", Value: testSecret})
	return req
}

func get(t *testing.T, u string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(withSecret(req))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
	return string(b)
}

var tokenRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func TestEveryPageEscapesAndEveryWriteIsChecked(t *testing.T) {
	ts, st := fast(t, false)
	for _, path := range []string{"/", "/orders", "/orders?workflow=payment", "/orders?state=Pending", "/orders?stuck=1", "/orders/o-1"} {
		body := get(t, ts.URL+path)
		require.NotContains(t, body, "<script>alert(1)", path)
	}
	page := get(t, ts.URL+"/orders/o-1")
	require.Contains(t, page, "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;")
	token := tokenRE.FindStringSubmatch(get(t, ts.URL+"/"))[1]

	post := func(origin string, form url.Values) int {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/actions/pause", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(withSecret(req))
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusForbidden, post("", url.Values{"agent": {"payments"}, "csrf": {token}}), "no Origin")
	require.Equal(t, http.StatusForbidden, post("http://evil.example", url.Values{"agent": {"payments"}, "csrf": {token}}), "another origin")
	wrong := "0" + token[1:]
	if wrong == token {
		wrong = "1" + token[1:]
	}
	require.Equal(t, http.StatusForbidden, post(ts.URL, url.Values{"agent": {"payments"}, "csrf": {wrong}}), "a wrong token")
	ps, err := st.AgentPauses(context.Background())
	require.NoError(t, err)
	require.False(t, ps.Paused("payments"))
	require.Equal(t, http.StatusSeeOther, post(ts.URL, url.Values{"agent": {"payments"}, "csrf": {token}}), "same origin, right token")
	ps, err = st.AgentPauses(context.Background())
	require.NoError(t, err)
	require.True(t, ps.Paused("payments"))
}

func TestReadOnlyRefusesEveryWrite(t *testing.T) {
	ts, st := fast(t, true)
	page := get(t, ts.URL+"/")
	require.NotContains(t, page, `action="/actions/`, "no buttons")
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/actions/pause", strings.NewReader("agent=payments"))
	req.Header.Set("Origin", ts.URL)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(withSecret(req))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	ps, err := st.AgentPauses(context.Background())
	require.NoError(t, err)
	require.False(t, ps.Paused("payments"))
}

func TestListenRefusesAnAddressThatIsNotLoopback(t *testing.T) {
	_, err := console.Listen("0.0.0.0:0", false)
	require.ErrorContains(t, err, "not loopback")
	l, err := console.Listen("127.0.0.1:0", false)
	require.NoError(t, err)
	l.Close()
	// -remote without TLS: refused, on any address.
	_, err = console.Listen("0.0.0.0:0", true)
	require.ErrorContains(t, err, "needs TLS")
	_, err = console.Listen("127.0.0.1:0", true)
	require.ErrorContains(t, err, "needs TLS")
}

// TestWithoutTheSecretNothing: a plain HTTP client without the console's
// per-launch secret gets 401 and no page, no asset and no action, whatever
// Origin and CSRF token it sends; the printed URL's ?token= is exchanged
// for an HttpOnly, SameSite=Strict cookie and leaves the URL.
func TestWithoutTheSecretNothing(t *testing.T) {
	ts, st := fast(t, false)
	plain := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	csrf := tokenRE.FindStringSubmatch(get(t, ts.URL+"/"))[1]
	do := func(req *http.Request) (int, string) {
		resp, err := plain.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/", "/orders", "/orders/o-1", "/orders?workflow=payment", "/jobs/1", "/static/console.css", "/?token=wrong", "/?token="} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		code, body := do(req)
		require.Equal(t, http.StatusUnauthorized, code, path)
		require.NotContains(t, body, "o-1", path)
		require.NotContains(t, body, csrf, path)
	}
	for name, set := range map[string]func(*http.Request){
		"no secret":                         func(*http.Request) {},
		"a wrong cookie":                    func(r *http.Request) { r.AddCookie(&http.Cookie{Name: "sas-console", Value: "guess"}) },
		"a wrong bearer":                    func(r *http.Request) { r.Header.Set("Authorization", "Bearer guess") },
		"the secret in the query of a POST": func(r *http.Request) { r.URL.RawQuery = "token=" + testSecret },
	} {
		form := url.Values{"agent": {"payments"}, "csrf": {csrf}}
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/actions/pause", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", ts.URL)
		set(req)
		code, _ := do(req)
		require.Equal(t, http.StatusUnauthorized, code, name)
	}
	ps, err := st.AgentPauses(context.Background())
	require.NoError(t, err)
	require.False(t, ps.Paused("payments"), "nothing without the secret paused the agent")

	// The printed URL: a cookie, and the same page without the token.
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/orders?workflow=payment&token="+testSecret, nil)
	resp, err := plain.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/orders?workflow=payment", resp.Header.Get("Location"))
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.Equal(t, "sas-console", c.Name)
	require.True(t, c.HttpOnly, "HttpOnly")
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	req, _ = http.NewRequest(http.MethodGet, ts.URL+"/orders/o-1", nil)
	req.AddCookie(c)
	code, body := do(req)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "o-1")
	// A script may send it as a bearer token instead.
	req, _ = http.NewRequest(http.MethodGet, ts.URL+"/orders/o-1", nil)
	req.Header.Set("Authorization", "Bearer "+testSecret)
	code, _ = do(req)
	require.Equal(t, http.StatusOK, code)
}

func TestServeRefusesAForeignHost(t *testing.T) {
	l, err := console.Listen("127.0.0.1:0", false)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := memstore.New(memstore.Config{})
	q := memqueue.New(memqueue.Options{})
	srv, err := console.New(console.Config{Store: st, Queues: memQueues{q}, App: &sasctl.App{Store: st, Queue: q, Out: io.Discard}})
	require.NoError(t, err)
	go func() { _ = console.Serve(ctx, l, srv) }()
	req, _ := http.NewRequest(http.MethodGet, srv.LoginURL(console.URL(l)), nil)
	req.Host = "rebound.example:80"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "a DNS-rebound name is refused")
	resp, err = http.Get(srv.LoginURL(console.URL(l))) // follows the redirect with the cookie
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a client without a cookie jar does not keep the secret")
	req, _ = http.NewRequest(http.MethodGet, console.URL(l), nil)
	req.Header.Set("Authorization", "Bearer "+srv.AccessToken())
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestHostLocalhostFromTheNetworkIsRefused: on 0.0.0.0, Host: localhost
// passes only from a loopback peer; a remote client must name one of the
// console's hosts.
func TestHostLocalhostFromTheNetworkIsRefused(t *testing.T) {
	st := memstore.New(memstore.Config{})
	q := memqueue.New(memqueue.Options{})
	srv, err := console.New(console.Config{Store: st, Queues: memQueues{q}, App: &sasctl.App{Store: st, Queue: q, Out: io.Discard},
		Hosts: []string{"ops.example"}})
	require.NoError(t, err)
	h := srv.HostChecked(&net.TCPAddr{IP: net.IPv4zero, Port: 8089})
	for _, tc := range []struct {
		host, peer string
		want       int
	}{
		{"localhost:8089", "192.0.2.7:50000", http.StatusMisdirectedRequest},
		{"127.0.0.1:8089", "192.0.2.7:50000", http.StatusMisdirectedRequest},
		{"0.0.0.0:8089", "192.0.2.7:50000", http.StatusMisdirectedRequest},
		{"localhost:8089", "127.0.0.1:50000", http.StatusUnauthorized}, // past the Host check: no secret
		{"ops.example:8089", "192.0.2.7:50000", http.StatusUnauthorized},
		{"ops.example", "192.0.2.7:50000", http.StatusUnauthorized},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host, req.RemoteAddr = tc.host, tc.peer
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		require.Equal(t, tc.want, w.Code, "Host %s from %s", tc.host, tc.peer)
	}
}

var rowRE = regexp.MustCompile(`<tr data-order="([^"]+)"`)
var nextRE = regexp.MustCompile(`<a href="(/orders\?[^"]+)" id="next">`)

// TestOrdersPageThroughTheIndex: every order once, newest first, 25 a page,
// the filter kept across pages.
func TestOrdersPageThroughTheIndex(t *testing.T) {
	ts, st := fast(t, false)
	ctx := context.Background()
	for i := range 30 {
		wf := "payment"
		if i%3 == 0 {
			wf = "order"
		}
		_, err := st.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: fmt.Sprintf("p-%02d", i), Workflow: wf, Steps: []string{"charge"}},
			Now: t0.Add(time.Duration(i+1) * time.Second), PickupBy: t0.Add(time.Hour)})
		require.NoError(t, err)
	}
	var seen []string
	next := "/orders?workflow=payment"
	for pages := 0; next != ""; pages++ {
		require.Less(t, pages, 5)
		body := get(t, ts.URL+strings.ReplaceAll(next, "&amp;", "&"))
		for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
			seen = append(seen, m[1])
		}
		next = ""
		if m := nextRE.FindStringSubmatch(body); m != nil {
			next = m[1]
		}
	}
	var want []string
	for i := 29; i >= 0; i-- {
		if i%3 != 0 {
			want = append(want, fmt.Sprintf("p-%02d", i))
		}
	}
	want = append(want, "o-1") // the fixture's, a payment too, oldest
	require.Equal(t, want, seen)
}

// The order page shows, for each step's attempt, the queue wait and the
// execution its agent reported (recorded with the outcome), in the step and
// in the history; an outcome without them (an older agent) shows "—", not
// 0, and so does an attempt still running.
func TestTheOrderPageShowsQueueWaitAndExecutionApart(t *testing.T) {
	ts, st := fast(t, false)
	ctx := context.Background()
	_, err := st.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-run", Workflow: "order", Steps: []string{"reserve", "charge", "ship"}},
		Now: t0, PickupBy: t0.Add(time.Minute)})
	require.NoError(t, err)
	claim := func(step, attempt int, at time.Duration) {
		_, err := st.Claim(ctx, sas.ClaimParams{Key: sas.StepKey{OrderID: "o-run", Step: step}, Attempt: attempt, Owner: "s", Now: t0.Add(at), CompleteBy: t0.Add(at + time.Minute)})
		require.NoError(t, err)
	}
	claim(0, 0, time.Second)
	_, err = st.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-run", Step: 0}, Owner: "s", Attempt: 1, Now: t0.Add(3 * time.Second),
		Run: sas.RunTiming{Queued: sas.MillisOf(1500 * time.Millisecond), Ran: sas.MillisOf(420 * time.Millisecond)}})
	require.NoError(t, err)
	claim(1, 0, 4*time.Second)
	_, err = st.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-run", Step: 1}, Owner: "s", Attempt: 1, Now: t0.Add(5 * time.Second)})
	require.NoError(t, err)
	claim(2, 0, 6*time.Second)

	page := get(t, ts.URL+"/orders/o-run")
	cells := func(class string) []string {
		var out []string
		for _, m := range regexp.MustCompile(`class="(?:num )?`+class+`">([^<]*)<`).FindAllStringSubmatch(page, -1) {
			out = append(out, m[1])
		}
		return out
	}
	// Steps first (reserve, charge, ship), then the history's outcomes,
	// newest first (charge's, reserve's).
	require.Equal(t, []string{"1.5s", "—", "—", "—", "1.5s"}, cells("queue-wait"))
	require.Equal(t, []string{"420ms", "—", "—", "—", "420ms"}, cells("execution"))
}

// The order page shows each step's result (escaped: a result is the
// service's text), marks a rejected step, and tells the rejection as the
// order's last status, never as a failure.
func TestTheOrderPageShowsResultsAndARejection(t *testing.T) {
	ts, st := fast(t, false)
	ctx := context.Background()
	_, err := st.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-rej", Workflow: "order", Steps: []string{"reserve", "charge", "ship"}},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(time.Minute)}})
	require.NoError(t, err)
	_, err = st.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-rej"}, Owner: "s", Attempt: 1, Now: t0.Add(time.Second),
		Result: []byte(`{"reservation":"R-7","note":"<script>x</script>"}`),
		Next:   &sas.ClaimParams{Key: sas.StepKey{OrderID: "o-rej", Step: 1}, Owner: "s", Now: t0.Add(time.Second), CompleteBy: t0.Add(time.Minute)}})
	require.NoError(t, err)
	_, err = st.Fail(ctx, sas.FailParams{Key: sas.StepKey{OrderID: "o-rej", Step: 1}, Owner: "s", Attempt: 1, Now: t0.Add(2 * time.Second),
		Reason: "card declined", Rejected: true})
	require.NoError(t, err)

	page := get(t, ts.URL+"/orders/o-rej")
	require.Contains(t, page, `id="order-state">Rejected<`)
	require.Contains(t, page, `&#34;reservation&#34;:&#34;R-7&#34;`)
	require.NotContains(t, page, "<script>x</script>")
	require.Contains(t, page, "a business outcome: no alert")
	require.Contains(t, page, "<td>rejected</td><td>charge</td>")
	require.NotContains(t, page, "<td>failed</td>")
}

// TestEveryOrderIDHasAPage: ids the router's path cleaning would change
// ("." and ".." are valid order ids, and so is one with a slash) are
// linked from the list, and each link opens that order's page.
func TestEveryOrderIDHasAPage(t *testing.T) {
	ts, st := fast(t, false)
	ctx := context.Background()
	ids := []string{".", "..", "a/b", "../o-1", "x y?#%"}
	for i, id := range ids {
		_, err := st.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: id, Workflow: "payment", Steps: []string{"charge"}},
			Now: t0.Add(time.Duration(i+1) * time.Second), PickupBy: t0.Add(time.Hour)})
		require.NoError(t, err)
	}
	list := get(t, ts.URL+"/orders")
	for _, id := range ids {
		esc := regexp.QuoteMeta(html.EscapeString(id))
		m := regexp.MustCompile(`<tr data-order="` + esc + `"><td><a class="mono" href="([^"]+)">`).FindStringSubmatch(list)
		require.NotNil(t, m, "no row for %q", id)
		href := html.UnescapeString(m[1])
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, _ := http.NewRequest(http.MethodGet, ts.URL+href, nil)
		resp, err := c.Do(withSecret(req))
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%q links to %s", id, href)
		require.Contains(t, string(b), "<title>Order "+html.EscapeString(id), "%q's link %s opens its page", id, href)
	}
}

// Who compensated an order, and why, shows in its history (the undo's
// claim records them: sas.ClaimParams.RequestedBy).
func TestTheOrderPageShowsWhoCompensated(t *testing.T) {
	ts, st := fast(t, false)
	ctx := context.Background()
	k := sas.StepKey{OrderID: "o-1", Step: 0}
	_, err := st.Claim(ctx, sas.ClaimParams{Key: k, Owner: "s", Now: t0, CompleteBy: t0.Add(time.Minute)})
	require.NoError(t, err)
	_, err = st.Complete(ctx, sas.CompleteParams{Key: k, Owner: "s", Attempt: 1, Now: t0.Add(time.Second)})
	require.NoError(t, err)
	_, err = st.Claim(ctx, sas.ClaimParams{Key: k, From: sas.Processed, Attempt: 1, Owner: "s", Now: t0.Add(2 * time.Second),
		CompleteBy: t0.Add(time.Minute), RequestedBy: "sender:AROAOPERATOR:alice", Why: "customer <cancelled>"})
	require.NoError(t, err)
	page := get(t, ts.URL+"/orders/o-1")
	require.Contains(t, page, `<td class="reason">compensation claimed, requested by sender:AROAOPERATOR:alice: customer &lt;cancelled&gt;</td>`)
}

// TestTheOrderPageShowsEachBranch: an order with branches lists every step
// with its state and the steps it follows.
func TestTheOrderPageShowsEachBranch(t *testing.T) {
	ts, st := fast(t, false)
	ctx := context.Background()
	_, err := st.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-br", Workflow: "trip", Steps: []string{"quote", "flight", "hotel", "pay"},
		After: [][]int{{}, {0}, {0}, {1, 2}}},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", CompleteBy: t0.Add(time.Minute)}})
	require.NoError(t, err)
	next := func(step int) sas.ClaimParams {
		return sas.ClaimParams{Key: sas.StepKey{OrderID: "o-br", Step: step}, Owner: "s", Now: t0.Add(time.Second), CompleteBy: t0.Add(time.Minute)}
	}
	n1 := next(1)
	_, err = st.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-br"}, Owner: "s", Attempt: 1, Now: t0.Add(time.Second),
		Next: &n1, More: []sas.ClaimParams{next(2)}})
	require.NoError(t, err)

	page := get(t, ts.URL+"/orders/o-br")
	require.Contains(t, page, `id="order-state">Processing<`)
	require.Contains(t, page, `<b>1 · flight</b> <span class="pill st-processing">Processing</span> <span class="follows">after quote</span>`)
	require.Contains(t, page, `<b>2 · hotel</b> <span class="pill st-processing">Processing</span> <span class="follows">after quote</span>`)
	require.Contains(t, page, `<span class="follows">after flight, hotel</span>`)
}

// A skipped step is shown as such on its order's page, with why (its
// condition), and the order as Processed (issue 27 §3).
func TestTheOrderPageShowsASkippedStep(t *testing.T) {
	ts, st := fast(t, false)
	ctx := context.Background()
	_, err := st.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-skip", Workflow: "trip", Steps: []string{"flight", "car"}},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", Now: t0, CompleteBy: t0.Add(time.Minute)}})
	require.NoError(t, err)
	_, err = st.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: "o-skip", Step: 0}, Owner: "s", Attempt: 1, Now: t0.Add(time.Second),
		Skip: []sas.Skip{{Step: 1, Reason: "skipped: its condition payload.needsCar is false"}}})
	require.NoError(t, err)
	page := get(t, ts.URL+"/orders/o-skip")
	require.Contains(t, page, `id="order-state">Processed</span>`)
	require.Contains(t, page, `<span class="pill st-skipped">Skipped</span>`)
	require.Contains(t, page, `<p class="skip-reason">skipped: its condition payload.needsCar is false`)
}

// An order whose first step has nothing to undo and whose failed second
// step was undone reads Compensated on its page: the console reads the
// order's stored definition, which says the first step has no undo (read
// from the records alone, it was Processing for good).
func TestTheOrderPageKnowsAStepWithoutAnUndo(t *testing.T) {
	ts, st := fast(t, false)
	ctx := context.Background()
	def := sas.Workflow{Name: "notify-pay", Steps: []sas.StepDef{
		{Name: "notify", Agent: "mail", Action: "send", Timeout: time.Minute},
		{Name: "charge", Agent: "payments", Action: "charge", Undo: "refund", Timeout: time.Minute},
	}}
	require.NoError(t, st.PutDefinition(ctx, def))
	id := "o-noundo"
	_, err := st.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: id, Workflow: def.Name, Version: def.Version(), Steps: def.StepNames()},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", Now: t0, CompleteBy: t0.Add(time.Minute)}})
	require.NoError(t, err)
	k1 := sas.StepKey{OrderID: id, Step: 1}
	_, err = st.Complete(ctx, sas.CompleteParams{Key: sas.StepKey{OrderID: id}, Owner: "s", Attempt: 1, Now: t0.Add(time.Second),
		Next: &sas.ClaimParams{Key: k1, Owner: "s", Now: t0.Add(time.Second), CompleteBy: t0.Add(time.Minute)}})
	require.NoError(t, err)
	_, err = st.Fail(ctx, sas.FailParams{Key: k1, Owner: "s", Attempt: 1, Now: t0.Add(2 * time.Second), Reason: "card declined"})
	require.NoError(t, err)
	_, err = st.Claim(ctx, sas.ClaimParams{Key: k1, From: sas.Error, Attempt: 1, Owner: "s", Now: t0.Add(3 * time.Second), CompleteBy: t0.Add(time.Minute)})
	require.NoError(t, err)
	_, err = st.Complete(ctx, sas.CompleteParams{Key: k1, Owner: "s", Attempt: 2, Now: t0.Add(4 * time.Second), Compensation: true})
	require.NoError(t, err)

	page := get(t, ts.URL+"/orders/"+id)
	require.Contains(t, page, `id="order-state">Compensated<`)
}

// A fan-out step's page shows its elements done of all, how many are in
// each state, and each element started: its item, its result, its key.
func TestTheOrderPageShowsAFanOutsElements(t *testing.T) {
	ts, st := fast(t, false)
	ctx := context.Background()
	k := sas.StepKey{OrderID: "o-fan"}
	_, err := st.Submit(ctx, sas.SubmitParams{Order: sas.Order{OrderID: "o-fan", Workflow: "stock", Steps: []string{"reserve"}},
		Now: t0, PickupBy: t0.Add(time.Minute), Claim: &sas.ClaimParams{Owner: "s", Now: t0, CompleteBy: t0.Add(time.Minute)}})
	require.NoError(t, err)
	claim := func(i int) sas.ElementClaim {
		return sas.ElementClaim{Index: i, Item: []byte(fmt.Sprintf(`{"sku":"s-%d"}`, i)), CompleteBy: t0.Add(time.Minute)}
	}
	_, err = st.StartFanOut(ctx, sas.StartFanOutParams{Key: k, Owner: "s", Attempt: 1, Now: t0, Count: 3,
		Claims: []sas.ElementClaim{claim(0), claim(1)}, StepName: "reserve"})
	require.NoError(t, err)
	next := claim(2)
	_, err = st.CompleteElement(ctx, sas.CompleteElementParams{Key: sas.StepKey{OrderID: "o-fan", Step: sas.ElementStep(0, 0)}, Owner: "s",
		Attempt: 1, Now: t0.Add(time.Second), Result: []byte(`{"hold":"<H-0>"}`), Next: &next, StepName: "reserve"})
	require.NoError(t, err)

	page := get(t, ts.URL+"/orders/o-fan")
	require.Contains(t, page, `<span class="pill fan-out" title="a fan-out: its elements done, of all">1/3 elements done</span>`)
	require.Contains(t, page, `<p class="element-states">elements started: Processing 2, Processed 1</p>`)
	require.Contains(t, page, `<tr data-element="0"><td>0</td><td><span class="pill st-processed">Processed</span></td><td>1</td><td class="mono">{&#34;sku&#34;:&#34;s-0&#34;}</td><td class="mono">{&#34;hold&#34;:&#34;&lt;H-0&gt;&#34;}</td><td class="mono">o-fan:0:i0</td></tr>`)
	require.Contains(t, page, `<tr data-element="2"><td>2</td><td><span class="pill st-processing">Processing</span>`)
}
