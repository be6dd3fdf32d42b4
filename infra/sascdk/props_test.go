package sascdk

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/workflow"
)

func TestReplyQueueURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		arn, url, err string
	}{
		{arn: "arn:aws:sqs:eu-west-1:111122223333:status", url: "https://sqs.eu-west-1.amazonaws.com/111122223333/status"},
		{arn: "arn:aws:sqs:us-east-1:111122223333:tenant-*", url: "https://sqs.us-east-1.amazonaws.com/111122223333/tenant-*"},
		{arn: "arn:aws-cn:sqs:cn-north-1:111122223333:q", url: "https://sqs.cn-north-1.amazonaws.com.cn/111122223333/q"},
		{arn: "arn:aws-us-gov:sqs:us-gov-west-1:111122223333:q", url: "https://sqs.us-gov-west-1.amazonaws.com/111122223333/q"},
		{arn: "https://sqs.eu-west-1.amazonaws.com/111122223333/status", err: "want an SQS queue ARN"},
		{arn: "arn:aws:sns:eu-west-1:111122223333:topic", err: "want an SQS queue ARN"},
		{arn: "arn:aws:sqs:eu-west-1:111122223333:", err: "want an SQS queue ARN"},
		// Every queue of the account, the stack's own included (docs/trust.md).
		{arn: "arn:aws:sqs:eu-west-1:111122223333:*", err: "account-wide wildcard"},
		{arn: "arn:aws:sqs:eu-west-1:111122223333:a*b", err: "only a trailing *"},
		{arn: "arn:aws:sqs:*:111122223333:q", err: "only a trailing *"},
		{arn: "arn:aws:sqs:eu-west-1:1234:q", err: "12-digit account"},
	} {
		url, err := replyQueueURL(tc.arn)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("replyQueueURL(%q) error %v, want one containing %q", tc.arn, err, tc.err)
		case tc.err == "" && (err != nil || url != tc.url):
			t.Errorf("replyQueueURL(%q) = %q, %v; want %q", tc.arn, url, err, tc.url)
		}
	}
}

// validProps is the smallest valid configuration: the built-in agent and
// the reference workflows.
func validProps() Props {
	return Props{DistDir: "dist", Agents: []Agent{HTTPAgent("payments", "https://pay.example.test")}}
}

