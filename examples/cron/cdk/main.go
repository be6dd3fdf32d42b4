// Command cdk is the cron example's CDK app: one stack holding the SAS
// construct with the reconcile workflow, the ledger agent, and the nightly
// schedule, an EventBridge Scheduler schedule whose runs are sent to the
// intake queue (docs/schedules.md).
//
// It needs the SAS bootstraps (`make build` at the repository's root, into
// dist/<GOARCH>/; context distDir, default ../../../dist) and the ledger
// agent's (context agentDir, default ../dist/<GOARCH>/ledger: GOOS=linux
// go build -tags lambda.norpc -o ../dist/arm64/ledger/bootstrap
// ../agents/ledger).
package main

import (
	"fmt"
	"log"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/examples/cron"
	"github.com/sas-go/sas/infra/sascdk"
)

// StackID is the stack's construct id and CloudFormation name.
const StackID = "SasCron"

// Config is what the app is built from.
type Config struct {
	Arch     string // "arm64" (default) or "x86_64"
	DistDir  string // the SAS bootstraps, <GOARCH>/{scheduler,supervisor}/bootstrap
	AgentDir string // the ledger agent's bootstrap directory
}

// ConfigFromContext reads the configuration from CDK context.
func ConfigFromContext(node constructs.Node) Config {
	get := func(key, def string) string {
		if v := node.TryGetContext(jsii.String(key)); v != nil {
			if s := strings.TrimSpace(fmt.Sprint(v)); s != "" {
				return s
			}
		}
		return def
	}
	c := Config{Arch: get("arch", sascdk.ArchARM64), DistDir: get("distDir", "../../../dist")}
	goarch := "arm64"
	if c.Arch == sascdk.ArchX8664 {
		goarch = "amd64"
	}
	c.AgentDir = get("agentDir", filepath.Join("../dist", goarch, "ledger"))
	return c
}

// Props are the construct's properties: the workflow, its agent, and the
// schedule.
func (c Config) Props() sascdk.Props {
	return sascdk.Props{
		DistDir:   c.DistDir,
		Arch:      c.Arch,
		Workflows: cron.Workflows(),
		Agents:    []sascdk.Agent{{Name: "ledger", CodeDir: c.AgentDir, Concurrency: 2}},
		Schedules: []sascdk.Schedule{{
			Name:       cron.ScheduleName,
			Expression: cron.Expression,
			TimeZone:   cron.TimeZone,
			Workflow:   "reconcile",
			Payload:    cron.Payload,
			Overlap:    "skip",
		}},
		// An example: deleting the stack deletes its tables and queues.
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	}
}

// NewStack is the example's stack.
func NewStack(scope constructs.Construct, id string, cfg Config) (awscdk.Stack, *sascdk.SAS, error) {
	stack := awscdk.NewStack(scope, jsii.String(id), &awscdk.StackProps{
		Description: jsii.String("SAS cron example: the nightly reconciliation on an EventBridge Scheduler schedule"),
	})
	p := cfg.Props()
	sas, err := sascdk.New(stack, "Sas", &p)
	return stack, sas, err
}

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	if _, _, err := NewStack(app, StackID, ConfigFromContext(app.Node())); err != nil {
		log.Fatal(err) // one line per problem
	}
	if err := sascdk.Synth(app); err != nil {
		log.Fatal(err)
	}
}
