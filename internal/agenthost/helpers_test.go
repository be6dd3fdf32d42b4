package agenthost_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/assembly"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
	"github.com/sas-go/sas/internal/testkit/logtest"
	"github.com/sas-go/sas/internal/testkit/requesttest"
)

// rig is one agent wired as in production (internal/assembly: the
// SDK's HTTP agent on the SDK's handler, the default workflows) against a remote simulator on 127.0.0.1 and an
// in-memory scheduler queue.
type rig struct {
	t        *testing.T
	clock    sas.Clock
	fake     *clocktest.Clock // nil with the real clock; also the Sleep, which advances it
	sim      *remotesim.Sim
	simURL   string
	queue    *memqueue.Queue
	replyURL string
	client   *agent.HTTPClient
	svc      handler
	logs     *logtest.Buffer
}

type rigOptions struct {
	faults    remotesim.Faults
	client    agent.HTTPConfig // Clock and Client are filled in
	sendFault func(queueURL string, m sas.OutboundMessage) *sas.SendFailure
	realClock bool
	// remote, when set, answers the agent's calls instead of the simulator
	// (which is still built, idle).
	remote http.Handler
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	r := &rig{t: t, logs: &logtest.Buffer{}}
	if o.realClock {
		r.clock = sas.SystemClock{}
	} else {
		r.fake = clocktest.New(clocktest.T0)
		r.clock = r.fake
	}

	sim, err := remotesim.New(remotesim.Config{Seed: 1, Faults: o.faults})
	require.NoError(t, err)
	var h http.Handler = sim
	if o.remote != nil {
		h = o.remote
	}
	srv := httptest.NewServer(h) // 127.0.0.1
	// Cleanups run last first: release hanging handlers, then close.
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	r.sim, r.simURL = sim, srv.URL

	r.queue = memqueue.New(memqueue.Options{Clock: r.clock, SendFault: o.sendFault})
	q, err := r.queue.CreateQueue(t.Context(), sas.CreateQueueParams{Name: "scheduler"})
	require.NoError(t, err)
	r.replyURL = q.URL

	cc := o.client
	cc.Clock = r.clock // the fake one's Sleep advances it
	// No keep-alive: Go's transport silently resends a request with an
	// Idempotency-Key when a reused connection drops, which would hide the
	// lost-response fault from the caller's own retry.
	cc.Client = &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	r.client, err = agent.NewHTTPClient(cc)
	require.NoError(t, err)

	r.svc = r.newService()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent logs:\n%s", r.logs.String())
		}
	})
	return r
}

// handler is what takes an SQS event: a Service, or the SDK's Handler.
type handler interface {
	Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)
}

// newService builds another handler (another Lambda instance) on the same
// simulator, queue and caller.
func (r *rig) newService() handler {
	r.t.Helper()
	svc, err := r.deployed(config.Config{SchedulerQueueURL: r.replyURL, PaymentsURL: r.simURL, StepTimeout: 30 * time.Second})
	require.NoError(r.t, err)
	return svc
}

// deployed hosts the built-in agent under cfg as every deployment does
// (internal/assembly), on the rig's queue, clock, caller and log.
func (r *rig) deployed(cfg config.Config) (*agent.Handler, error) {
	sys := assembly.System{Config: cfg, Parts: assembly.Parts{Queue: r.queue, Clock: r.clock,
		Logger: slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}}
	return sys.BuiltinAgent(builtinagent.Deps{Client: r.client, AllowHTTP: true}, assembly.Hosting{}) // the simulator serves http
}

// handle runs one event and requires the handler to succeed as a whole.
func (r *rig) handle(ev events.SQSEvent) events.SQSEventResponse {
	r.t.Helper()
	return handleWith(r.t, r.svc, ev)
}

func handleWith(t *testing.T, svc handler, ev events.SQSEvent) events.SQSEventResponse {
	t.Helper()
	resp, err := svc.Handle(t.Context(), ev)
	require.NoError(t, err)
	require.NotNil(t, resp.BatchItemFailures, "batchItemFailures must be a list, never null")
	return resp
}