// customDir is a directory holding a bootstrap, for agents of the user's own.
func customDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func step(name, agent string, timeout time.Duration) workflow.Step {
	return workflow.Step{Name: name, Agent: agent, Action: "POST /" + name, Timeout: workflow.Duration(timeout)}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if err := validProps().Validate(); err != nil {
		t.Fatalf("valid props: %v", err)
	}
	// A callback step and a wait step without an agent name none.
	waits := validProps()
	waits.Workflows = []workflow.Workflow{{Name: "w", Steps: []workflow.Step{
		{Name: "approve", Callback: &workflow.Callback{Timeout: workflow.Duration(time.Hour)}},
		{Name: "cool-off", Wait: &workflow.Wait{For: workflow.Duration(time.Hour)}},
		step("pay", "payments", 20*time.Second)}}}
	if err := waits.Validate(); err != nil {
		t.Fatalf("steps without an agent: %v", err)
	}
	dir := customDir(t)
	with := func(f func(*Props)) Props {
		p := validProps()
		f(&p)
		return p
	}
	withAgent := func(f func(*Agent)) Props {
		return with(func(p *Props) { f(&p.Agents[0]) })
	}
	trip := []workflow.Workflow{{Name: "trip", Steps: []workflow.Step{step("pay", "payments", 20*time.Second), step("fly", "flights", time.Minute)}}}
	for name, tc := range map[string]struct {
		p    Props
		want string
	}{
		"arch":              {with(func(p *Props) { p.Arch = "riscv64" }), `arch "riscv64"`},
		"dist dir":          {with(func(p *Props) { p.DistDir = "" }), "dist dir: required"},
		"removal":           {with(func(p *Props) { p.RemovalPolicy = awscdk.RemovalPolicy_SNAPSHOT }), "removal policy"},
		"shards":            {with(func(p *Props) { p.IndexShards = -1 }), "index shards"},
		"step too long":     {with(func(p *Props) { p.StepTimeout = 13 * time.Minute }), "step timeout"},
		"step fraction":     {with(func(p *Props) { p.StepTimeout = 1500 * time.Millisecond }), "step timeout"},
		"step too short":    {with(func(p *Props) { p.StepTimeout = time.Millisecond }), "step timeout"},
		"pickup":            {with(func(p *Props) { p.PickupTimeout = time.Millisecond }), "pickup timeout"},
		"reply queue":       {with(func(p *Props) { p.AllowedReplyQueueARNs = []string{"not-an-arn"} }), "reply queue"},
		"max failures":      {with(func(p *Props) { p.MaxFailures = -2 }), "max failures"},
		"no agents":         {with(func(p *Props) { p.Agents = nil }), "at least one agent"},
		"agent name":        {withAgent(func(a *Agent) { a.Name = "pay ments" }), "name must be"},
		"duplicate agents":  {with(func(p *Props) { p.Agents = append(p.Agents, p.Agents[0]) }), "another agent has this name"},
		"concurrency 1":     {withAgent(func(a *Agent) { a.Concurrency = 1 }), "concurrency 1: the event source's maximum concurrency must be 2 to 1000"},
		"concurrency 0":     {with(func(p *Props) { p.Agents[0] = Agent{Name: "payments", CodeDir: dir} }), "concurrency 0"},
		"lane 1":            {withAgent(func(a *Agent) { a.PriorityConcurrency = 1 }), "priority concurrency 1"},
		"lane 1001":         {withAgent(func(a *Agent) { a.PriorityConcurrency = 1001 }), "priority concurrency 1001"},
		"memory":            {withAgent(func(a *Agent) { a.MemorySize = 64 }), "memory size 64"},
		"timeout fraction":  {withAgent(func(a *Agent) { a.Timeout = 1500 * time.Millisecond }), "timeout 1.5s"},
		"timeout too long":  {withAgent(func(a *Agent) { a.Timeout = 16 * time.Minute }), "timeout 16m0s"},
		"timeout < step":    {withAgent(func(a *Agent) { a.Timeout = 10 * time.Second }), "timeout 10s is shorter than its longest step timeout 30s"},
		"reserved env":      {withAgent(func(a *Agent) { a.Environment["SAS_AGENT_QUEUE_URL"] = "x" }), "SAS_AGENT_QUEUE_URL is set by the construct"},
		"base URL":          {with(func(p *Props) { p.Agents[0] = HTTPAgent("payments", "ftp://x") }), `base URL "ftp://x"`},
		"builtin with code": {withAgent(func(a *Agent) { a.CodeDir = dir }), "brings its own code"},
		"reject status":     {withAgent(func(a *Agent) { a.RejectStatuses = []int{402, 500} }), "RejectStatuses: 500 is not a 4xx status"},
		"reject env":        {withAgent(func(a *Agent) { a.Environment["SAS_AGENT_REJECT_STATUSES"] = "402" }), "SAS_AGENT_REJECT_STATUSES is set by the construct"},
		"http base URL": {with(func(p *Props) { p.Agents[0] = HTTPAgent("payments", "http://pay.internal") }),
			`base URL "http://pay.internal": the built-in agent calls https:// services only; set AllowHTTP`},
		"auth secret": {withAgent(func(a *Agent) { a.Auth = &AgentAuth{SecretARN: "payments-token"} }), `auth secret "payments-token"`},
		"partial secret ARN": {withAgent(func(a *Agent) {
			a.Auth = &AgentAuth{SecretARN: "arn:aws:secretsmanager:eu-west-1:111122223333:secret:payments-token"}
		}), "full ARN"},
		"wildcard secret": {withAgent(func(a *Agent) {
			a.Auth = &AgentAuth{SecretARN: "arn:aws:secretsmanager:eu-west-1:111122223333:secret:*"}
		}), "full ARN"},
		"auth header": {withAgent(func(a *Agent) { a.Auth = &AgentAuth{SecretARN: authSecretARN, Header: "Idempotency-Key"} }), `auth header "Idempotency-Key"`},
		"auth key":    {withAgent(func(a *Agent) { a.Auth = &AgentAuth{SecretARN: authSecretARN, KMSKeyARN: "alias/aws/secretsmanager"} }), "auth KMS key"},
		"auth env":    {withAgent(func(a *Agent) { a.Environment["SAS_AGENT_AUTH_SECRET"] = authSecretARN }), "SAS_AGENT_AUTH_SECRET is set by the construct"},
		"http env":    {withAgent(func(a *Agent) { a.Environment["SAS_AGENT_ALLOW_HTTP"] = "true" }), "SAS_AGENT_ALLOW_HTTP is set by the construct"},
		"own agent's auth": {with(func(p *Props) {
			p.Agents[0] = Agent{Name: "payments", CodeDir: dir, Concurrency: 2, Auth: &AgentAuth{SecretARN: authSecretARN}}
		}), "the built-in HTTP agent's settings"},
		"no code":      {with(func(p *Props) { p.Agents[0] = Agent{Name: "payments", Concurrency: 2} }), "set Code or CodeDir"},
		"no bootstrap": {with(func(p *Props) { p.Agents[0] = Agent{Name: "payments", Concurrency: 2, CodeDir: t.TempDir()} }), "holds no bootstrap file"},
		"both workflows": {with(func(p *Props) { p.Workflows, p.WorkflowsFile = trip, "workflows.json" }),
			"set Workflows or WorkflowsFile, not both"},
		"no workflows":    {with(func(p *Props) { p.Workflows = []workflow.Workflow{} }), "workflows: at least one workflow is required"},
		"reference agent": {with(func(p *Props) { p.Agents[0].Name = "pay" }), `their steps go to the agent "payments", which is not an agent of this deployment (agents: pay)`},
		"unknown agent":   {with(func(p *Props) { p.Workflows = trip }), `workflows[0].steps[1].agent: "flights" is not an agent of this deployment (agents: payments)`},
		"unknown callback step's agent": {with(func(p *Props) {
			confirm := step("confirm", "flights", time.Minute)
			confirm.Callback = &workflow.Callback{Timeout: workflow.Duration(time.Hour)}
			p.Workflows = []workflow.Workflow{{Name: "w", Steps: []workflow.Step{confirm}}}
		}), `workflows[0].steps[0].agent: "flights" is not an agent of this deployment (agents: payments)`},
		"timeout < workflow step": {with(func(p *Props) {
			p.Workflows = []workflow.Workflow{{Name: "w", Steps: []workflow.Step{step("pay", "payments", 5*time.Minute)}}}
			p.Agents[0].Timeout = time.Minute
		}), "timeout 1m0s is shorter than its longest step timeout 5m0s"},
	} {
		err := tc.p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error containing %q", name, err, tc.want)
		}
	}
	// What passes: http with AllowHTTP, both kinds of secret, a key.
	for name, p := range map[string]Props{
		"http allowed": with(func(p *Props) {
			p.Agents[0] = HTTPAgent("payments", "http://127.0.0.1:8090")
			p.Agents[0].AllowHTTP = true
		}),
		"secret": withAgent(func(a *Agent) {
			a.Auth = &AgentAuth{SecretARN: authSecretARN, Header: "X-Api-Key", KMSKeyARN: authKeyARN}
		}),
		"parameter": withAgent(func(a *Agent) { a.Auth = &AgentAuth{SecretARN: authParameterARN} }),
	} {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := (Props{Arch: "amd64"}).withDefaults().Arch; got != ArchX8664 {
		t.Errorf("amd64 normalises to %q, want %q", got, ArchX8664)
	}
}

