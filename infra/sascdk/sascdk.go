package sascdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/sas-go/sas/internal/sizing"
)

// Names fixed by the contract in docs/state-store.md.
const (
	stateDueIndex = "state-due"
	// ordersCreatedIndex pages through the orders newest first, for the
	// console (internal/dynamostore.DefaultOrdersIndexName).
	ordersCreatedIndex = "orders-created"
	// MetricNamespace and StuckStepMetric are what the supervisor publishes
	// (the names are internal/metrics', which every actor publishes with;
	// see metrics.go).
	MetricNamespace = "SAS"
	StuckStepMetric = "OldestStuckStepAgeSeconds"
)

// Function sizing. The scheduler and supervisor do a handful of DynamoDB and
// SQS calls per message; 30s and 60s are generous ceilings, not targets.
// The scheduler's timeout, the queues' visibility and their
// maxReceiveCount are internal/sizing's, which the test kit and the dev
// server share.
const (
	schedulerTimeout  = sizing.SchedulerTimeout
	supervisorTimeout = 60 * time.Second
	// maxReceiveCount is how often a message may fail before its DLQ.
	maxReceiveCount = sizing.MaxReceiveCount
	batchSize       = 10
	batchingWindow  = time.Second
	// schedulerConcurrency caps each of the scheduler's two event sources.
	schedulerConcurrency = 10
)

// SAS is the construct: the queues, the state store, the scheduler, the
// supervisor on its schedule, one function and queue per agent,
// least-privilege roles, alerting and alarms.
type SAS struct {
	constructs.Construct
	p resolved

	intake, intakeDLQ    awssqs.Queue
	schedulerQ, schedDLQ awssqs.Queue
	// controlQ takes retries and compensations, from the supervisor and
	// operators alone (docs/trust.md).
	controlQ, controlDLQ awssqs.Queue
	orders, state        awsdynamodb.Table
	topic                awssns.Topic
	alertKey             awskms.Key
	bus                  awsevents.EventBus
	busName              *string
	eventBusARN          *string
	// signingKey is the scheduler's key for its agent requests, readable
	// by the scheduler's role alone.
	signingKey       awssecretsmanager.Secret
	scheduler, super fn
	agents           []*AgentResources
	// workflows is the workflow file shipped to the functions: the
	// workflows (absent for the reference workflows) and the deployment
	// section (agents' queues, limits).
	workflows []byte
	// names are the agents' queue names (queueNames).
	names queueNames
	// errs are the problems found while building; New returns them.
	errs []error
}

// AgentResources are what the construct made for one agent. Its resources
// live under the child construct "Agent-<name>".
type AgentResources struct {
	Name string
	// Queue takes the agent's requests; DLQ gets those that failed
	// maxReceiveCount (5) times.
	Queue, DLQ awssqs.Queue
	// PriorityQueue is the priority lane and PriorityDLQ its dead-letter
	// queue; both nil without PriorityConcurrency.
	PriorityQueue, PriorityDLQ awssqs.Queue
	Function                   awslambda.Function
	Role                       awsiam.Role
	Logs                       awslogs.LogGroup

	scope constructs.Construct // Agent-<name>
}

// fn is a function with the role we write its policy into.
type fn struct {
	awslambda.Function
	role awsiam.Role
	logs awslogs.LogGroup
}

// New builds a SAS deployment under scope. Invalid props are an error
// holding every problem Props.Validate reports, one a line (a bad workflow
// definition names the file, the path to the field and the reason), and
// nothing is built: a CDK app prints it and exits,
//
//	if _, err := sascdk.New(stack, "Sas", props); err != nil {
//		log.Fatal(err)
//	}
//
// rather than panicking, as constructs in other languages throw. The
// limits CloudFormation and Lambda set (500 resources per template, 4 KB
// of environment per function) are checked too: the environments here, the
// templates when the app synthesizes with Synth (CheckAssembly).
func New(scope constructs.Construct, id string, props *Props) (*SAS, error) {
	if props == nil {
		props = &Props{}
	}
	r, err := props.resolve()
	if err != nil {
		return nil, fmt.Errorf("sascdk.New %s: %w", id, err)
	}
	// Override, not NewConstruct: the *SAS itself becomes the jsii object,
	// so it can be the scope of other constructs (the construct's own and
	// the user's).
	s := &SAS{p: r}
	constructs.NewConstruct_Override(s, scope, &id)
	s.names = newQueueNames(s)
	if s.workflows, err = s.deploymentFile(); err != nil {
		return nil, fmt.Errorf("sascdk.New %s: %w", id, err)
	}

	s.queues()
	s.tables()
	s.alerting()
	s.functions()
	s.eventSources()
	s.schedule()
	s.permissions()
	s.alarms()
	s.dashboard()
	s.outputs()
	if err := errors.Join(s.errs...); err != nil {
		return nil, fmt.Errorf("sascdk.New %s: %w", id, err)
	}
	return s, nil
}

