package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// fakeDist lays out bootstraps the synth only packages (the template is
// what this test checks, not the binaries).
func fakeDist(t *testing.T) Config {
	dir := t.TempDir()
	for _, name := range []string{"arm64/scheduler", "arm64/supervisor", "arm64/ledger"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, "bootstrap"), []byte("fake "+name), 0o755))
	}
	return Config{Arch: "arm64", DistDir: dir, AgentDir: filepath.Join(dir, "arm64/ledger")}
}

// The stack declares the nightly schedule: an EventBridge Scheduler
// schedule at 02:00 Paris time, targeting the intake queue with the run's
// intake (the workflow, the payload, the schedule and the scheduled time).
func TestTheScheduleIsDeclared(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack, _, err := NewStack(app, StackID, fakeDist(t))
	require.NoError(t, err)
	tmpl := assertions.Template_FromStack(stack, nil)
	tmpl.ResourceCountIs(jsii.String("AWS::Scheduler::Schedule"), jsii.Number(1))
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	raw, err := json.Marshal(tmpl.ToJSON())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &doc))
	for _, r := range doc.Resources {
		if r.Type != "AWS::Scheduler::Schedule" {
			continue
		}
		require.Equal(t, "cron(0 2 * * ? *)", r.Properties["ScheduleExpression"])
		require.Equal(t, "Europe/Paris", r.Properties["ScheduleExpressionTimezone"])
		var in map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.Properties["Target"].(map[string]any)["Input"].(string)), &in))
		require.Equal(t, map[string]any{"v": 1.0, "kind": "intake", "workflow": "reconcile", "payload": map[string]any{"ledger": "main"},
			"schedule": "nightly-recon", "scheduledAt": "<aws.scheduler.scheduled-time>"}, in)
	}
}