// TestValidateReportsEveryProblem: one run names every problem, so a user
// fixes them in one go.
func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	p := validProps()
	p.Agents[0].Concurrency = 1
	p.IndexShards = -1
	p.Workflows = []workflow.Workflow{{Name: "w", Steps: []workflow.Step{step("a", "hotels", time.Second), step("b", "cars", time.Second)}}}
	err := p.Validate()
	for _, want := range []string{"concurrency 1", "index shards", `steps[0].agent: "hotels"`, `steps[1].agent: "cars"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %q", err, want)
		}
	}
}

// TestBadWorkflowFileRefusedWithItsPath: the file, the path to the field
// and the reason, for a bad duration and for an agent the deployment lacks.
func TestBadWorkflowFileRefusedWithItsPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		body string
		want string
	}{
		"bad duration": {
			`{"workflows": [{"name": "trip", "steps": [{"name": "fly", "agent": "flights", "action": "POST /f", "timeout": "30"}]}]}`,
			`workflows.json: workflows[0].steps[0].timeout: "30" is not a duration`,
		},
		"negative duration": {
			`{"workflows": [{"name": "trip", "steps": [{"name": "fly", "agent": "flights", "action": "POST /f", "timeout": "-1s"}]}]}`,
			`workflows.json: workflows[0].steps[0].timeout: -1s: must be more than 0`,
		},
		"unknown agent": {
			`{"workflows": [{"name": "trip", "steps": [
				{"name": "fly", "agent": "flights", "action": "POST /f", "timeout": "30s"},
				{"name": "sleep", "agent": "hotels", "action": "POST /h", "timeout": "30s"}]}]}`,
			`workflows.json: workflows[0].steps[1].agent: "hotels" is not an agent of this deployment (agents: flights, cars)`,
		},
		"missing file": {"", "workflows.json: cannot read the workflow file"},
	} {
		file := filepath.Join(dir, name, "workflows.json")
		if tc.body != "" {
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p := Props{DistDir: "dist", WorkflowsFile: file, Agents: []Agent{
			HTTPAgent("flights", "https://flights.example.test"),
			{Name: "cars", CodeDir: customDir(t), Concurrency: 2},
		}}
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), file) {
			t.Errorf("%s: Validate() = %v, want %s: …%q", name, err, file, tc.want)
		}
		var fe *workflow.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, workflow.ErrInvalid) {
			t.Errorf("%s: %v is not a workflow.FieldError", name, err)
		}
	}
}

// TestNewRefusesABadWorkflowAtSynth: New returns the same message as an
// error, one line per problem, before any resource exists.
func TestNewRefusesABadWorkflowAtSynth(t *testing.T) {
	all(t) // the shared runtime
	for name, tc := range map[string]struct {
		ws   []workflow.Workflow
		want string
	}{
		"unknown agent": {
			[]workflow.Workflow{{Name: "trip", Steps: []workflow.Step{step("fly", "flights", time.Second), step("sleep", "hotels", time.Second)}}},
			`workflows[0].steps[1].agent: "hotels" is not an agent of this deployment (agents: flights)`,
		},
		"bad duration": {
			[]workflow.Workflow{{Name: "trip", Steps: []workflow.Step{step("fly", "flights", -time.Second)}}},
			`workflows[0].steps[0].timeout: -1s: must be more than 0`,
		},
	} {
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
		stack := awscdk.NewStack(app, jsii.String("Bad"), nil)
		sas, err := New(stack, "Sas", &Props{DistDir: fixtureDist, Workflows: tc.ws, Agents: []Agent{HTTPAgent("flights", "https://f.example.test")}})
		if sas != nil || err == nil || !strings.HasPrefix(err.Error(), "sascdk.New Sas: "+tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: New returned %v, %v; want the error %q", name, sas, err, tc.want)
		}
		if n := len(*stack.Node().Children()); n != 0 {
			t.Errorf("%s: New left %d constructs behind", name, n)
		}
	}
}

func TestAgentTimeout(t *testing.T) {
	t.Parallel()
	r, err := Props{DistDir: "d", Agents: []Agent{
		HTTPAgent("a", ""),
		HTTPAgent("b", ""),
		func() Agent { c := HTTPAgent("c", ""); c.Timeout = 5 * time.Minute; return c }(),
		HTTPAgent("idle", ""),
	}, Workflows: []workflow.Workflow{{Name: "w", Steps: []workflow.Step{
		step("s1", "a", 1500*time.Millisecond), step("s2", "a", 10*time.Second),
		step("s3", "b", workflow.MaxStepTimeout), step("s4", "c", time.Minute),
	}}}}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{25 * time.Second, 15 * time.Minute, 5 * time.Minute, 15 * time.Second} {
		if got := r.agentTimeout(r.Agents[i]); got != want {
			t.Errorf("agent %s: timeout %s, want %s", r.Agents[i].Name, got, want)
		}
	}
}

// TestEnvSizeEstimate: a token counts as the longest value it can resolve to.
func TestEnvSizeEstimate(t *testing.T) {
	t.Parallel()
	env := map[string]string{"A": "xy", "B": `{"q":"${Token[TOKEN.12]}","p":"${Token[TOKEN.13]}"}`, "EMPTY": ""}
	if got, want := envSizeEstimate(env), 1+2+1+len(`{"q":"","p":""}`)+2*resolvedTokenBytes; got != want {
		t.Errorf("envSizeEstimate = %d, want %d", got, want)
	}
}
