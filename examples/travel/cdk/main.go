// Command cdk is the travel example's CDK app: one stack holding the SAS
// construct (package sascdk) with the trip workflow, given in Go, and the
// example's two agents, travel and payments, each from its own bootstrap.
//
// It needs two sets of bootstraps, for the same architecture:
//
//   - the SAS scheduler and supervisor, built at the repository's root by
//     `make build` into dist/<GOARCH>/ (context distDir, default
//     ../../../dist);
//   - the agents, built in examples/travel by `make build` into
//     dist/<GOARCH>/<agent>/ (context agentsDir, default ../dist).
//
// `make synth` and `make deploy` in examples/travel build both and run the
// CDK CLI here; see the README.
package main

import (
	"cmp"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/examples/travel/trip"
	"github.com/sas-go/sas/infra/sascdk"
)

// StackID is the stack's construct id and CloudFormation name.
const StackID = "SasTravel"

// Context keys (`cdk synth -c arch=x86_64`) and their defaults.
const (
	ctxArch               = "arch"
	ctxDistDir            = "distDir"
	ctxAgentsDir          = "agentsDir"
	ctxAllowedReplyQueues = "allowedReplyQueues"
	ctxApprovalTimeout    = "approvalTimeout"

	defaultDistDir   = "../../../dist"
	defaultAgentsDir = "../dist"
)

// Config is what the app is built from.
type Config struct {
	// Arch is the Lambda architecture: "arm64" (default) or "x86_64".
	Arch string
	// DistDir holds the SAS bootstraps, <GOARCH>/{scheduler,supervisor}/bootstrap.
	DistDir string
	// AgentsDir holds the agents' bootstraps, <GOARCH>/<agent>/bootstrap.
	AgentsDir string
	// AllowedReplyQueueARNs are the queues a submitter may name as replyTo.
	AllowedReplyQueueARNs []string
	// ApprovalTimeout is how long trip-approval waits for its manager
	// (-c approvalTimeout=45s; default trip.ApprovalTimeout).
	ApprovalTimeout time.Duration
	// invalid says what in the context could not be read.
	invalid error
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
	cfg := Config{Arch: get(ctxArch, sascdk.ArchARM64), DistDir: get(ctxDistDir, defaultDistDir), AgentsDir: get(ctxAgentsDir, defaultAgentsDir)}
	if v := get(ctxApprovalTimeout, ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			cfg.invalid = fmt.Errorf("-c %s=%s: want a positive duration such as 45s or 24h", ctxApprovalTimeout, v)
		}
		cfg.ApprovalTimeout = d
	}
	for _, arn := range strings.Split(get(ctxAllowedReplyQueues, ""), ",") {
		if arn = strings.TrimSpace(arn); arn != "" {
			cfg.AllowedReplyQueueARNs = append(cfg.AllowedReplyQueueARNs, arn)
		}
	}
	return cfg
}

// goarch is Go's name for the architecture, the directory of its bootstraps.
func (c Config) goarch() string {
	if c.Arch == sascdk.ArchX8664 || c.Arch == "amd64" {
		return "amd64"
	}
	return "arm64"
}

// agentDir is the directory of an agent's bootstrap.
func (c Config) agentDir(name string) string { return filepath.Join(c.AgentsDir, c.goarch(), name) }

// Invalid says what in the context could not be read; nil when all could.
func (c Config) Invalid() error { return c.invalid }

// Missing returns an error naming the bootstraps that are not built, with
// how to build them; nil when all are there.
func (c Config) Missing() error {
	var missing []string
	check := func(dir, build string) {
		if st, err := os.Stat(filepath.Join(dir, "bootstrap")); err != nil || st.IsDir() {
			missing = append(missing, fmt.Sprintf("%s (%s)", filepath.Join(dir, "bootstrap"), build))
		}
	}
	for _, name := range []string{"scheduler", "supervisor"} {
		check(filepath.Join(c.DistDir, c.goarch(), name), "`make build ARCH="+c.Arch+"` at the repository's root")
	}
	for _, name := range []string{trip.TravelAgent, trip.PaymentsAgent} {
		check(c.agentDir(name), "`make build ARCH="+c.Arch+"` in examples/travel")
	}
	if len(missing) > 0 {
		return errors.New("bootstraps not built: " + strings.Join(missing, ", "))
	}
	return nil
}

// Props are the construct's properties: the trip workflow, and the two
// agents with their own code.
func (c Config) Props() sascdk.Props {
	return sascdk.Props{
		DistDir:   c.DistDir,
		Arch:      c.Arch,
		Workflows: trip.WorkflowsApprovedWithin(cmp.Or(c.ApprovalTimeout, trip.ApprovalTimeout)),
		Agents: []sascdk.Agent{
			// At most five holds at once reach the suppliers, two charges
			// the bank.
			{Name: trip.TravelAgent, CodeDir: c.agentDir(trip.TravelAgent), Concurrency: 5},
			{Name: trip.PaymentsAgent, CodeDir: c.agentDir(trip.PaymentsAgent), Concurrency: 2},
		},
		AllowedReplyQueueARNs: c.AllowedReplyQueueARNs,
		// An example: deleting the stack deletes its tables and queues.
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	}
}

// NewStack is the example's stack.
func NewStack(scope constructs.Construct, id string, cfg Config) (awscdk.Stack, *sascdk.SAS, error) {
	stack := awscdk.NewStack(scope, jsii.String(id), &awscdk.StackProps{
		Description: jsii.String("SAS travel example: the trip workflow with the travel and payments agents"),
	})
	sas, err := sascdk.New(stack, "Sas", ptr(cfg.Props()))
	return stack, sas, err
}

func ptr[T any](v T) *T { return &v }

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	cfg := ConfigFromContext(app.Node())
	if err := cfg.Invalid(); err != nil {
		log.Fatal(err)
	}
	if err := cfg.Missing(); err != nil {
		log.Fatal(err)
	}
	if _, _, err := NewStack(app, StackID, cfg); err != nil {
		log.Fatal(err) // one line per problem
	}
	if err := sascdk.Synth(app); err != nil {
		log.Fatal(err)
	}
}
