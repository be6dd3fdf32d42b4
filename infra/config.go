package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
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
	// ctxOperatorRoles lists the operators' role (or user) ARNs,
	// comma-separated: with the supervisor, the only senders the control
	// queue takes (Props.OperatorRoleARNs). envOperatorRoles is the same
	// list from the environment, used when the context key is unset.
	ctxOperatorRoles = "operatorRoles"
	envOperatorRoles = "SAS_OPERATOR_ROLE_ARNS"
	// ctxDeployerRoles lists who may administer the queues
	// (Props.DeployerRoleARNs), comma-separated; envDeployerRoles is the
	// same from the environment, used when the key is unset. Default: CDK's
	// bootstrap execution role.
	ctxDeployerRoles = "deployerRoles"
	envDeployerRoles = "SAS_DEPLOYER_ROLE_ARNS"
	// ctxAllowHTTP=true lets every built-in agent call an http:// base URL
	// (Agent.AllowHTTP): emulators only; make deploy sets it with ENDPOINT.
	ctxAllowHTTP = "allowHttp"
	// ctxAllowUnsignedReplies=true: Props.AllowUnsignedReplies.
	ctxAllowUnsignedReplies = "allowUnsignedReplies"
	// The paymentsUrl agent's auth header (Agent.Auth): the secret's ARN,
	// the header's name, and the secret's customer-managed KMS key.
	ctxPaymentsAuthSecret = "paymentsAuthSecret"
	ctxPaymentsAuthHeader = "paymentsAuthHeader"
	ctxPaymentsAuthKMSKey = "paymentsAuthKmsKey"
	// ctxNestedAgentStacks=true puts each agent in a nested stack
	// (sascdk.Props.NestedAgentStacks): needed past about 25 agents.
	ctxNestedAgentStacks = "nestedAgentStacks"
	// ctxStackName names the stack (default StackID), so that two
	// deployments of this app can share an account (the e2e suite's).
	ctxStackName = "stackName"
	// ctxSchedules lists the deployment's schedules as JSON (see
	// contextSchedule; docs/schedules.md).
	ctxSchedules = "schedules"
	// ctxTenants lists the deployment's tenants as JSON (see
	// contextTenant; docs/trust.md, "Tenants").
	ctxTenants = "tenants"
)

// defaultDistDir is where `make build` puts the bootstraps, seen from infra/.
const defaultDistDir = "../dist"

// contextAgent is one built-in HTTP agent of the agents context value:
// {"payments": {"url": "https://…", "concurrency": 20, "priorityConcurrency": 2,
// "authSecret": "arn:…", "authHeader": "X-Api-Key", "authKmsKey": "arn:…"}}.
type contextAgent struct {
	URL                 string `json:"url"`
	Concurrency         int    `json:"concurrency"`
	PriorityConcurrency int    `json:"priorityConcurrency"`
	AuthSecret          string `json:"authSecret"`
	AuthHeader          string `json:"authHeader"`
	AuthKMSKey          string `json:"authKmsKey"`
}

// auth is the Agent.Auth of a secret, header and key; nil without a secret.
func auth(secret, header, key string) *sascdk.AgentAuth {
	if secret == "" && header == "" && key == "" {
		return nil
	}
	return &sascdk.AgentAuth{SecretARN: secret, Header: header, KMSKeyARN: key}
}

// boolContext reads a true/false context value (a string from -c, a bool
// from cdk.json).
func boolContext(key, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, fmt.Errorf("context %s=%q: want true or false", key, v)
}

// PropsFromContext reads the deployment's configuration from CDK context, so
// the same knobs work from the command line (-c key=value) and from
// cdk.json. Its agents are built-in HTTP agents: one named "payments" at
// paymentsUrl, or those the agents key lists. The operators' roles come
// from operatorRoles, or SAS_OPERATOR_ROLE_ARNS when that key is unset.
func PropsFromContext(node constructs.Node) (sascdk.Props, error) {
	return propsFrom(node, os.Getenv)
}