// IntakeQueue is where applications send orders (SAS_INTAKE_QUEUE_URL):
// grant sqs:SendMessage on it to submitters.
func (s *SAS) IntakeQueue() awssqs.Queue { return s.intake }

// IntakeDLQ is the intake queue's dead-letter queue.
func (s *SAS) IntakeDLQ() awssqs.Queue { return s.intakeDLQ }

// SchedulerQueue takes the agents' replies and the supervisor's retries.
func (s *SAS) SchedulerQueue() awssqs.Queue { return s.schedulerQ }

// ControlQueue takes retries and compensations (SAS_CONTROL_QUEUE_URL):
// only the supervisor's role and Props.OperatorRoleARNs may send to it.
func (s *SAS) ControlQueue() awssqs.Queue { return s.controlQ }

// SigningKey is the secret the scheduler signs its agent requests with.
func (s *SAS) SigningKey() awssecretsmanager.Secret { return s.signingKey }

// AlertBus is the stack's own event bus, where alerts go.
func (s *SAS) AlertBus() awsevents.EventBus { return s.bus }

// SchedulerDLQ is the scheduler queue's dead-letter queue.
func (s *SAS) SchedulerDLQ() awssqs.Queue { return s.schedDLQ }

// OrdersTable is the orders table (SAS_ORDERS_TABLE).
func (s *SAS) OrdersTable() awsdynamodb.Table { return s.orders }

// StateTable is the step state table (SAS_STATE_TABLE) with its state-due index.
func (s *SAS) StateTable() awsdynamodb.Table { return s.state }

// AlertTopic is the SNS topic of operator alerts and alarms.
func (s *SAS) AlertTopic() awssns.Topic { return s.topic }

// Scheduler is the scheduler function.
func (s *SAS) Scheduler() awslambda.Function { return s.scheduler.Function }

// Supervisor is the supervisor function.
func (s *SAS) Supervisor() awslambda.Function { return s.super.Function }

// Agents lists the agents' resources in the order of Props.Agents.
func (s *SAS) Agents() []*AgentResources { return append([]*AgentResources(nil), s.agents...) }

