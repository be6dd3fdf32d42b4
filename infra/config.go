package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"

	"github.com/sas-go/sas/infra/sascdk"
)

// Context keys read by PropsFromContext (`npx cdk synth -c arch=x86_64`).
const (
	ctxArch               = "arch"
	ctxDistDir            = "distDir"
	ctxAllowedReplyQueues = "allowedReplyQueues"
	ctxRemovalPolicy      = "removalPolicy"
	ctxPaymentsURL        = "paymentsUrl"
	ctxAlertEmail         = "alertEmail"
	// ctxStepTimeout is a Go duration ("10s"); short ones are for test stacks.
	ctxStepTimeout = "stepTimeout"
	// ctxWorkflowsFile is a workflow file, relative to infra/.
	ctxWorkflowsFile = "workflowsFile"
	// ctxAgents lists built-in HTTP agents as JSON (see contextAgent); the
	// alternative to paymentsUrl's single "payments" agent.
	ctxAgents = "agents"
	// ctxNestedAgentStacks=true puts each agent in a nested stack
	// (sascdk.Props.NestedAgentStacks): needed past about 25 agents.
	ctxNestedAgentStacks = "nestedAgentStacks"
	// ctxStackName names the stack (default StackID), so that two
	// deployments of this app can share an account (the e2e suite's).
	ctxStackName = "stackName"
)

// defaultDistDir is where `make build` puts the bootstraps, seen from infra/.
const defaultDistDir = "../dist"

// contextAgent is one built-in HTTP agent of the agents context value:
// {"payments": {"url": "https://…", "concurrency": 20, "priorityConcurrency": 2}}.
type contextAgent struct {
	URL                 string `json:"url"`
	Concurrency         int    `json:"concurrency"`
	PriorityConcurrency int    `json:"priorityConcurrency"`
}

// PropsFromContext reads the deployment's configuration from CDK context, so
// the same knobs work from the command line (-c key=value) and from
// cdk.json. Its agents are built-in HTTP agents: one named "payments" at
// paymentsUrl, or those the agents key lists.
func PropsFromContext(node constructs.Node) (sascdk.Props, error) {
	raw := func(key string) any { return node.TryGetContext(&key) }
	get := func(key string) string {
		v := raw(key)
		if v == nil {
			return ""
		}
		return strings.TrimSpace(fmt.Sprint(v))
	}
	p := sascdk.Props{
		Arch:          get(ctxArch),
		DistDir:       get(ctxDistDir),
		AlertEmail:    get(ctxAlertEmail),
		WorkflowsFile: get(ctxWorkflowsFile),
	}
	if p.DistDir == "" {
		p.DistDir = defaultDistDir
	}
	for _, arn := range strings.Split(get(ctxAllowedReplyQueues), ",") {
		if arn = strings.TrimSpace(arn); arn != "" {
			p.AllowedReplyQueueARNs = append(p.AllowedReplyQueueARNs, arn)
		}
	}
	if v := get(ctxStepTimeout); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return sascdk.Props{}, fmt.Errorf("context %s=%q: %w", ctxStepTimeout, v, err)
		}
		p.StepTimeout = d
	}
	switch v := strings.ToLower(get(ctxNestedAgentStacks)); v {
	case "", "false":
	case "true":
		p.NestedAgentStacks = true
	default:
		return sascdk.Props{}, fmt.Errorf("context %s=%q: want true or false", ctxNestedAgentStacks, v)
	}
	switch rp := strings.ToLower(get(ctxRemovalPolicy)); rp {
	case "", "retain":
	case "destroy":
		p.RemovalPolicy = awscdk.RemovalPolicy_DESTROY
	default:
		return sascdk.Props{}, fmt.Errorf("context %s=%q: want retain or destroy", ctxRemovalPolicy, rp)
	}
	agents, err := agentsFromContext(raw(ctxAgents))
	if err != nil {
		return sascdk.Props{}, err
	}
	switch payments := get(ctxPaymentsURL); {
	case agents != nil && payments != "":
		return sascdk.Props{}, fmt.Errorf("context %s and %s: give the payments agent's url in %s", ctxPaymentsURL, ctxAgents, ctxAgents)
	case agents != nil:
		p.Agents = agents
	default:
		p.Agents = []sascdk.Agent{sascdk.HTTPAgent("payments", payments)}
	}
	if err := p.Validate(); err != nil {
		return sascdk.Props{}, fmt.Errorf("stack configuration: %w", err)
	}
	return p, nil
}

// agentsFromContext reads the agents key: a JSON string (from -c) or an
// object (from cdk.json). Nil when unset.
func agentsFromContext(v any) ([]sascdk.Agent, error) {
	var text []byte
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		if strings.TrimSpace(v) == "" {
			return nil, nil
		}
		text = []byte(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("context %s: %w", ctxAgents, err)
		}
		text = b
	}
	var m map[string]contextAgent
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf(`context %s: want {"<agent>": {"url": "https://…", "concurrency": 20, "priorityConcurrency": 0}}: %w`, ctxAgents, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("context %s: no agents", ctxAgents)
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names) // a stable template
	out := make([]sascdk.Agent, 0, len(m))
	for _, n := range names {
		c := m[n]
		a := sascdk.HTTPAgent(n, c.URL)
		if c.Concurrency != 0 {
			a.Concurrency = c.Concurrency
		}
		a.PriorityConcurrency = c.PriorityConcurrency
		out = append(out, a)
	}
	return out, nil
}