func propsFrom(node constructs.Node, getenv func(string) string) (sascdk.Props, error) {
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
	// arns is a comma-separated list of ARNs from the context key, or from
	// the environment variable (if any) when the key is not given.
	arns := func(key, envKey string) []string {
		v := get(key)
		if raw(key) == nil && envKey != "" {
			v = getenv(envKey)
		}
		var out []string
		for _, arn := range strings.Split(v, ",") {
			if arn = strings.TrimSpace(arn); arn != "" {
				out = append(out, arn)
			}
		}
		return out
	}
	p.AllowedReplyQueueARNs = arns(ctxAllowedReplyQueues, "")
	p.OperatorRoleARNs = arns(ctxOperatorRoles, envOperatorRoles)
	p.DeployerRoleARNs = arns(ctxDeployerRoles, envDeployerRoles)
	allowHTTP, err := boolContext(ctxAllowHTTP, get(ctxAllowHTTP))
	if err != nil {
		return sascdk.Props{}, err
	}
	if p.AllowUnsignedReplies, err = boolContext(ctxAllowUnsignedReplies, get(ctxAllowUnsignedReplies)); err != nil {
		return sascdk.Props{}, err
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
	if p.Schedules, err = schedulesFromContext(raw(ctxSchedules)); err != nil {
		return sascdk.Props{}, err
	}
	if p.Tenants, err = tenantsFromContext(raw(ctxTenants)); err != nil {
		return sascdk.Props{}, err
	}
	paymentsAuth := auth(get(ctxPaymentsAuthSecret), get(ctxPaymentsAuthHeader), get(ctxPaymentsAuthKMSKey))
	switch payments := get(ctxPaymentsURL); {
	case agents != nil && (payments != "" || paymentsAuth != nil):
		return sascdk.Props{}, fmt.Errorf("context %s and %s: give the payments agent's url and auth in %s", ctxPaymentsURL, ctxAgents, ctxAgents)
	case agents != nil:
		p.Agents = agents
	default:
		a := sascdk.HTTPAgent("payments", payments)
		a.Auth = paymentsAuth
		p.Agents = []sascdk.Agent{a}
	}
	for i := range p.Agents {
		p.Agents[i].AllowHTTP = allowHTTP
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
		a.Auth = auth(c.AuthSecret, c.AuthHeader, c.AuthKMSKey)
		out = append(out, a)
	}
	return out, nil
}

// contextSchedule is one schedule of the schedules context value, the
// fields of sascdk.Schedule: [{"name": "nightly", "expression": "cron(0 2 *
// * ? *)", "timeZone": "Europe/Paris", "flexibleWindowMinutes": 15,
// "workflow": "trip", "payload": {…}, "overlap": "skip"}].
type contextSchedule struct {
	Name                  string          `json:"name"`
	Expression            string          `json:"expression"`
	TimeZone              string          `json:"timeZone"`
	FlexibleWindowMinutes int             `json:"flexibleWindowMinutes"`
	Workflow              string          `json:"workflow"`
	Payload               json.RawMessage `json:"payload"`
	Overlap               string          `json:"overlap"`
	Disabled              bool            `json:"disabled"`
}

// schedulesFromContext reads the schedules key: a JSON string (from -c) or
// a list (from cdk.json). Nil when unset; checked with the rest by
// Validate.
func schedulesFromContext(v any) ([]sascdk.Schedule, error) {
	var list []contextSchedule
	if err := contextList(ctxSchedules, v, `[{"name": "nightly", "expression": "cron(0 2 * * ? *)", "workflow": "…"}]`, &list); err != nil {
		return nil, err
	}
	if list == nil {
		return nil, nil
	}
	out := make([]sascdk.Schedule, 0, len(list))
	for _, c := range list {
		out = append(out, sascdk.Schedule{Name: c.Name, Expression: c.Expression, TimeZone: c.TimeZone,
			FlexibleWindow: time.Duration(c.FlexibleWindowMinutes) * time.Minute, Workflow: c.Workflow, Payload: c.Payload,
			Overlap: c.Overlap, Disabled: c.Disabled})
	}
	return out, nil
}

// contextTenant is one tenant of the tenants context value, the fields of
// sascdk.Tenant a context can give (no roles: their unique ids):
// [{"name": "acme", "senderIds": ["AROA…"], "replyQueueArns": ["arn:aws:sqs:…:acme-status"]}].
type contextTenant struct {
	Name           string   `json:"name"`
	SenderIDs      []string `json:"senderIds"`
	ReplyQueueARNs []string `json:"replyQueueArns"`
}

// tenantsFromContext reads the tenants key, as schedulesFromContext its.
func tenantsFromContext(v any) ([]sascdk.Tenant, error) {
	var list []contextTenant
	if err := contextList(ctxTenants, v, `[{"name": "acme", "senderIds": ["AROA…"], "replyQueueArns": ["arn:aws:sqs:…"]}]`, &list); err != nil {
		return nil, err
	}
	var out []sascdk.Tenant
	for _, c := range list {
		out = append(out, sascdk.Tenant{Name: c.Name, SenderIDs: c.SenderIDs, ReplyQueueARNs: c.ReplyQueueARNs})
	}
	return out, nil
}

// contextList decodes the context key's value v, a JSON string (from -c)
// or a list (from cdk.json), into out, refusing unknown fields; it leaves
// out nil when v is unset or blank.
func contextList(key string, v any, example string, out any) error {
	var text []byte
	switch v := v.(type) {
	case nil:
		return nil
	case string:
		if strings.TrimSpace(v) == "" {
			return nil
		}
		text = []byte(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("context %s: %w", key, err)
		}
		text = b
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("context %s: want %s: %w", key, example, err)
	}
	return nil
}
