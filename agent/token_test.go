package agent_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
)

// A step that waits for the outside world after its agent starts the work
// (a callback step with an agent) hands its token to the service: a Func
// reads it as Request.Token, the HTTP agent sends it as X-Sas-Task-Token
// (the body stays the same); an undo, and every other step, carries none.
func TestTheTaskTokenReachesTheFuncAndTheService(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var tokens []string
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		tokens = append(tokens, r.Header.Get(agent.TaskTokenHeader))
		bodies = append(bodies, string(b))
		mu.Unlock()
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	f := newFixture(t)
	h := wallHandler(t, f, agent.HTTP("flights", srv.URL, newClient(t)))
	withToken := func(r *sas.AgentRequest) { r.Token = "tok-1" }
	f.handle(h, event(wallRequest("o-1", withToken)))
	f.handle(h, event(wallRequest("o-1")))
	f.handle(h, event(wallRequest("o-1", undo)))
	require.Equal(t, []string{"tok-1", "", ""}, tokens)
	require.Equal(t, bodies[0], bodies[1], "the token is no part of the body")

	var got []string
	a := agent.New("pay").Step("reserve-flight", func(_ context.Context, req agent.Request) (any, error) {
		mu.Lock()
		got = append(got, req.Token)
		mu.Unlock()
		return nil, nil
	}, nil)
	h = wallHandler(t, f, a)
	f.handle(h, event(wallRequest("o-2", withToken, func(r *sas.AgentRequest) { r.Agent = "pay" })))
	require.Equal(t, []string{"tok-1"}, got)
}
