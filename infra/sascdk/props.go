package sascdk

import (
	"regexp"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"

	"github.com/sas-go/sas/internal/sizing"
	"github.com/sas-go/sas/workflow"
)

// Architectures the functions can be built for. The names are Lambda's; the
// SAS bootstraps live under DistDir as <GOARCH>/<name>/bootstrap.
const (
	ArchARM64 = "arm64"
	ArchX8664 = "x86_64"
)

// Props configures a SAS deployment. The zero value of every field but
// Agents and DistDir means "the default".
type Props struct {
	// Agents are the deployment's agents: at least one, names unique. Each
	// gets its own queue, dead-letter queue, function, event source and
	// role (and a second queue when it has a priority lane).
	Agents []Agent
	// Workflows are the deployment's workflows. They are checked at synth
	// (workflow.Validate, and every step's agent must be one of Agents) and
	// shipped to the scheduler, the supervisor and the built-in HTTP agents
	// as a workflows.json beside their bootstrap (SAS_WORKFLOWS_FILE).
	Workflows []workflow.Workflow
	// WorkflowsFile is a workflow file (workflow.Load) read at synth, the
	// alternative to Workflows; set one, not both. With neither, the
	// functions run the reference workflows built into them ("payment" and
	// "order"), whose steps all go to the agent "payments".
	WorkflowsFile string

	// DistDir holds the SAS bootstraps (scheduler, supervisor, and agent for
	// the built-in HTTP agent) as <GOARCH>/<name>/bootstrap. Required.
	DistDir string
	// Arch is the Lambda architecture of every function, agents included:
	// "arm64" (default) or "x86_64" ("amd64" is accepted too). Local
	// emulators that run the bootstrap as a host process need the host's.
	Arch string

	// AllowedReplyQueueARNs are the queues a submitter may name as replyTo.
	// They become the scheduler's SendMessage resources and, as queue URLs,
	// SAS_ALLOWED_REPLY_QUEUES. An ARN ending in "*" is a prefix. Empty: the
	// scheduler may post status to no queue. Deployed to an emulator, the
	// scheduler also accepts the same queues' URLs at the emulator's
	// address (its AWS_ENDPOINT_URL), and at no other host
	// (internal/config, Config.ReplyToAllowed).
	AllowedReplyQueueARNs []string
	// OperatorRoleARNs are the IAM roles (or users) of operators: with the
	// supervisor's role, the only principals the control queue takes
	// messages from (sasctl resubmit and compensate; docs/trust.md). Empty:
	// only the supervisor may ask for retries and compensations.
	OperatorRoleARNs []string
	// CompleterRoleARNs are the IAM roles (or users) that may complete,
	// fail or heartbeat a waiting callback step (package completion;
	// docs/trust.md, "Completion tokens"): the intake queue's policy
	// allows them to send to it. A completion also needs the step's token,
	// so a completer can complete no step it was not handed the token of.
	// The intake queue takes orders too: a completer may submit, as any
	// principal the deployer grants the queue to. Empty: only what the
	// deployer grants otherwise.
	CompleterRoleARNs []string
	// DeployerRoleARNs are the principals that deploy and administer the
	// stack: the only ones, besides the account's root user, the queue
	// policies let change a queue (its attributes and policy, permissions,
	// tags), purge or delete it, or start a dead-letter move task
	// (docs/trust.md). Empty: CDK's bootstrap CloudFormation execution role
	// (cdk-<qualifier>-cfn-exec-role-<account>-<region>), which `cdk deploy`
	// updates the stack as. A stack deployed another way (CloudFormation
	// with the caller's own credentials, SAM) must name that caller here, or
	// its updates that change a queue are refused.
	DeployerRoleARNs []string
	// AllowUnsignedReplies lets the scheduler act on agent replies that
	// carry no signature (agents built before signed requests), reading
	// the order from the store instead of believing their echo
	// (SAS_REQUIRE_SIGNED_REPLIES=false). Default false: such replies are
	// dropped, and every agent built with the SDK signs (docs/trust.md).
	AllowUnsignedReplies bool
	// Schedules are the deployment's schedules (docs/schedules.md): each
	// an EventBridge Scheduler schedule whose runs are orders sent to the
	// intake queue by a role of the schedule's own.
	Schedules []Schedule
	// Tenants are groups of submitters that must not reach each other's
	// orders (docs/trust.md, "Tenants"): each with its order ids, its
	// roles and its replyTo queues. Empty: every submitter shares one
	// namespace of ids and AllowedReplyQueueARNs, as before.
	Tenants []Tenant
	// RemovalPolicy applies to the tables, queues, topic and log groups.
	// Default RETAIN (with table deletion protection) so that deleting the
	// stack never deletes orders; test stacks set DESTROY.
	RemovalPolicy awscdk.RemovalPolicy
	// AlertEmail, if set, subscribes that address to the alert topic.
	AlertEmail string

	IndexShards int // SAS_INDEX_SHARDS, default 8
	MaxFailures int // SAS_MAX_FAILURES, default 3
	// StepTimeout is SAS_STEP_TIMEOUT, every step's limit in the reference
	// workflows (default 30s). With Workflows, each step has its own.
	StepTimeout   time.Duration
	PickupTimeout time.Duration // SAS_PICKUP_TIMEOUT, default 60s
	// StuckStepAlarmAge is the age of the oldest stuck step that pages an
	// operator. Default 5 minutes: the supervisor sweeps every minute, so a
	// step that old has survived several rescues.
	StuckStepAlarmAge time.Duration

	// NestedAgentStacks puts each agent in a nested stack of its own
	// (AWS::CloudFormation::Stack "Agent-<name>"), referring to the core's
	// queues and topic. CloudFormation allows 500 resources per template and
	// an agent costs about 14 (17 with a priority lane), so past about 25
	// agents the construct's stack is full; synth says so. With it, the
	// scheduler's and supervisor's permissions on the agents' queues, and
	// the scheduler queue's list of senders, name the deployment's queue
	// name prefix and agent role path instead of every queue and role, so
	// that their size does not grow with the agents. Switching an existing
	// deployment replaces its agents' queues: drain them first
	// (docs/deploy.md, "A hundred agents").
	NestedAgentStacks bool

	// GiveUpAlarmCount is how many give-ups within 5 minutes page an
	// operator as a rate (each give-up alerts on its own too). Default 5.
	GiveUpAlarmCount int

	// OwedAlarmAge is how long a give-up's effects (its alert, its
	// compensate request) may stay owed, not yet sent, before an operator
	// is paged: the OwedTooLong alarm on the supervisor's
	// OwedOldestAgeSeconds (docs/observability.md). Default 5 minutes: the
	// supervisor re-sends what is owed on every sweep after 30 seconds, so
	// effects that old have failed several times.
	OwedAlarmAge time.Duration

	// XRayTracing turns on AWS X-Ray active tracing for every function
	// (Tracing: Active, and the permission to send traces). Off by default:
	// X-Ray is billed per trace. The orders' own trace context travels in
	// their messages either way (docs/observability.md, "One order, one
	// trace").
	XRayTracing bool
}