// Agent returns the named agent's resources, or nil.
func (s *SAS) Agent(name string) *AgentResources {
	for _, a := range s.agents {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// queueMaxMessageBytes is every queue's MaximumMessageSize: the limit the
// code holds to (internal/sqslimits.MaxBodyBytes; a test there checks they
// agree). Set, not left to the default, because the default changed in 2025
// (256 KiB to 1 MiB) and the code must not assume more than the queue takes.
const queueMaxMessageBytes = 256 * 1024

// queue creates a queue and its dead-letter queue under scope, both
// encrypted with SQS-managed keys (no KMS grants needed) and refusing plain
// HTTP.
func (s *SAS) queue(scope constructs.Construct, id, name string, visibility time.Duration) (awssqs.Queue, awssqs.Queue) {
	var queueName *string
	if name != "" {
		queueName = jsii.String(name)
	}
	dlq := awssqs.NewQueue(scope, jsii.String(id+"DLQ"), &awssqs.QueueProps{
		Encryption: awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL: jsii.Bool(true),
		// The maximum, and longer than the source's: a message keeps its
		// original enqueue time when it moves to the DLQ, and the operator
		// needs days to look at it.
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
		MaxMessageSizeBytes: jsii.Number(queueMaxMessageBytes),
		RemovalPolicy:       s.p.RemovalPolicy,
	})
	q := awssqs.NewQueue(scope, jsii.String(id), &awssqs.QueueProps{
		QueueName:         queueName,
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		VisibilityTimeout: seconds(visibility),
		// Long polling is what the Lambda poller uses anyway; this helps the
		// CLI and tests that receive directly.
		ReceiveMessageWaitTime: awscdk.Duration_Seconds(jsii.Number(20)),
		RetentionPeriod:        awscdk.Duration_Days(jsii.Number(4)),
		MaxMessageSizeBytes:    jsii.Number(queueMaxMessageBytes),
		DeadLetterQueue:        &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(maxReceiveCount)},
		RemovalPolicy:          s.p.RemovalPolicy,
	})
	return q, dlq
}

func (s *SAS) queues() {
	// Lambda's advice: visibility ≥ 6× the consumer's timeout, so a message
	// is not handed out again while throttled retries of it may still run
	// (sizing.LambdaVisibility).
	s.intake, s.intakeDLQ = s.queue(s, "IntakeQueue", "", sizing.SchedulerVisibility)
	s.schedulerQ, s.schedDLQ = s.queue(s, "SchedulerQueue", "", sizing.SchedulerVisibility)
	s.controlQ, s.controlDLQ = s.queue(s, "ControlQueue", "", sizing.SchedulerVisibility)
	s.signingKey = awssecretsmanager.NewSecret(s, jsii.String("SigningKey"), &awssecretsmanager.SecretProps{
		Description: jsii.String("SAS: the key the scheduler signs its agent requests with (docs/trust.md)"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength: jsii.Number(64), ExcludePunctuation: jsii.Bool(true),
		},
		RemovalPolicy: s.p.RemovalPolicy,
	})
	for _, a := range s.p.Agents {
		// Any name package workflow accepts is a valid construct id; the
		// prefix keeps agents apart from the shared resources.
		var scope constructs.Construct
		if s.p.NestedAgentStacks {
			scope = awscdk.NewNestedStack(s, jsii.String("Agent-"+a.Name), &awscdk.NestedStackProps{
				Description: jsii.String("SAS agent " + a.Name),
			})
		} else {
			scope = constructs.NewConstruct(s, jsii.String("Agent-"+a.Name))
		}
		res := &AgentResources{Name: a.Name, scope: scope}
		vis := sizing.LambdaVisibility(s.p.agentTimeout(a))
		// Named, so that the deployment file can name them at synth
		// (queueNames).
		res.Queue, res.DLQ = s.queue(scope, "Queue", s.names.queue(a.Name, false), vis)
		if a.PriorityConcurrency > 0 {
			res.PriorityQueue, res.PriorityDLQ = s.queue(scope, "PriorityQueue", s.names.queue(a.Name, true), vis)
		}
		s.agents = append(s.agents, res)
	}
}

func (s *SAS) tables() {
	retain := s.p.RemovalPolicy == awscdk.RemovalPolicy_RETAIN
	common := func(pk, sk *awsdynamodb.Attribute) *awsdynamodb.TableProps {
		return &awsdynamodb.TableProps{
			PartitionKey: pk,
			SortKey:      sk,
			BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
			// AWS-managed KMS key: encrypted at rest, and the functions need
			// no kms:* grants (DynamoDB uses the key on their behalf).
			Encryption: awsdynamodb.TableEncryption_AWS_MANAGED,
			PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
				PointInTimeRecoveryEnabled: jsii.Bool(true),
			},
			DeletionProtection: jsii.Bool(retain),
			RemovalPolicy:      s.p.RemovalPolicy,
		}
	}
	s.orders = awsdynamodb.NewTable(s, jsii.String("OrdersTable"), common(
		&awsdynamodb.Attribute{Name: jsii.String("OrderID"), Type: awsdynamodb.AttributeType_STRING}, nil))
	// Every order item carries ListPK = "orders#<shard>": the console lists
	// orders newest first with one Query per shard, never a Scan
	// (docs/state-store.md, "orders-created"). Adding it to a deployed
	// stack is an ordinary update (one index added); orders written before
	// it lack ListPK and are not listed (they are found by id).
	s.orders.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(ordersCreatedIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String("ListPK"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String("CreatedAt"), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType: awsdynamodb.ProjectionType_INCLUDE,
		// Exactly internal/dynamostore.OrdersIndexProjection
		// (TestIndexProjectionMatchesTheStore compares them).
		NonKeyAttributes: jsii.Strings("Workflow", "Version", "Priority"),
	})
	s.state = awsdynamodb.NewTable(s, jsii.String("StateTable"), common(
		&awsdynamodb.Attribute{Name: jsii.String("OrderID"), Type: awsdynamodb.AttributeType_STRING},
		&awsdynamodb.Attribute{Name: jsii.String("Step"), Type: awsdynamodb.AttributeType_NUMBER}))
	// Sparse: only in-flight and failed records carry IdxPK/IdxSK, so a sweep
	// reads only what is due (docs/state-store.md).
	s.state.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(stateDueIndex),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String("IdxPK"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String("IdxSK"), Type: awsdynamodb.AttributeType_NUMBER},
		ProjectionType: awsdynamodb.ProjectionType_INCLUDE,
		// Exactly internal/dynamostore.IndexProjection (TestIndexProjectionMatchesTheStore
		// compares them): the supervisor decides from the index alone, and
		// CreatedAt and WaitingSince bound how long a held step may wait.
		//
		// Changing this list on a deployed stack is not an ordinary update.
		// CloudFormation neither alters nor replaces an existing index when
		// its projection changes: DynamoDB cannot change a projection in
		// place, and the stack update fails ("Cannot update GSI's properties
		// other than Provisioned Throughput and Contributor Insights
		// Specification") and rolls back. The table itself is never replaced
		// for this. To change an existing stack's projection, the index has to
		// be dropped in one deployment and created again in a later one (one
		// index added or deleted per update), during which the scheduler and
		// supervisor cannot query it; a new stack is unaffected.
		NonKeyAttributes: jsii.Strings("StepName", "ProcessState", "LockedBy", "CompleteBy",
			"FailureCount", "Attempt", "UpdatedAt", "LastError", "Shard", "CreatedAt", "WaitingSince"),
	})
}

