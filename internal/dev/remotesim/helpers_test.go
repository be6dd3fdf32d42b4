package remotesim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/remotesim"
)

// harness is one simulator behind a real 127.0.0.1 server.
type harness struct {
	sim    *remotesim.Sim
	srv    *httptest.Server
	client *http.Client
}

func newHarness(t *testing.T, cfg remotesim.Config) *harness {
	t.Helper()
	sim, err := remotesim.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(sim) // binds 127.0.0.1
	// Close the simulator first so hanging handlers return and srv.Close,
	// which waits for them, does not.
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	return &harness{
		sim: sim,
		srv: srv,
		// No keep-alive: Go's transport silently resends a POST that carries
		// an Idempotency-Key when a reused connection drops, which would hide
		// the very faults these tests inject.
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the reply body into a map.
func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body %s", r.body)
	return m
}

func (r reply) errorType(t *testing.T) string {
	t.Helper()
	e, ok := r.json(t)["error"].(map[string]any)
	require.True(t, ok, "no error object in %s", r.body)
	typ, _ := e["type"].(string)
	return typ
}

// call POSTs body to path with the key (no header when key is ""). It
// returns the transport error rather than failing, since some tests expect one.
func (h *harness) call(ctx context.Context, path, key string, body any) (reply, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return reply{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+path, bytes.NewReader(b))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return h.do(req)
}

func (h *harness) do(req *http.Request) (reply, error) {
	resp, err := h.client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// mustCall is call for requests that must get an answer.
func (h *harness) mustCall(t *testing.T, path, key string, body any) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := h.call(ctx, path, key, body)
	require.NoError(t, err)
	return r
}

// admin sends an admin request with an optional raw JSON body.
func (h *harness) admin(t *testing.T, method, path, body string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	require.NoError(t, err)
	r, err := h.do(req)
	require.NoError(t, err)
	return r
}

// eventually polls cond; for states that a concurrent request reaches soon.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 2*time.Millisecond, msg)
}

func payment(orderID string, amount int) map[string]any {
	return map[string]any{"orderId": orderID, "amount": amount, "currency": "EUR"}
}