// Agent is one agent of the deployment: the function that runs the steps
// the workflows give it, fed by its own queue.
//
// Its function gets SAS_AGENT_NAME, SAS_AGENT_QUEUE_URL (its queue),
// SAS_AGENT_PRIORITY_QUEUE_URL (its lane, when it has one) and
// SAS_SCHEDULER_QUEUE_URL (where replies go), besides Environment. Its role
// may consume its own queues, send to the scheduler queue and write its own
// logs, and nothing else: give it more on its role, SAS.Agent(name).Role.
type Agent struct {
	// Name is what steps name as their agent: 1-64 characters of
	// A-Z a-z 0-9 . _ -.
	Name string
	// Code is the function's code: a provided.al2023 bootstrap for Arch,
	// handler "bootstrap". Set Code or CodeDir.
	Code awslambda.Code
	// CodeDir is a directory holding a bootstrap, the alternative to Code.
	CodeDir string
	// Concurrency is the MaximumConcurrency of the agent's event source: at
	// most this many of its functions run at once, which is what protects
	// the remote service it calls. Required, 2 (AWS's minimum) to 1000.
	Concurrency int
	// PriorityConcurrency, when more than 0, gives the agent a priority
	// lane: a second queue (with its own dead-letter queue) for requests of
	// high-priority orders, polled by its own event source with this
	// MaximumConcurrency (2 to 1000), so that a backlog of ordinary
	// requests never holds them back.
	PriorityConcurrency int
	// Environment is added to the function's environment. Names the
	// construct sets (SAS_AGENT_*, SAS_SCHEDULER_QUEUE_URL,
	// SAS_WORKFLOWS_FILE) are refused.
	Environment map[string]string
	// Timeout is the function's timeout. Default: the longest timeout of
	// the agent's steps (StepTimeout without Workflows) plus 15 s, so that
	// the agent notices a step's deadline and returns after it. At most 15
	// minutes, and not below the longest step timeout.
	Timeout time.Duration
	// MemorySize in MB, default 256.
	MemorySize int

	// AllowHTTP lets the built-in HTTP agent call a plain http:// base URL
	// (SAS_AGENT_ALLOW_HTTP=true): for an emulator or a local service only.
	// Without it an http:// base URL is refused at synth, and by the agent
	// at start-up.
	AllowHTTP bool
	// Auth, for the built-in HTTP agent, is a header it sends on every call,
	// its value read from a secret that this agent's role alone is granted.
	Auth *AgentAuth
	// RejectStatuses, for the built-in HTTP agent, are the service's 4xx
	// statuses that are business rejections, not failures
	// (SAS_AGENT_REJECT_STATUSES, e.g. 402 and 422): the order is
	// compensated and ends Rejected, with no operator alert
	// (docs/workflows.md, "A refusal that is a business outcome"). Each
	// 400-499.
	RejectStatuses []int

	// builtin: the SAS HTTP agent (DistDir/<GOARCH>/agent/bootstrap), which
	// also reads the workflows to find each step's endpoint.
	builtin bool
}