func (s *SAS) alerting() {
	// A customer-managed key: CloudWatch alarms cannot publish to a topic
	// under the AWS-managed SNS key, but may use one whose policy grants
	// them (the statement below). The functions' roles get their own grants
	// (permissions).
	s.alertKey = awskms.NewKey(s, jsii.String("AlertKey"), &awskms.KeyProps{
		Description:       jsii.String("SAS: encrypts the operator alert topic"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     s.p.RemovalPolicy,
	})
	s.alertKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudWatchAlarmsPublish"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey"),
		Resources:  jsii.Strings("*"), // a key policy's resource is the key itself
	}), nil)
	s.topic = awssns.NewTopic(s, jsii.String("AlertTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("SAS operator alerts"),
		EnforceSSL:  jsii.Bool(true),
		MasterKey:   s.alertKey,
	})
	s.topic.ApplyRemovalPolicy(s.p.RemovalPolicy)
	if s.p.AlertEmail != "" {
		s.topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(s.p.AlertEmail), nil))
	}
	// A bus of the stack's own, not the default one, where anyone with
	// events:PutEvents could forge an alert: its policy (permissions) lets
	// only the scheduler's and supervisor's roles put events on it.
	// Operators' rules match on it (source "sas").
	// Named from the stack, so that its policy (below) names it without
	// referring to the bus itself.
	s.busName = jsii.String(*awscdk.Aws_STACK_NAME() + "-sas-alerts")
	s.bus = awsevents.NewEventBus(s, jsii.String("AlertBus"), &awsevents.EventBusProps{
		Description:  jsii.String("SAS operator alerts"),
		EventBusName: s.busName,
	})
	s.bus.ApplyRemovalPolicy(s.p.RemovalPolicy)
	s.eventBusARN = s.bus.EventBusArn()
}

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
	})
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
			envAgentName:         a.Name,
			envSchedulerQueueURL: *s.schedulerQ.QueueUrl(),
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

// agentQueueARNs lists every agent queue and lane; with nested agent
// stacks, the one ARN of the deployment's queue name prefix, so that the
// policies naming them keep their size (IAM allows 10 KB of inline policy
// per role) and refer to nothing inside the nested stacks.
func (s *SAS) agentQueueARNs() []*string {
	if s.p.NestedAgentStacks {
		return []*string{awscdk.Stack_Of(s).FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("sqs"), Resource: jsii.String(s.names.prefix + "*"), ArnFormat: awscdk.ArnFormat_NO_RESOURCE_NAME,
		})}
	}
	var out []*string
	for _, a := range s.agents {
		out = append(out, a.Queue.QueueArn())
		if a.PriorityQueue != nil {
			out = append(out, a.PriorityQueue.QueueArn())
		}
	}
	return out
}

// permissions writes every function's policy by hand: named actions on named
// resources, nothing from the grant* helpers (they add actions we do not use).
func (s *SAS) permissions() {
	stateIndexARN := jsii.String(*s.state.TableArn() + "/index/" + stateDueIndex)
	tables := []*string{s.orders.TableArn(), s.state.TableArn()}
	consume := []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"}

	for _, f := range []fn{s.scheduler, s.super} {
		// Only its own log group: the function's log streams.
		allow(f.role, []string{"logs:CreateLogStream", "logs:PutLogEvents"}, f.logs.LogGroupArn())
	}

	// Scheduler. TransactWriteItems is authorised per item action, so these
	// cover the atomic submission and every fenced transition.
	allow(s.scheduler.role, []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
		"dynamodb:ConditionCheckItem", "dynamodb:Query"}, tables...)
	allow(s.scheduler.role, []string{"dynamodb:Query"}, stateIndexARN)
	allow(s.scheduler.role, consume, s.intake.QueueArn(), s.schedulerQ.QueueArn(), s.controlQ.QueueArn())
	allow(s.scheduler.role, []string{"sqs:SendMessage"}, append(s.agentQueueARNs(), s.schedulerQ.QueueArn())...)
	if len(s.p.AllowedReplyQueueARNs) > 0 {
		allow(s.scheduler.role, []string{"sqs:SendMessage"}, *jsii.Strings(s.p.AllowedReplyQueueARNs...)...)
	}
	allow(s.scheduler.role, []string{"sns:Publish"}, s.topic.TopicArn())
	allow(s.scheduler.role, []string{"events:PutEvents"}, s.eventBusARN)
	allow(s.scheduler.role, []string{"secretsmanager:GetSecretValue"}, s.signingKey.SecretArn())

	// Each agent: its own queues in, the scheduler queue out, its own logs;
	// no state store, no other agent's queue. A built-in agent with an auth
	// header also reads that secret, and no other role does.
	for i, a := range s.agents {
		if au := s.p.Agents[i].Auth; au != nil {
			if parameterARN.MatchString(au.SecretARN) {
				allow(a.Role, []string{"ssm:GetParameter"}, jsii.String(au.SecretARN))
			} else {
				allow(a.Role, []string{"secretsmanager:GetSecretValue"}, jsii.String(au.SecretARN))
			}
			if au.KMSKeyARN != "" {
				allow(a.Role, []string{"kms:Decrypt"}, jsii.String(au.KMSKeyARN))
			}
		}
		own := []*string{a.Queue.QueueArn()}
		if a.PriorityQueue != nil {
			own = append(own, a.PriorityQueue.QueueArn())
		}
		allow(a.Role, []string{"logs:CreateLogStream", "logs:PutLogEvents"}, a.Logs.LogGroupArn())
		allow(a.Role, consume, own...)
		allow(a.Role, []string{"sqs:SendMessage"}, s.schedulerQ.QueueArn())
	}

	// Supervisor: reads due records from the index, fences them in the table.
	allow(s.super.role, []string{"dynamodb:Query"}, stateIndexARN)
	allow(s.super.role, []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, s.state.TableArn())
	allow(s.super.role, []string{"sqs:SendMessage"}, s.controlQ.QueueArn())
	// The backlog check: queue depth only (ApproximateNumberOfMessages and
	// friends), on the queues a held step's request or reply sits in.
	allow(s.super.role, []string{"sqs:GetQueueAttributes"}, append(s.agentQueueARNs(), s.schedulerQ.QueueArn())...)
	allow(s.super.role, []string{"sns:Publish"}, s.topic.TopicArn())
	allow(s.super.role, []string{"events:PutEvents"}, s.eventBusARN)
	// No cloudwatch:PutMetricData: the supervisor publishes its metrics as
	// Embedded Metric Format lines in its own log stream
	// (internal/supervisor/report.go), which the logs grant above covers.

	// Publishing to the topic encrypts under its key.
	for _, f := range []fn{s.scheduler, s.super} {
		allow(f.role, []string{"kms:Decrypt", "kms:GenerateDataKey"}, s.alertKey.KeyArn())
	}
	s.resourcePolicies()
}

