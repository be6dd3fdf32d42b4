package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/rig"
	"github.com/sas-go/sas/internal/sas"
)

// Without the example the defaults are the reference workflows, and the
// note says so; with it, its workflow file and every agent directory with
// Go files under its agents/.
func TestResolveDefaults(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)

	o, notes, err := resolve(options{})
	require.NoError(t, err)
	require.Empty(t, o.Workflows, "the reference workflows")
	require.Empty(t, o.Agents)
	require.Equal(t, filepath.Join(root, ".rig/dev"), o.Dir)
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], "no examples/travel/workflows.json here: running the reference workflows")

	for _, f := range []string{"examples/travel/workflows.json", "examples/travel/agents/flights/main.go",
		"examples/travel/agents/hotels/main.go", "examples/travel/agents/README.md", "examples/travel/agents/shared/notes.txt"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, nil, 0o644))
	}
	o, notes, err = resolve(options{})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "examples/travel/workflows.json"), o.Workflows)
	require.Equal(t, []agentSpec{
		{Name: "flights", Dir: filepath.Join(root, "examples/travel/agents/flights")},
		{Name: "hotels", Dir: filepath.Join(root, "examples/travel/agents/hotels")},
	}, o.Agents)
	require.Contains(t, notes[0], "workflows examples/travel/workflows.json")

	// Flags win: a workflow file given keeps its own agents.
	o, _, err = resolve(options{Workflows: "examples/travel/workflows.json", Agents: []agentSpec{{Name: "hotels", Dir: "examples/travel/agents/hotels"}}})
	require.NoError(t, err)
	require.Len(t, o.Agents, 1)

	_, _, err = resolve(options{Agents: []agentSpec{{Name: "cars", Dir: "nowhere"}}})
	require.ErrorContains(t, err, "-agent cars=nowhere: not a directory")
}

func TestAgentFlag(t *testing.T) {
	t.Parallel()
	o, err := parseFlags([]string{"-agent", "flights=./a", "-agent", "hotels=./b"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, []agentSpec{{Name: "flights", Dir: "./a"}, {Name: "hotels", Dir: "./b"}}, o.Agents)
	for _, bad := range [][]string{{"-agent", "flights"}, {"-agent", "=./a"}, {"-agent", "a=./a", "-agent", "a=./b"}, {"extra"}} {
		_, err := parseFlags(bad, io.Discard)
		require.Error(t, err, strings.Join(bad, " "))
	}
}

func TestFinishLine(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 10, 4, 5, 0, time.Local)
	view := func(steps ...sas.StepRecord) sas.OrderView {
		return sas.OrderView{
			Order:   sas.Order{OrderID: "o-1", Workflow: "trip", CreatedAt: at},
			Steps:   steps,
			History: []sas.HistoryEntry{{At: at.Add(1200 * time.Millisecond)}, {At: at.Add(400 * time.Millisecond)}},
		}
	}
	require.Equal(t, "10:04:06  o-1  trip  Processed  1 step in 1.2s",
		finishLine(view(sas.StepRecord{StepName: "flight", ProcessState: sas.Processed})))
	require.Equal(t, "10:04:06  o-1  trip  Compensated  in 1.2s: flight Compensated, hotel Error (no rooms)",
		finishLine(view(sas.StepRecord{StepName: "flight", ProcessState: sas.Compensated},
			sas.StepRecord{StepName: "hotel", ProcessState: sas.Error, LastError: "no rooms"},
			sas.StepRecord{StepName: "pay", ProcessState: sas.Pending})))
}

func TestAgentQueueName(t *testing.T) {
	t.Parallel()
	require.Equal(t, "sasdev-agent-flights", agentQueueName("sasdev", "flights"))
	require.Equal(t, "sasdev-agent-v1_flights", agentQueueName("sasdev", "v1.flights"), "SQS names have no dots")
	long := agentQueueName("sasdev", strings.Repeat("a", 64))
	require.Len(t, long, 76, "room for -dlq within 80")
}

// The shell's own secret key, its session token and an endpoint carrying
// credentials are never printed; the emulators' dummy key is.
func TestAWSExportsWithholdTheShellsSecrets(t *testing.T) {
	env := map[string]string{
		"AWS_ENDPOINT_URL": "https://admin:hunter2@emulator.example:4566", "AWS_REGION": "eu-west-1",
		"AWS_ACCESS_KEY_ID": "AKIAREAL", "AWS_SECRET_ACCESS_KEY": "the-real-secret", "AWS_SESSION_TOKEN": "tok",
	}
	exports, withheld := awsExports(func(k string) string { return env[k] })
	all := strings.Join(exports, "\n")
	for _, secret := range []string{"the-real-secret", "hunter2", "admin", "tok"} {
		require.NotContains(t, all, secret)
	}
	require.ElementsMatch(t, []string{"AWS_ENDPOINT_URL", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}, withheld)
	require.Contains(t, exports, "AWS_REGION=eu-west-1")

	env = map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "AWS_SECRET_ACCESS_KEY": rig.SecretAccessKey}
	exports, withheld = awsExports(func(k string) string { return env[k] })
	require.Empty(t, withheld)
	require.Contains(t, exports, "AWS_SECRET_ACCESS_KEY="+rig.SecretAccessKey, "the emulators' dummy key is no secret")
}