// AgentAuth is the header the built-in HTTP agent sends on every call. Its
// value is read at the function's cold start from a secret, by ARN
// (SAS_AGENT_AUTH_SECRET; the value is never in the template or the
// function's environment). The construct grants the agent's role the read
// of that ARN (secretsmanager:GetSecretValue or ssm:GetParameter, and
// kms:Decrypt on KMSKeyARN when set) and grants it to no other role.
type AgentAuth struct {
	// SecretARN holds the header's whole value ("Bearer …"): a Secrets
	// Manager secret's full ARN (arn:…:secretsmanager:<region>:<account>:secret:<name>-<suffix>)
	// or an SSM SecureString parameter's (arn:…:ssm:<region>:<account>:parameter/<name>).
	SecretARN string
	// Header is the header's name; default "Authorization".
	Header string
	// KMSKeyARN is the customer-managed key the secret is encrypted with,
	// if any: the role is granted kms:Decrypt on it. Leave it empty for the
	// AWS-managed keys (aws/secretsmanager, aws/ssm), which need no grant.
	KMSKeyARN string
}

// HTTPAgent is the built-in HTTP agent: it runs a step by calling
// "METHOD /path" (the step's action or undo) under baseURL, with the
// step's idempotency key. Its function is DistDir's agent bootstrap with
// SAS_AGENT_NAME=name and SAS_AGENT_BASE_URL=baseURL (and SAS_PAYMENTS_URL,
// the name older bootstraps read), and the workflows file when there is
// one. Concurrency is 20; change it, or add a lane, on the returned value:
//
//	a := sascdk.HTTPAgent("payments", "https://payments.example.com")
//	a.Concurrency, a.PriorityConcurrency = 10, 2
//
// An empty baseURL is allowed with a synth warning: the agent refuses to
// start until it has one.
func HTTPAgent(name, baseURL string) Agent {
	env := map[string]string{}
	if baseURL != "" {
		env[envAgentBaseURL] = baseURL
		env[envPaymentsURL] = baseURL
	}
	return Agent{Name: name, Concurrency: defaultHTTPAgentConcurrency, Environment: env, builtin: true}
}