// resourcePolicies fence the resources whose senders matter with policies
// of their own, so that a principal whose identity policy allows more
// (sqs:* on *, an administrator's role) is still refused (docs/trust.md).
// Each is a Deny for every principal but the ones named, conditioned on
// aws:PrincipalArn (a role session's ARN is its role's there).
func (s *SAS) resourcePolicies() {
	roleARNs := func(roles ...awsiam.Role) []*string {
		var out []*string
		for _, r := range roles {
			out = append(out, r.RoleArn())
		}
		return out
	}
	denyAllBut := func(sid string, actions []string, resource *string, principals []*string) awsiam.PolicyStatement {
		op := "ArnNotEquals"
		if s.p.NestedAgentStacks && sid == "OnlyAgentsSend" {
			op = "ArnNotLike" // the agent role path's wildcard
		}
		return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String(sid),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings(actions...),
			Resources:  &[]*string{resource},
			Conditions: &map[string]any{op: map[string]any{"aws:PrincipalArn": principals}},
		})
	}
	// The control queue: the supervisor and the operators.
	control := append(roleARNs(s.super.role), *jsii.Strings(s.p.OperatorRoleARNs...)...)
	s.controlQ.AddToResourcePolicy(denyAllBut("OnlySupervisorAndOperatorsSend", []string{"sqs:SendMessage"}, s.controlQ.QueueArn(), control))
	// The scheduler queue: the agents (replies, requeues) and the scheduler.
	agents := roleARNs(s.scheduler.role)
	if s.p.NestedAgentStacks {
		// Every role under the deployment's agent path: a list of a hundred
		// role ARNs would outgrow the queue policy, and refer into every
		// nested stack.
		agents = append(agents, awscdk.Stack_Of(s).FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("iam"), Region: jsii.String(""), Resource: jsii.String("role"),
			ResourceName: jsii.String(strings.TrimPrefix(*s.agentRolePath(), "/") + "*"),
		}))
	} else {
		for _, a := range s.agents {
			agents = append(agents, a.Role.RoleArn())
		}
	}
	s.schedulerQ.AddToResourcePolicy(denyAllBut("OnlyAgentsSend", []string{"sqs:SendMessage"}, s.schedulerQ.QueueArn(), agents))
	// Each agent's queue and lane: the scheduler alone. The built-in agent
	// calls what a request's action says, checked against the current
	// workflows but not for an order on an earlier version of its workflow
	// (internal/builtinagent): this policy is what fences those.
	for _, a := range s.agents {
		for _, q := range []awssqs.Queue{a.Queue, a.PriorityQueue} {
			if q != nil {
				q.AddToResourcePolicy(denyAllBut("OnlySchedulerSends", []string{"sqs:SendMessage"}, q.QueueArn(), roleARNs(s.scheduler.role)))
			}
		}
	}
	// The signing key: only the scheduler's role is granted it. No
	// resource policy denies the others (AWS::SecretsManager::ResourcePolicy):
	// the emulators the deploy-and-run suite uses reject the resource type,
	// so a principal with account-wide secretsmanager rights can still read
	// it (docs/trust.md, "What is not enforced").
	// The alert bus: the scheduler and the supervisor. The policy is the
	// bus's own Policy property rather than an AWS::Events::EventBusPolicy,
	// which the emulators reject.
	doc := awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{
		denyAllBut("OnlySasPutsAlerts", []string{"events:PutEvents"},
			awscdk.Stack_Of(s).FormatArn(&awscdk.ArnComponents{Service: jsii.String("events"), Resource: jsii.String("event-bus"), ResourceName: s.busName}),
			roleARNs(s.scheduler.role, s.super.role)),
	}})
	s.bus.Node().DefaultChild().(awsevents.CfnEventBus).SetPolicy(doc)
}

