package agent_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/agent"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/httpagent"
	"github.com/sas-go/sas/internal/memqueue"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/workflows"
)

func TestRoutesFromDefaultWorkflows(t *testing.T) {
	t.Parallel()
	reg, err := workflows.Default(time.Minute)
	require.NoError(t, err)
	routes, err := agent.RoutesFromRegistry(reg, workflows.PaymentsAgent)
	require.NoError(t, err)
	require.Equal(t, agent.Routes{
		"reserve": {Action: "POST /reservations", Undo: "POST /reservations/cancel"},
		"charge":  {Action: "POST /payments", Undo: "POST /refunds"},
		"ship":    {Action: "POST /shipments"},
	}, routes)

	none, err := agent.RoutesFromRegistry(reg, "inventory")
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestRoutesRefuseAnAmbiguousStepName(t *testing.T) {
	t.Parallel()
	step := func(action string) sas.StepDef {
		return sas.StepDef{Name: "charge", Agent: "payments", Action: action, Undo: "POST /refunds", Timeout: time.Second}
	}
	reg, err := sas.NewRegistry(
		sas.Workflow{Name: "a", Steps: []sas.StepDef{step("POST /payments")}},
		sas.Workflow{Name: "b", Steps: []sas.StepDef{step("POST /charges")}},
	)
	require.NoError(t, err)
	_, err = agent.RoutesFromRegistry(reg, "payments")
	require.ErrorIs(t, err, sas.ErrInvalid)
	require.ErrorContains(t, err, `step "charge"`)

	// The same definition in two workflows is fine.
	reg, err = sas.NewRegistry(
		sas.Workflow{Name: "a", Steps: []sas.StepDef{step("POST /payments")}},
		sas.Workflow{Name: "b", Steps: []sas.StepDef{step("POST /payments")}},
	)
	require.NoError(t, err)
	_, err = agent.RoutesFromRegistry(reg, "payments")
	require.NoError(t, err)
}

func TestNewHTTPRunnerChecksConfig(t *testing.T) {
	t.Parallel()
	caller, err := httpagent.New(httpagent.Config{})
	require.NoError(t, err)
	ok := agent.HTTPRunnerConfig{Agent: "payments", Endpoint: "http://127.0.0.1:1/api", Caller: caller,
		Routes: agent.Routes{"charge": {Action: "POST /payments", Undo: "POST /refunds"}}}
	_, err = agent.NewHTTPRunner(ok)
	require.NoError(t, err)

	for name, mutate := range map[string]func(*agent.HTTPRunnerConfig){
		"no agent":    func(c *agent.HTTPRunnerConfig) { c.Agent = "" },
		"no caller":   func(c *agent.HTTPRunnerConfig) { c.Caller = nil },
		"no endpoint": func(c *agent.HTTPRunnerConfig) { c.Endpoint = "" },
		"relative":    func(c *agent.HTTPRunnerConfig) { c.Endpoint = "payments.local" },
		"query":       func(c *agent.HTTPRunnerConfig) { c.Endpoint = "http://h/?a=1" },
		"ftp":         func(c *agent.HTTPRunnerConfig) { c.Endpoint = "ftp://h/" },
		"no routes":   func(c *agent.HTTPRunnerConfig) { c.Routes = nil },
		"bad action":  func(c *agent.HTTPRunnerConfig) { c.Routes = agent.Routes{"charge": {Action: "charge it"}} },
		"bad undo": func(c *agent.HTTPRunnerConfig) {
			c.Routes = agent.Routes{"charge": {Action: "POST /p", Undo: "refund"}}
		},
		"negative wait": func(c *agent.HTTPRunnerConfig) { c.KeyBusyBackoff = -1 },
	} {
		cfg := ok
		mutate(&cfg)
		_, err := agent.NewHTTPRunner(cfg)
		require.ErrorIs(t, err, sas.ErrInvalid, name)
	}
}

func TestFromConfigNeedsItsEnvironment(t *testing.T) {
	t.Parallel()
	caller, err := httpagent.New(httpagent.Config{})
	require.NoError(t, err)
	d := agent.Deps{Queue: memqueue.New(memqueue.Options{}), Caller: caller}
	for name, cfg := range map[string]config.Config{
		"no payments URL":    {SchedulerQueueURL: "http://q/scheduler"},
		"no scheduler URL":   {PaymentsURL: "http://127.0.0.1:1"},
		"bad payments URL":   {SchedulerQueueURL: "http://q/scheduler", PaymentsURL: "payments"},
		"nothing whatsoever": {},
	} {
		_, err := agent.FromConfig(cfg, d)
		require.ErrorIs(t, err, sas.ErrInvalid, name)
	}
}
