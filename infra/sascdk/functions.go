package sascdk

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// sasCode is the code of one of the SAS bootstraps in DistDir: the
// directory itself, or a staged copy with the workflows beside it.
func (s *SAS) sasCode(name string) awslambda.Code {
	dir := filepath.Join(s.p.DistDir, s.p.goarch(), name)
	staged, err := stageWithWorkflows(s, dir, s.workflows)
	if err != nil {
		s.errs = append(s.errs, err)
		return awslambda.Code_FromInline(jsii.String("unavailable"))
	}
	return awslambda.Code_FromAsset(jsii.String(staged), nil)
}

type fnSpec struct {
	scope constructs.Construct
	id    string
	// prefix names the role and log group: <prefix>Role, <prefix>Logs.
	prefix string
	// name says whose role it is ("SAS <name> function").
	name        string
	description string
	code        awslambda.Code
	timeout     time.Duration
	memory      int
	recursive   awslambda.RecursiveLoop
	env         map[string]string
	// rolePath is the role's IAM path; nil for "/".
	rolePath *string
}

func (s *SAS) function(spec fnSpec) fn {
	arch := awslambda.Architecture_ARM_64()
	if s.p.Arch == ArchX8664 {
		arch = awslambda.Architecture_X86_64()
	}
	// An explicit role with no managed policies: AWSLambdaBasicExecutionRole
	// would grant logs:* on "*"; permissions() names every resource instead.
	role := awsiam.NewRole(spec.scope, jsii.String(spec.prefix+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("SAS " + spec.name + " function"),
		Path:        spec.rolePath,
	})
	logs := awslogs.NewLogGroup(spec.scope, jsii.String(spec.prefix+"Logs"), &awslogs.LogGroupProps{
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: s.p.RemovalPolicy,
	})
	vars := map[string]*string{}
	for k, v := range spec.env {
		if v != "" {
			vars[k] = jsii.String(v)
		}
	}
	props := &awslambda.FunctionProps{
		Description:  jsii.String(spec.description),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Handler:      jsii.String("bootstrap"),
		Architecture: arch,
		Code:         spec.code,
		Role:         role,
		LogGroup:     logs,
		Timeout:      seconds(spec.timeout),
		MemorySize:   jsii.Number(spec.memory),
		Environment:  &vars,
		// An order travels scheduler → agent queue → agent → scheduler queue
		// → scheduler once per step, in one trace, so Lambda's recursive-loop
		// detection would drop a long workflow after about 16 hops. Runaways
		// are bounded instead by fenced writes, FailureCount and the DLQs;
		// the supervisor starts fresh traces, so it keeps the default.
		RecursiveLoop: spec.recursive,
	}
	if s.p.XRayTracing {
		// CDK grants the role xray:PutTraceSegments and
		// xray:PutTelemetryRecords with it.
		props.Tracing = awslambda.Tracing_ACTIVE
	}
	f := awslambda.NewFunction(spec.scope, jsii.String(spec.id), props)
	// aws-cdk-lib makes the function depend on its role and the role's policy
	// (so it never runs before its permissions exist); the role half is
	// redundant with Role: GetAtt, which cfn-lint's W3005 flags. Silenced here,
	// per resource, rather than for the whole template.
	f.Node().DefaultChild().(awscdk.CfnResource).AddMetadata(jsii.String("cfn-lint"), map[string]any{
		"config": map[string]any{"ignore_checks": []string{"W3005"}},
	})
	return fn{Function: f, role: role, logs: logs}
}

// agentQueue is one entry of SAS_AGENT_QUEUES (internal/sas.AgentQueue in
// the main module).
type agentQueue struct {
	URL         string `json:"url"`
	PriorityURL string `json:"priorityUrl,omitempty"`
}

// agentQueuesJSON is SAS_AGENT_QUEUES: {"<agent>": {"url": …, "priorityUrl": …}}.
// The URLs are CloudFormation tokens inside a Go string; CDK turns the string
// into an Fn::Join when it resolves the environment. encoding/json sorts the
// keys, so the template is the same on every synth.
func (s *SAS) agentQueuesJSON(dlq bool) string {
	m := map[string]agentQueue{}
	for _, a := range s.agents {
		q, lane := a.Queue, a.PriorityQueue
		if dlq {
			q, lane = a.DLQ, a.PriorityDLQ
		}
		e := agentQueue{URL: *q.QueueUrl()}
		if lane != nil {
			e.PriorityURL = *lane.QueueUrl()
		}
		m[a.Name] = e
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err) // strings only
	}
	return string(b)
}