func allow(role awsiam.Role, actions []string, resources ...*string) {
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}))
}

func (s *SAS) alarms() {
	action := awscloudwatchactions.NewSnsAction(s.topic)
	alarm := func(scope constructs.Construct, id string, opts awscloudwatch.AlarmProps) {
		if opts.EvaluationPeriods == nil {
			opts.EvaluationPeriods = jsii.Number(1)
		}
		if opts.ComparisonOperator == "" {
			opts.ComparisonOperator = awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD
		}
		if opts.TreatMissingData == "" {
			// Queue and Lambda metrics are absent when idle: idle is healthy.
			opts.TreatMissingData = awscloudwatch.TreatMissingData_NOT_BREACHING
		}
		a := awscloudwatch.NewAlarm(scope, jsii.String(id), &opts)
		a.AddAlarmAction(action)
		a.AddOkAction(action) // tell the operator when it clears, too
	}
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	dlqAlarm := func(scope constructs.Construct, id, what string, q awssqs.Queue) {
		alarm(scope, id+"NotEmpty", awscloudwatch.AlarmProps{
			Metric: q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
				Period: minute, Statistic: jsii.String("Maximum"),
			}),
			AlarmDescription: jsii.String(what + " holds messages that failed " + strconv.Itoa(maxReceiveCount) + " times: inspect and redrive"),
			Threshold:        jsii.Number(0),
		})
	}
	errorsAlarm := func(scope constructs.Construct, id, what string, f awslambda.Function) {
		alarm(scope, id, awscloudwatch.AlarmProps{
			Metric: f.MetricErrors(&awscloudwatch.MetricOptions{
				Period: minute, Statistic: jsii.String("Sum"),
			}),
			AlarmDescription: jsii.String("The " + what + " function failed invocations"),
			Threshold:        jsii.Number(0),
		})
	}

	dlqAlarm(s, "IntakeDLQ", "IntakeDLQ", s.intakeDLQ)
	dlqAlarm(s, "SchedulerDLQ", "SchedulerDLQ", s.schedDLQ)
	dlqAlarm(s, "ControlDLQ", "ControlDLQ", s.controlDLQ)
	errorsAlarm(s, "SchedulerErrors", "Scheduler", s.scheduler.Function)
	errorsAlarm(s, "SupervisorErrors", "Supervisor", s.super.Function)
	for _, a := range s.agents {
		scope := a.scope
		dlqAlarm(scope, "QueueDLQ", "The dead-letter queue of agent "+a.Name, a.DLQ)
		if a.PriorityDLQ != nil {
			dlqAlarm(scope, "PriorityQueueDLQ", "The priority lane's dead-letter queue of agent "+a.Name, a.PriorityDLQ)
		}
		errorsAlarm(scope, "Errors", "agent "+a.Name, a.Function)
	}

	// Published by the supervisor on every sweep, zero included, as EMF with
	// an empty dimension set (internal/supervisor/report.go). No Unit on
	// purpose: an alarm with a unit ignores datapoints published with another.
	alarm(s, "OldestStuckStep", awscloudwatch.AlarmProps{
		Metric: awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:  jsii.String(MetricNamespace),
			MetricName: jsii.String(StuckStepMetric),
			Statistic:  jsii.String("Maximum"),
			Period:     minute,
		}),
		AlarmDescription:  jsii.String("A step has been stuck past its deadline for longer than the supervisor should need to rescue it"),
		Threshold:         jsii.Number(s.p.StuckStepAlarmAge.Seconds()),
		EvaluationPeriods: jsii.Number(2),
	})
	// Each give-up alerts on its own; a burst of them is an outage.
	// GiveUps without dimensions is the supervisor's and the scheduler's
	// (after a step's last failed attempt) together (internal/metrics).
	alarm(s, "GiveUpRate", awscloudwatch.AlarmProps{
		Metric:             supervisorMetric(metrics.GiveUps, "Sum", awscdk.Duration_Minutes(jsii.Number(5))),
		AlarmDescription:   jsii.String("The supervisor or the scheduler gave up on " + strconv.Itoa(s.p.GiveUpAlarmCount) + " or more steps within 5 minutes"),
		Threshold:          jsii.Number(float64(s.p.GiveUpAlarmCount)),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
	})
	// A give-up's alert and compensate request are owed until sent; what
	// stays owed this long keeps failing to go out (the alert topic or the
	// control queue is down), and no one has been told of its give-up.
	alarm(s, "OwedTooLong", awscloudwatch.AlarmProps{
		Metric:            supervisorMetric(metrics.OwedOldestAge, "Maximum", minute),
		AlarmDescription:  jsii.String("A give-up's alert or compensate request has been owed (not sent) for more than " + s.p.OwedAlarmAge.String()),
		Threshold:         jsii.Number(s.p.OwedAlarmAge.Seconds()),
		EvaluationPeriods: jsii.Number(1),
	})
	// A supervisor that is never invoked raises no errors and publishes no
	// metric; missing invocations are the only sign of it.
	alarm(s, "SupervisorNotRunning", awscloudwatch.AlarmProps{
		Metric: s.super.MetricInvocations(&awscloudwatch.MetricOptions{
			Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum"),
		}),
		AlarmDescription:   jsii.String("The supervisor schedule has not run for 5 minutes"),
		Threshold:          jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_BREACHING,
	})
}

