package builtinagent_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/builtinagent"
	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/sas"
)

func TestAgentNeedsItsEnvironment(t *testing.T) {
	t.Parallel()
	client, err := agent.NewHTTPClient(agent.HTTPConfig{})
	require.NoError(t, err)
	d := builtinagent.Deps{Client: client, AllowHTTP: true}
	for name, cfg := range map[string]config.Config{
		"no payments URL":  {StepTimeout: time.Minute},
		"bad payments URL": {PaymentsURL: "payments", StepTimeout: time.Minute},
	} {
		_, err := builtinagent.Agent(cfg, d)
		require.ErrorIs(t, err, sas.ErrInvalid, name)
	}

	good := config.Config{PaymentsURL: "http://127.0.0.1:1", StepTimeout: time.Minute}
	_, err = builtinagent.Agent(good, d)
	require.NoError(t, err)
	bad := d
	bad.BaseURL = "ftp://h"
	_, err = builtinagent.Agent(good, bad)
	require.ErrorIs(t, err, sas.ErrInvalid, "SAS_AGENT_BASE_URL is checked like SAS_PAYMENTS_URL")
	bad = d
	bad.Client = nil
	_, err = builtinagent.Agent(good, bad)
	require.ErrorIs(t, err, sas.ErrInvalid, "no client")
}

// SAS_AGENT_NAME and SAS_AGENT_BASE_URL (Deps.Name, Deps.BaseURL) win over
// the defaults, "payments" and SAS_PAYMENTS_URL. An agent no workflow
// names has no routes: it serves the requests that carry their action.
func TestAgentNameAndBaseURL(t *testing.T) {
	t.Parallel()
	client, err := agent.NewHTTPClient(agent.HTTPConfig{})
	require.NoError(t, err)
	cfg := config.Config{PaymentsURL: "http://127.0.0.1:1", StepTimeout: time.Minute}
	a, err := builtinagent.Agent(cfg, builtinagent.Deps{Client: client, Name: "flights", BaseURL: "https://127.0.0.1:2/api"})
	require.NoError(t, err)
	require.Equal(t, "flights", a.Name())
	a, err = builtinagent.Agent(cfg, builtinagent.Deps{Client: client, AllowHTTP: true})
	require.NoError(t, err)
	require.Equal(t, "payments", a.Name())
	_, err = builtinagent.Agent(config.Config{StepTimeout: time.Minute}, builtinagent.Deps{Client: client, BaseURL: "https://127.0.0.1:2"})
	require.NoError(t, err, "SAS_AGENT_BASE_URL alone is enough")
}
