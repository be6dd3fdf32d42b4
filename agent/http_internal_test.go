package agent

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/sas"
)

// The body must be byte-identical for the same order step whatever the
// attempt, or an idempotent service answers 422 (key reused with another
// body) on a re-drive.
func TestRequestBodyIsStablePerOrderStep(t *testing.T) {
	t.Parallel()
	base := Request{OrderID: "o-1", StepIndex: 1, Step: "charge", Attempt: 1,
		Deadline: time.Unix(100, 0), Payload: json.RawMessage(`{"currency":"EUR","amount":1250}`)}
	want := `{"amount":1250,"currency":"EUR","orderId":"o-1","step":"charge"}`

	b, err := requestBody(base)
	require.NoError(t, err)
	require.Equal(t, want, string(b))

	other := base
	other.Attempt, other.Deadline, other.Priority = 3, time.Unix(999, 0), 9
	other.Payload = json.RawMessage("{ \"amount\" : 1250,\n \"currency\":\"EUR\" }")
	b, err = requestBody(other)
	require.NoError(t, err)
	require.Equal(t, want, string(b), "attempt, deadline, priority and spacing do not change the body")
}

func TestRequestBodyAgentFieldsWin(t *testing.T) {
	t.Parallel()
	b, err := requestBody(Request{OrderID: "o-1", Step: "charge",
		Payload: json.RawMessage(`{"orderId":"someone-else","step":7,"note":{"b":1,"a":2}}`)})
	require.NoError(t, err)
	require.Equal(t, `{"note":{"b":1,"a":2},"orderId":"o-1","step":"charge"}`, string(b))

	for _, p := range []string{``, `null`, ` null `} {
		b, err := requestBody(Request{OrderID: "o-1", Step: "charge", Payload: json.RawMessage(p)})
		require.NoError(t, err, p)
		require.Equal(t, `{"orderId":"o-1","step":"charge"}`, string(b), p)
	}
	for _, p := range []string{`[1]`, `"x"`, `{"a":`} {
		_, err := requestBody(Request{OrderID: "o-1", Step: "charge", Payload: json.RawMessage(p)})
		require.Error(t, err, p)
	}
}

func TestParseAction(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]endpointAction{
		"POST /payments":              {"POST", "/payments"},
		"  PUT   /a/b?x=1 ":           {"PUT", "/a/b?x=1"},
		"POST /reservations/cancel":   {"POST", "/reservations/cancel"},
		"DELETE /holds/current?f=all": {"DELETE", "/holds/current?f=all"},
	} {
		got, err := parseAction(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "POST", "/payments", "post /payments", "GET /payments", "POST payments", "POST /a /b"} {
		_, err := parseAction(in)
		require.ErrorIs(t, err, sas.ErrInvalid, in)
	}
}

func TestDescribeAnswer(t *testing.T) {
	t.Parallel()
	se := &httpcall.StatusError{Status: 402, Excerpt: "raw excerpt"}
	for body, want := range map[string]string{
		`{"error":{"type":"payment_declined","message":"card expired"}}`: "HTTP 402 Payment Required: payment_declined: card expired",
		`{"error":{"code":"E42"}}`:                                       "HTTP 402 Payment Required: E42",
		`{"error":"insufficient funds"}`:                                 "HTTP 402 Payment Required: insufficient funds",
		`{"message":"no"}`:                                               "HTTP 402 Payment Required: no",
		`<html>declined</html>`:                                          "HTTP 402 Payment Required: raw excerpt",
		`{}`:                                                             "HTTP 402 Payment Required: raw excerpt",
		``:                                                               "HTTP 402 Payment Required: raw excerpt",
	} {
		require.Equal(t, want, describeAnswer(se, []byte(body)), body)
	}
}

// A busy key is a 409 with Retry-After (httpcall.ErrKeyInUse) still
// answered when httpcall's own tries ran out; never a bare 409 (a genuine
// conflict, permanent), never once the step's deadline stopped the call.
func TestKeyBusy(t *testing.T) {
	t.Parallel()
	conflict := &httpcall.StatusError{Status: 409, Excerpt: "already refunded"}
	inUse := fmt.Errorf("%w: %w", httpcall.ErrKeyInUse, &httpcall.StatusError{Status: 409, Excerpt: "key in use"})
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"bare 409 (permanent)":         {fmt.Errorf("calling X: %w: %w", httpcall.ErrPermanent, conflict), false},
		"409 in use after the tries":   {fmt.Errorf("calling X: %w after 5 tries: %w", httpcall.ErrTransient, inUse), true},
		"409 in use then the deadline": {fmt.Errorf("calling X: %w after 3 tries: %w", httpcall.ErrDeadline, inUse), false},
		"402 permanent":                {fmt.Errorf("calling X: %w: %w", httpcall.ErrPermanent, &httpcall.StatusError{Status: 402}), false},
		"503 after the tries":          {fmt.Errorf("calling X: %w after 5 tries: %w", httpcall.ErrTransient, &httpcall.StatusError{Status: 503}), false},
		"no answer at all":             {fmt.Errorf("calling X: %w: connection refused", httpcall.ErrTransient), false},
	} {
		require.Equal(t, tc.want, keyBusy(tc.err), name)
	}
}

func TestBusyWaitGrowsWithinBounds(t *testing.T) {
	t.Parallel()
	for n := range 10 {
		ceiling := min(keyBusyBackoff<<n, maxKeyBusyBackoff)
		for range 50 {
			w := busyWait(keyBusyBackoff, n)
			require.GreaterOrEqual(t, w, ceiling/2, "n=%d", n)
			require.LessOrEqual(t, w, ceiling, "n=%d", n)
		}
	}
}

// The body sent to the service is the payload as given, not HTML-escaped:
// '<', '>' and '&' stay one byte each.
func TestRequestBodyDoesNotEscapeHTML(t *testing.T) {
	t.Parallel()
	b, err := requestBody(Request{OrderID: "o-1", Step: "charge",
		Payload: json.RawMessage(`{"note":"<b>fish & chips</b>","<k>":1}`)})
	require.NoError(t, err)
	require.Equal(t, `{"<k>":1,"note":"<b>fish & chips</b>","orderId":"o-1","step":"charge"}`, string(b))
}