// supervisorMetric is one of the supervisor's EMF metrics
// (internal/supervisor/report.go), summed or maxed over period.
func supervisorMetric(name, statistic string, period awscdk.Duration) awscloudwatch.IMetric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String(MetricNamespace), MetricName: jsii.String(name),
		Statistic: jsii.String(statistic), Period: period,
	})
}

// dashboard is the deployment at a glance in CloudWatch (docs/console.md,
// "Metrics"): the supervisor's sweeps, every queue's depth and oldest
// message, and each function's duration and errors.
func (s *SAS) dashboard() {
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12), Height: jsii.Number(6),
		})
	}
	type queue struct {
		name string
		q    awssqs.Queue
	}
	queues := []queue{{"intake", s.intake}, {"scheduler", s.schedulerQ}, {"control", s.controlQ}}
	dlqs := []queue{{"intake", s.intakeDLQ}, {"scheduler", s.schedDLQ}, {"control", s.controlDLQ}}
	durations := []awscloudwatch.IMetric{
		s.scheduler.Function.MetricDuration(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("p99"), Label: jsii.String("scheduler p99")}),
		s.super.Function.MetricDuration(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("p99"), Label: jsii.String("supervisor p99")}),
	}
	errs := []awscloudwatch.IMetric{
		s.scheduler.Function.MetricErrors(&awscloudwatch.MetricOptions{Period: minute, Label: jsii.String("scheduler")}),
		s.super.Function.MetricErrors(&awscloudwatch.MetricOptions{Period: minute, Label: jsii.String("supervisor")}),
	}
	for _, a := range s.agents {
		queues = append(queues, queue{"agent " + a.Name, a.Queue})
		dlqs = append(dlqs, queue{"agent " + a.Name, a.DLQ})
		if a.PriorityQueue != nil {
			queues = append(queues, queue{"agent " + a.Name + " lane", a.PriorityQueue})
			dlqs = append(dlqs, queue{"agent " + a.Name + " lane", a.PriorityDLQ})
		}
		durations = append(durations,
			a.Function.MetricDuration(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("p50"), Label: jsii.String(a.Name + " p50")}),
			a.Function.MetricDuration(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("p99"), Label: jsii.String(a.Name + " p99")}))
		errs = append(errs, a.Function.MetricErrors(&awscloudwatch.MetricOptions{Period: minute, Label: jsii.String(a.Name)}))
	}
	var depth, age, dead []awscloudwatch.IMetric
	for _, q := range queues {
		depth = append(depth, q.q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(q.name)}))
		age = append(age, q.q.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(q.name)}))
	}
	for _, q := range dlqs {
		dead = append(dead, q.q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(q.name)}))
	}
	d := awscloudwatch.NewDashboard(s, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{})
	d.AddWidgets(
		graph("Oldest stuck step (s)", supervisorMetric(StuckStepMetric, "Maximum", minute)),
		graph("Supervisor: rescues, waits, give-ups, held for a pause",
			supervisorMetric("Rescues", "Sum", minute), supervisorMetric("Waits", "Sum", minute),
			supervisorMetric("GiveUps", "Sum", minute), supervisorMetric("Held", "Sum", minute),
			supervisorMetric(metrics.LostRaces, "Sum", minute)),
	)
	d.AddWidgets(graph("Queue depth (visible)", depth...), graph("Oldest message age (s)", age...))
	d.AddWidgets(graph("Dead letters", dead...), graph("Function errors", errs...))
	d.AddWidgets(graph("Function duration (ms): agents' batches", durations...))

	// The per-step metrics (internal/metrics, docs/observability.md).
	sum := func(name string) awscloudwatch.IMetric { return supervisorMetric(name, "Sum", minute) }
	d.AddWidgets(
		graph("Steps: done, failed, failed attempts, retries, give-ups",
			sum(metrics.StepsDone), sum(metrics.StepsFailed), sum(metrics.StepsTransient), sum(metrics.Retries), sum(metrics.GiveUps)),
		graph("Orders: submitted, processed, compensations started and finished",
			sum(metrics.OrdersSubmitted), sum(metrics.OrdersProcessed), sum(metrics.CompensationsStarted), sum(metrics.CompensationsFinished)),
	)
	d.AddWidgets(graph("Owed effects of give-ups: count, oldest age (s)",
		supervisorMetric(metrics.OwedEffects, "Maximum", minute), supervisorMetric(metrics.OwedOldestAge, "Maximum", minute)))
	var wait, exec, outcomes []awscloudwatch.IMetric
	for _, a := range s.agents {
		byAgent := func(name, statistic, label string) awscloudwatch.IMetric {
			return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String(MetricNamespace), MetricName: jsii.String(name),
				DimensionsMap: &map[string]*string{metrics.DimAgent: jsii.String(a.Name)},
				Statistic:     jsii.String(statistic), Period: minute, Label: jsii.String(label),
			})
		}
		wait = append(wait, byAgent(metrics.QueueWait, "p50", a.Name+" p50"), byAgent(metrics.QueueWait, "p99", a.Name+" p99"))
		exec = append(exec, byAgent(metrics.ExecutionTime, "p50", a.Name+" p50"), byAgent(metrics.ExecutionTime, "p99", a.Name+" p99"))
		for _, o := range []string{metrics.AgentDone, metrics.AgentFailed, metrics.AgentTransient, metrics.AgentNoOutcome} {
			outcomes = append(outcomes, byAgent(o, "Sum", a.Name+" "+o))
		}
	}
	d.AddWidgets(graph("Queue wait (ms) by agent", wait...), graph("Execution time (ms) by agent", exec...))
	d.AddWidgets(graph("Agents' outcomes", outcomes...))
}