func (s *SAS) functions() {
	p := s.p
	tables := map[string]string{
		"SAS_ORDERS_TABLE": *s.orders.TableName(),
		"SAS_STATE_TABLE":  *s.state.TableName(),
		"SAS_INDEX_SHARDS": strconv.Itoa(p.IndexShards),
	}
	alerts := map[string]string{
		"SAS_ALERT_TOPIC_ARN": *s.topic.TopicArn(),
		"SAS_EVENT_BUS_NAME":  *s.bus.EventBusName(),
	}
	// Where the scheduler sends each agent's requests, what the supervisor
	// watches for backlogs, and the limits: the file's deployment section
	// (deploymentFile), not the environment, which Lambda caps at 4 KB.
	routing := map[string]string{envWorkflowsFile: workflowsFileEnv}
	replyURLs := make([]string, 0, len(p.AllowedReplyQueueARNs))
	for _, arn := range p.AllowedReplyQueueARNs {
		u, _ := replyQueueURL(arn) // checked by Validate
		replyURLs = append(replyURLs, u)
	}

	schedulerEnv := merge(tables, alerts, routing, map[string]string{
		"SAS_INTAKE_QUEUE_URL":    *s.intake.QueueUrl(),
		"SAS_SCHEDULER_QUEUE_URL": *s.schedulerQ.QueueUrl(),
		"SAS_CONTROL_QUEUE_URL":   *s.controlQ.QueueUrl(),
		// The secret's ARN, not the key: only the scheduler's role may read
		// the value (permissions).
		"SAS_SIGNING_KEY_SECRET":   *s.signingKey.SecretArn(),
		"SAS_ALLOWED_REPLY_QUEUES": strings.Join(replyURLs, ","),
		// Stated either way, so that the template says which it is.
		"SAS_REQUIRE_SIGNED_REPLIES": strconv.FormatBool(!p.AllowUnsignedReplies),
	}, s.schedulesEnv(), s.tenantsEnv())
	s.checkEnvSize("scheduler", schedulerEnv)
	s.scheduler = s.function(fnSpec{
		scope: s, id: "Scheduler", prefix: "Scheduler", name: "scheduler", description: "SAS scheduler: intake, step dispatch and agent replies",
		code: s.sasCode("scheduler"), timeout: schedulerTimeout, memory: defaultMemorySize,
		recursive: awslambda.RecursiveLoop_ALLOW, env: schedulerEnv,
	})
	superEnv := merge(tables, alerts, routing, map[string]string{
		// Also what the file's queue names resolve against.
		"SAS_SCHEDULER_QUEUE_URL": *s.schedulerQ.QueueUrl(),
		"SAS_CONTROL_QUEUE_URL":   *s.controlQ.QueueUrl(),
	})
	s.checkEnvSize("supervisor", superEnv)
	s.super = s.function(fnSpec{
		scope: s, id: "Supervisor", prefix: "Supervisor", name: "supervisor", description: "SAS supervisor: rescues steps past their deadline",
		code: s.sasCode("supervisor"), timeout: supervisorTimeout, memory: defaultMemorySize,
		recursive: awslambda.RecursiveLoop_TERMINATE, env: superEnv,
	})
	// A sweep that failed or waited is replaced by the next one a minute
	// later; Lambda's own async retries would only replay a stale one.
	s.super.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(1)),
	})

	for i, a := range p.Agents {
		res := s.agents[i]
		scope := res.scope
		env := map[string]string{
			envAgentName: a.Name,
			// Its replies go to its own reply queue, whatever the SDK
			// calls it (docs/trust.md, "A reply queue per agent").
			envSchedulerQueueURL: *res.Replies.QueueUrl(),
			// Its own queue: a request left without an outcome gets a short
			// visibility backoff there (docs/protocol.md, "Agent").
			envAgentQueueURL: *res.Queue.QueueUrl(),
		}
		if res.PriorityQueue != nil {
			env[envAgentPriorityQueue] = *res.PriorityQueue.QueueUrl()
		}
		code := a.Code
		switch {
		case a.builtin:
			code = s.sasCode("agent")
			// It finds each step's endpoint in the workflows, and the
			// reference workflows' step timeout (part of their version,
			// which it checks requests against) in the file's limits.
			env[envWorkflowsFile] = workflowsFileEnv
			if a.AllowHTTP {
				env[envAgentAllowHTTP] = "true"
			}
			if len(a.RejectStatuses) > 0 {
				env[envAgentRejects] = statusList(a.RejectStatuses)
			}
			if a.Auth != nil {
				// The secret's ARN, never its value: only this agent's role
				// may read it (permissions).
				env[envAgentAuthSecret] = a.Auth.SecretARN
				if a.Auth.Header != "" {
					env[envAgentAuthHeader] = a.Auth.Header
				}
			}
			if a.Environment[envAgentBaseURL] == "" {
				// The agent refuses to start without it; synth still works
				// so that the template can be checked without the service.
				awscdk.Annotations_Of(scope).AddWarningV2(jsii.String("sas:agentBaseUrl"), jsii.String(fmt.Sprintf(
					"agent %q has no base URL: it will fail at start-up until it is given one", a.Name)))
			}
		case a.CodeDir != "":
			code = awslambda.Code_FromAsset(jsii.String(a.CodeDir), nil)
		}
		description := "SAS agent " + a.Name
		if a.builtin {
			description += ": calls its HTTP service for one step"
		}
		memory := a.MemorySize
		if memory == 0 {
			memory = defaultMemorySize
		}
		agentEnv := merge(a.Environment, env)
		s.checkEnvSize("agent "+a.Name, agentEnv)
		f := s.function(fnSpec{
			scope: scope, id: "Function", name: "agent " + a.Name, description: description,
			code: code, timeout: p.agentTimeout(a), memory: memory,
			recursive: awslambda.RecursiveLoop_ALLOW, env: agentEnv, rolePath: s.agentRolePath(),
		})
		res.Function, res.Role, res.Logs = f.Function, f.role, f.logs
	}
}