// defaultHTTPAgentConcurrency is the built-in agent's event source
// MaximumConcurrency, the stack's value before agents were configurable.
const defaultHTTPAgentConcurrency = 20

// Environment variables the construct sets on agents.
const (
	envAgentName          = "SAS_AGENT_NAME"
	envAgentBaseURL       = "SAS_AGENT_BASE_URL"
	envPaymentsURL        = "SAS_PAYMENTS_URL"
	envAgentQueueURL      = "SAS_AGENT_QUEUE_URL"
	envAgentPriorityQueue = "SAS_AGENT_PRIORITY_QUEUE_URL"
	envAgentQueues        = "SAS_AGENT_QUEUES"
	envSchedulerQueueURL  = "SAS_SCHEDULER_QUEUE_URL"
	envWorkflowsFile      = "SAS_WORKFLOWS_FILE"
	envAgentAllowHTTP     = "SAS_AGENT_ALLOW_HTTP"
	envAgentAuthSecret    = "SAS_AGENT_AUTH_SECRET"
	envAgentAuthHeader    = "SAS_AGENT_AUTH_HEADER"
	envAgentRejects       = "SAS_AGENT_REJECT_STATUSES"
)

// reservedAgentEnv are the names an Agent's Environment may not set: the
// construct's own, and those whose grants it must make (AllowHTTP, Auth).
var reservedAgentEnv = []string{envAgentName, envAgentQueueURL, envAgentPriorityQueue, envSchedulerQueueURL, envWorkflowsFile,
	envAgentAllowHTTP, envAgentAuthSecret, envAgentAuthHeader, envAgentRejects}

// Patterns of AgentAuth's ARNs and header.
var (
	secretsManagerARN = regexp.MustCompile(`^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$`)
	parameterARN      = regexp.MustCompile(`^arn:aws[a-z-]*:ssm:[a-z0-9-]+:[0-9]{12}:parameter/[A-Za-z0-9/_.-]+$`)
	kmsKeyARN         = regexp.MustCompile(`^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$`)
	headerName        = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
	// reservedHeaders are set by the agent itself.
	reservedHeaders = []string{"idempotency-key", "content-type", "accept", "content-length", "host", "transfer-encoding", "connection"}
)

// Limits of an agent's function and event source.
const (
	minConcurrency    = 2 // AWS's minimum MaximumConcurrency
	maxConcurrency    = 1000
	maxLambdaTimeout  = sizing.MaxFunctionTimeout
	defaultMemorySize = 256
)

// withDefaults returns a copy with every unset field filled in.
func (p Props) withDefaults() Props {
	if p.Arch == "" {
		p.Arch = ArchARM64
	}
	if p.Arch == "amd64" {
		p.Arch = ArchX8664
	}
	if p.RemovalPolicy == "" {
		p.RemovalPolicy = awscdk.RemovalPolicy_RETAIN
	}
	if p.IndexShards == 0 {
		p.IndexShards = sizing.DefaultIndexShards
	}
	if p.MaxFailures == 0 {
		p.MaxFailures = sizing.DefaultMaxAttempts
	}
	if p.StepTimeout == 0 {
		p.StepTimeout = sizing.DefaultStepTimeout
	}
	if p.PickupTimeout == 0 {
		p.PickupTimeout = sizing.DefaultPickupTimeout
	}
	if p.StuckStepAlarmAge == 0 {
		p.StuckStepAlarmAge = 5 * time.Minute
	}
	if p.GiveUpAlarmCount == 0 {
		p.GiveUpAlarmCount = 5
	}
	if p.OwedAlarmAge == 0 {
		p.OwedAlarmAge = 5 * time.Minute
	}
	return p
}

// goarch maps the Lambda architecture name to Go's.
func (p Props) goarch() string {
	if p.Arch == ArchX8664 {
		return "amd64"
	}
	return "arm64"
}