// replies drains the scheduler queue.
func (r *rig) replies() []sas.AgentReply {
	r.t.Helper()
	var out []sas.AgentReply
	for {
		msgs, err := r.queue.Receive(r.t.Context(), sas.ReceiveParams{QueueURL: r.replyURL, Max: 10, Visibility: time.Hour})
		require.NoError(r.t, err)
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			var rep sas.AgentReply
			dec := json.NewDecoder(strings.NewReader(m.Body))
			dec.DisallowUnknownFields() // the reply is exactly the contract
			require.NoError(r.t, dec.Decode(&rep), m.Body)
			out = append(out, rep)
		}
	}
}

// effectsFor lists the ledger's effects for one idempotency key.
func (r *rig) effectsFor(key string) []remotesim.Effect {
	var out []remotesim.Effect
	for _, e := range r.sim.Ledger().Effects {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

// request is a valid agent.request for the "payment" workflow's charge step,
// as the scheduler sends it at clocktest.T0: a 30s limit, leased until
// clocktest.T0+30s (requesttest.Request).
func request(orderID string, opts ...func(*sas.AgentRequest)) sas.AgentRequest {
	payment := func(r *sas.AgentRequest) { r.Workflow = "payment" }
	return requesttest.Request("payments", "charge", orderID, append([]func(*sas.AgentRequest){payment}, opts...)...)
}

var (
	compensation = requesttest.Undo
	completeBy   = requesttest.CompleteBy
	timeout      = requesttest.Timeout
)

// legacy makes the request an older scheduler's: no TimeoutMs, so
// CompleteBy is the agent's deadline.
func legacy(r *sas.AgentRequest) { r.TimeoutMs = 0 }

// withReceives sets a record's ApproximateReceiveCount attribute, as SQS
// and the local poller do.
func withReceives(ev events.SQSEvent, counts ...string) events.SQSEvent {
	for i, c := range counts {
		if c == "" {
			continue
		}
		if ev.Records[i].Attributes == nil {
			ev.Records[i].Attributes = map[string]string{}
		}
		ev.Records[i].Attributes["ApproximateReceiveCount"] = c
	}
	return ev
}

// event makes an SQS event from the agent's queue; a message is a
// sas.AgentRequest (encoded) or a raw body string. Message ids are m1, m2, ...
func event(msgs ...any) events.SQSEvent {
	return requesttest.Event("arn:aws:sqs:us-east-1:000000000000:agent", msgs...)
}

func failedIDs(resp events.SQSEventResponse) []string {
	ids := []string{}
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// requireEcho checks what a reply must echo: the fencing fields, and the
// order fields the scheduler routes on without reading the order, verbatim.
func requireEcho(t *testing.T, req sas.AgentRequest, rep sas.AgentReply) {
	t.Helper()
	require.Equal(t, sas.MessageVersion, rep.V)
	require.Equal(t, sas.KindAgentReply, rep.Kind)
	require.Equal(t, req.OrderID, rep.OrderID)
	require.Equal(t, req.Step, rep.Step)
	require.Equal(t, req.Attempt, rep.Attempt)
	require.Equal(t, req.LockedBy, rep.LockedBy)
	require.Equal(t, req.Agent, rep.Agent)
	require.Equal(t, req.Workflow, rep.Workflow)
	require.Equal(t, req.ReplyTo, rep.ReplyTo)
	if len(req.Payload) == 0 {
		require.Empty(t, rep.Payload)
	} else {
		// Verbatim up to JSON encoding, which compacts a raw message.
		require.JSONEq(t, string(req.Payload), string(rep.Payload))
	}
	require.Equal(t, req.Compensation, rep.Compensation)
	require.Equal(t, req.StepName, rep.StepName)
}

func resultField(t *testing.T, rep sas.AgentReply, field string) any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(rep.Result, &m), "result %s", rep.Result)
	return m[field]
}

// script returns faults that apply plan to calls with key.
func script(key string, plan ...remotesim.ScriptStep) remotesim.Faults {
	return remotesim.Faults{Scripts: []remotesim.Script{{Key: key, Plan: plan}}}
}