// lambdaEnvLimit is Lambda's limit on a function's environment: 4 KB of
// names and values together.
const lambdaEnvLimit = 4096

// tokenPattern matches an unresolved CDK string token.
var tokenPattern = regexp.MustCompile(`\$\{Token\[[^\]]*\]\}`)

// resolvedTokenBytes is the most a token of ours resolves to: a queue URL
// (https://sqs.<region>.amazonaws.com/<account>/ and a name of up to 80
// characters) is the longest; ARNs and table names are shorter.
const resolvedTokenBytes = 134

// checkEnvSize refuses a function whose environment could exceed Lambda's
// limit once its tokens resolve: the deploy would fail on it. The agents'
// queues travel in the deployment file, so what could reach it is an
// agent's own Environment.
func (s *SAS) checkEnvSize(name string, env map[string]string) {
	if size := envSizeEstimate(env); size > lambdaEnvLimit {
		s.errs = append(s.errs, fmt.Errorf("the %s function's environment may reach %d bytes once its tokens resolve, over Lambda's limit of %d", name, size, lambdaEnvLimit))
	}
}

// envSizeEstimate is the most env can weigh once deployed: names and
// values, each token counted as resolvedTokenBytes. Empty values are not
// set (see function).
func envSizeEstimate(env map[string]string) int {
	size := 0
	for k, v := range env {
		if v == "" {
			continue
		}
		size += len(k) + len(tokenPattern.ReplaceAllString(v, "")) + resolvedTokenBytes*len(tokenPattern.FindAllString(v, -1))
	}
	return size
}

// eventSources wires the queues to their consumers with partial batch
// responses, so one bad message never sends its whole batch back.
func (s *SAS) eventSources() {
	wire := func(id string, f awslambda.Function, q awssqs.Queue, maxConcurrency int) {
		f.AddEventSourceMapping(jsii.String(id), &awslambda.EventSourceMappingOptions{
			EventSourceArn:          q.QueueArn(),
			BatchSize:               jsii.Number(batchSize),
			MaxBatchingWindow:       seconds(batchingWindow),
			ReportBatchItemFailures: jsii.Bool(true),
			// Caps what one source can take from the shared account pool,
			// keeps a flood on one queue from starving the other, and for an
			// agent bounds the calls its remote service sees at once.
			MaxConcurrency: jsii.Number(maxConcurrency),
		})
	}
	wire("FromIntake", s.scheduler.Function, s.intake, schedulerConcurrency)
	wire("FromSchedulerQueue", s.scheduler.Function, s.schedulerQ, schedulerConcurrency)
	wire("FromControlQueue", s.scheduler.Function, s.controlQ, schedulerConcurrency)
	for i, a := range s.p.Agents {
		res := s.agents[i]
		wire("FromQueue", res.Function, res.Queue, a.Concurrency)
		if res.PriorityQueue != nil {
			wire("FromPriorityQueue", res.Function, res.PriorityQueue, a.PriorityConcurrency)
		}
		// The scheduler reads the agent's replies with a mapping of its
		// own, in the agent's scope (its nested stack, if any), capped at
		// replyConcurrency: a flood on one agent's queue takes that share
		// and no other agent's (docs/trust.md, "A reply queue per agent").
		awslambda.NewEventSourceMapping(res.scope, jsii.String("SchedulerFromReplies"), &awslambda.EventSourceMappingProps{
			Target:                  s.scheduler.Function,
			EventSourceArn:          res.Replies.QueueArn(),
			BatchSize:               jsii.Number(batchSize),
			MaxBatchingWindow:       seconds(batchingWindow),
			ReportBatchItemFailures: jsii.Bool(true),
			MaxConcurrency:          jsii.Number(replyConcurrency),
		})
	}
}

func (s *SAS) schedule() {
	rule := awsevents.NewRule(s, jsii.String("SupervisorSchedule"), &awsevents.RuleProps{
		Description: jsii.String("Runs the SAS supervisor sweep"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
	})
	rule.AddTarget(awseventstargets.NewLambdaFunction(s.super.Function, &awseventstargets.LambdaFunctionProps{
		// A sweep older than the next one is worthless: let it go.
		MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(1)),
		RetryAttempts: jsii.Number(1),
	}))
}

// statusList is SAS_AGENT_REJECT_STATUSES: "402,422".
func statusList(statuses []int) string {
	parts := make([]string, len(statuses))
	for i, st := range statuses {
		parts[i] = strconv.Itoa(st)
	}
	return strings.Join(parts, ",")
}