// outputs name what a client or an operator needs. Under a construct id of
// "Default" (what infra/main.go uses) their names are exactly these;
// elsewhere CDK prefixes the path and appends a hash, as for any construct.
func (s *SAS) outputs() {
	out := func(id string, value *string, desc string) {
		awscdk.NewCfnOutput(s, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
	}
	out("IntakeQueueUrl", s.intake.QueueUrl(), "SAS_INTAKE_QUEUE_URL: applications send orders here")
	out("IntakeQueueArn", s.intake.QueueArn(), "grant sqs:SendMessage on this to submitters")
	out("SchedulerQueueUrl", s.schedulerQ.QueueUrl(), "SAS_SCHEDULER_QUEUE_URL")
	out("ControlQueueUrl", s.controlQ.QueueUrl(), "SAS_CONTROL_QUEUE_URL: sasctl resubmit and compensate send here (operators only)")
	out("AlertBusName", s.bus.EventBusName(), "SAS_EVENT_BUS_NAME: the event bus alerts go to")
	out("IntakeDLQUrl", s.intakeDLQ.QueueUrl(), "intake dead-letter queue")
	out("SchedulerDLQUrl", s.schedDLQ.QueueUrl(), "scheduler dead-letter queue")
	if s.p.NestedAgentStacks {
		// Each agent's queues and function are its nested stack's; listing
		// them here would refer into every one of them, and a hundred
		// agents' URLs outgrow an output's value.
		out("AgentQueuePrefix", jsii.String(s.names.prefix), "every agent queue's name starts with this (the deployment file names each)")
	} else {
		out("AgentQueues", jsii.String(s.agentQueuesJSON(false)), "SAS_AGENT_QUEUES: each agent's queue and priority lane")
		out("AgentDLQs", jsii.String(s.agentQueuesJSON(true)), "each agent's dead-letter queues, as SAS_AGENT_QUEUES names its queues")
		fns := map[string]string{}
		for _, a := range s.agents {
			fns[a.Name] = *a.Function.FunctionName()
		}
		b, _ := json.Marshal(fns) // sorted keys: the same template on every synth
		out("AgentFunctions", jsii.String(string(b)), "each agent's function name")
	}
	if len(s.agents) == 1 && !s.p.NestedAgentStacks {
		// The names of single-agent deployments (sasctl, the e2e test).
		a := s.agents[0]
		out("AgentQueueUrl", a.Queue.QueueUrl(), "SAS_AGENT_QUEUE_URL (agent "+a.Name+")")
		out("AgentDLQUrl", a.DLQ.QueueUrl(), "agent dead-letter queue (agent "+a.Name+")")
		out("AgentFunctionName", a.Function.FunctionName(), "agent function (agent "+a.Name+")")
	}
	out("OrdersTableName", s.orders.TableName(), "SAS_ORDERS_TABLE")
	out("StateTableName", s.state.TableName(), "SAS_STATE_TABLE")
	out("AlertTopicArn", s.topic.TopicArn(), "SAS_ALERT_TOPIC_ARN")
	out("SchedulerFunctionName", s.scheduler.FunctionName(), "scheduler function")
	out("SupervisorFunctionName", s.super.FunctionName(), "supervisor function")
}

func seconds(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// merge returns the union of the maps; later maps win.
func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
