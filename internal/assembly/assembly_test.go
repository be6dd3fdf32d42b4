package assembly_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/alerts"
	"github.com/sas-go/sas/internal/assembly"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/memstore"
	"github.com/sas-go/sas/internal/registry"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/scheduler"
	"github.com/sas-go/sas/internal/sizing"
	"github.com/sas-go/sas/internal/testkit/clocktest"
)

// The backlog is every agent queue and lane, and the scheduler queue.
func TestBacklogQueues(t *testing.T) {
	t.Parallel()
	cfg := config.Config{
		SchedulerQueueURL: "https://q/scheduler",
		AgentQueues: sas.AgentQueues{Default: "https://q/agent", ByAgent: map[string]sas.AgentQueue{
			"flights": {URL: "https://q/flights", PriorityURL: "https://q/flights-lane"},
		}},
	}
	require.Equal(t, []string{"https://q/agent", "https://q/flights", "https://q/flights-lane", "https://q/scheduler"}, assembly.BacklogQueues(cfg))
}

// An agent function's environment names its own queue; elsewhere (the dev
// server, the kit) each agent has its entry in AgentQueues.
func TestAgentQueue(t *testing.T) {
	t.Parallel()
	byAgent := sas.AgentQueues{ByAgent: map[string]sas.AgentQueue{"flights": {URL: "https://q/flights"}}}
	sys := assembly.System{Config: config.Config{AgentQueues: byAgent}}
	require.Equal(t, sas.AgentQueue{URL: "https://q/flights"}, sys.AgentQueue("flights"))
	require.Zero(t, sys.AgentQueue("hotels"))

	sys.Config.AgentQueueURL, sys.Config.AgentPriorityQueueURL = "https://q/own", "https://q/own-lane"
	require.Equal(t, sas.AgentQueue{URL: "https://q/own", PriorityURL: "https://q/own-lane"}, sys.AgentQueue("flights"))
}

// The scheduler renews a message on its last receive before the
// dead-letter queue: it must count the receives the queues are made with.
func TestMaxReceivesAreTheQueues(t *testing.T) {
	t.Parallel()
	require.Equal(t, sizing.MaxReceiveCount, scheduler.DefaultMaxReceives)
}

func TestBuiltinAgentNeedsItsEnvironment(t *testing.T) {
	t.Parallel()
	parts := assembly.Parts{Queue: memqueue.New(memqueue.Options{})}
	d := builtinagent.Deps{AllowHTTP: true}
	for name, cfg := range map[string]config.Config{
		"no payments URL":    {SchedulerQueueURL: "http://q/scheduler", StepTimeout: time.Minute},
		"no scheduler URL":   {PaymentsURL: "http://127.0.0.1:1", StepTimeout: time.Minute},
		"bad payments URL":   {SchedulerQueueURL: "http://q/scheduler", PaymentsURL: "payments", StepTimeout: time.Minute},
		"nothing whatsoever": {StepTimeout: time.Minute},
	} {
		_, err := assembly.System{Config: cfg, Parts: parts}.BuiltinAgent(d, assembly.Hosting{})
		require.ErrorIs(t, err, sas.ErrInvalid, name)
	}
	good := config.Config{SchedulerQueueURL: "http://q/scheduler", PaymentsURL: "http://127.0.0.1:1", StepTimeout: time.Minute}
	h, err := assembly.System{Config: good, Parts: parts}.BuiltinAgent(d, assembly.Hosting{})
	require.NoError(t, err, "the deployment's HTTP client when none is given")
	require.NotNil(t, h)
}

// One system in memory, as the test kit assembles it: the scheduler, the
// supervisor and an agent's handler all build, and share the clock, the
// queue and the metrics writer.
func TestAssemblesInMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktest.New(time.Date(2027, 1, 15, 9, 0, 0, 0, time.UTC))
	q := memqueue.New(memqueue.Options{Clock: clock})
	url := func(name string) string {
		created, err := q.CreateQueue(ctx, sas.CreateQueueParams{Name: name})
		require.NoError(t, err)
		return created.URL
	}
	reg, err := registry.Default(30 * time.Second)
	require.NoError(t, err)
	cfg := config.Config{
		IntakeQueueURL: url("intake"), SchedulerQueueURL: url("scheduler"), ControlQueueURL: url("control"),
		AgentQueues: sas.AgentQueues{Default: url("agent")}, MaxFailures: 3, PickupTimeout: time.Minute,
	}
	var metrics bytes.Buffer
	sys := assembly.System{Config: cfg, Parts: assembly.Parts{
		Store: memstore.New(memstore.Config{}), Queue: q, Alerter: alerts.NewRecorder(), Workflows: reg,
		Clock: clock, Metrics: &metrics,
	}}
	svc, err := sys.Scheduler("scheduler-test", sas.NewSigningKey())
	require.NoError(t, err)
	require.NotNil(t, svc)
	sup, err := sys.Supervisor("supervisor-test")
	require.NoError(t, err)
	rep, err := sup.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Rescued)
	require.Contains(t, metrics.String(), "_aws", "the supervisor's EMF line goes to the system's writer")

	echo := agent.New("payments").Default(
		func(context.Context, agent.Request) (any, error) { return nil, nil },
		func(context.Context, agent.Request) (any, error) { return nil, nil })
	h, err := sys.AgentHandler(sys.AgentQueue("payments"), assembly.Hosting{}, echo)
	require.NoError(t, err)
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", Body: "not a request"}}})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
}
