package main

import (
	"fmt"
	"path/filepath"
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
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Names fixed by the contract in docs/state-store.md.
const (
	stateDueIndex = "state-due"
	// MetricNamespace and StuckStepMetric are what the supervisor publishes.
	MetricNamespace = "SAS"
	StuckStepMetric = "OldestStuckStepAgeSeconds"
)

// Function sizing. The scheduler and supervisor do a handful of DynamoDB and
// SQS calls per message; 30s and 60s are generous ceilings, not targets.
const (
	schedulerTimeout  = 30 * time.Second
	supervisorTimeout = 60 * time.Second
	// maxReceiveCount is how often a message may fail before its DLQ; 5 is
	// AWS's advice for Lambda sources, so throttling alone rarely gets there.
	maxReceiveCount = 5
	batchSize       = 10
	batchingWindow  = time.Second
)

// agentTimeout leaves the agent room to notice the step deadline, stop and
// return after it: the agent itself never works past CompleteBy.
func agentTimeout(step time.Duration) time.Duration { return step + 15*time.Second }

// NewStack builds the SAS stack: queues, state store, the three functions,
// their event sources, the supervisor's schedule, least-privilege roles,
// alerting and alarms. It panics on invalid props (call Validate first for
// an error instead), as constructs do.
func NewStack(scope constructs.Construct, id string, props StackProps) awscdk.Stack {
	if err := props.Validate(); err != nil {
		panic(fmt.Sprintf("NewStack %s: %v", id, err))
	}
	p := props.withDefaults()
	stack := awscdk.NewStack(scope, &id, &p.StackProps)
	s := &sasStack{Stack: stack, p: p}

	s.queues()
	s.tables()
	s.alerting()
	s.functions()
	s.eventSources()
	s.schedule()
	s.permissions()
	s.alarms()
	s.outputs()
	return stack
}

// sasStack carries the constructs between the build steps of NewStack.
type sasStack struct {
	awscdk.Stack
	p StackProps

	intake, intakeDLQ       awssqs.Queue
	schedulerQ, schedDLQ    awssqs.Queue
	agentQ, agentDLQ        awssqs.Queue
	orders, state           awsdynamodb.Table
	topic                   awssns.Topic
	eventBusARN             *string
	scheduler, agent, super fn
}

// fn is a function with the role we write its policy into.
type fn struct {
	awslambda.Function
	role awsiam.Role
	logs awslogs.LogGroup
}

// queueMaxMessageBytes is every queue's MaximumMessageSize: the limit the
// code holds to (internal/sqslimits.MaxBodyBytes; a test there checks they
// agree). Set, not left to the default, because the default changed in 2025
// (256 KiB to 1 MiB) and the code must not assume more than the queue takes.
const queueMaxMessageBytes = 256 * 1024

// queue creates a queue and its dead-letter queue, both encrypted with
// SQS-managed keys (no KMS grants needed) and refusing plain HTTP.
func (s *sasStack) queue(id string, visibility time.Duration) (awssqs.Queue, awssqs.Queue) {
	dlq := awssqs.NewQueue(s.Stack, jsii.String(id+"DLQ"), &awssqs.QueueProps{
		Encryption: awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL: jsii.Bool(true),
		// The maximum, and longer than the source's: a message keeps its
		// original enqueue time when it moves to the DLQ, and the operator
		// needs days to look at it.
		RetentionPeriod:     awscdk.Duration_Days(jsii.Number(14)),
		MaxMessageSizeBytes: jsii.Number(queueMaxMessageBytes),
		RemovalPolicy:       s.p.RemovalPolicy,
	})
	q := awssqs.NewQueue(s.Stack, jsii.String(id), &awssqs.QueueProps{
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

func (s *sasStack) queues() {
	// Lambda's advice: visibility ≥ 6× the consumer's timeout, so a message
	// is not handed out again while throttled retries of it may still run.
	s.intake, s.intakeDLQ = s.queue("IntakeQueue", 6*schedulerTimeout)
	s.schedulerQ, s.schedDLQ = s.queue("SchedulerQueue", 6*schedulerTimeout)
	s.agentQ, s.agentDLQ = s.queue("AgentQueue", 6*agentTimeout(s.p.StepTimeout))
}

func (s *sasStack) tables() {
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
	s.orders = awsdynamodb.NewTable(s.Stack, jsii.String("OrdersTable"), common(
		&awsdynamodb.Attribute{Name: jsii.String("OrderID"), Type: awsdynamodb.AttributeType_STRING}, nil))
	s.state = awsdynamodb.NewTable(s.Stack, jsii.String("StateTable"), common(
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

func (s *sasStack) alerting() {
	// Not KMS-encrypted on purpose: CloudWatch alarms cannot publish to a
	// topic under the AWS-managed SNS key.
	s.topic = awssns.NewTopic(s.Stack, jsii.String("AlertTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("SAS operator alerts"),
		EnforceSSL:  jsii.Bool(true),
	})
	s.topic.ApplyRemovalPolicy(s.p.RemovalPolicy)
	if s.p.AlertEmail != "" {
		s.topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(s.p.AlertEmail), nil))
	}
	// The default bus: operators' rules live there, and its ARN can be
	// named, so PutEvents needs no wildcard.
	s.eventBusARN = s.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("events"),
		Resource:     jsii.String("event-bus"),
		ResourceName: jsii.String("default"),
	})
}

func (s *sasStack) function(id, name, description string, timeout time.Duration, recursive awslambda.RecursiveLoop, env map[string]string) fn {
	arch := awslambda.Architecture_ARM_64()
	if s.p.Arch == ArchX8664 {
		arch = awslambda.Architecture_X86_64()
	}
	// An explicit role with no managed policies: AWSLambdaBasicExecutionRole
	// would grant logs:* on "*"; permissions() names every resource instead.
	role := awsiam.NewRole(s.Stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("SAS " + name + " function"),
	})
	logs := awslogs.NewLogGroup(s.Stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: s.p.RemovalPolicy,
	})
	vars := map[string]*string{}
	for k, v := range env {
		if v != "" {
			vars[k] = jsii.String(v)
		}
	}
	f := awslambda.NewFunction(s.Stack, jsii.String(id), &awslambda.FunctionProps{
		Description:  jsii.String(description),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Handler:      jsii.String("bootstrap"),
		Architecture: arch,
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(s.p.DistDir, s.p.goarch(), name)), nil),
		Role:         role,
		LogGroup:     logs,
		Timeout:      seconds(timeout),
		MemorySize:   jsii.Number(256),
		Environment:  &vars,
		// An order travels scheduler → agent queue → agent → scheduler queue
		// → scheduler once per step, in one trace, so Lambda's recursive-loop
		// detection would drop a long workflow after about 16 hops. Runaways
		// are bounded instead by fenced writes, FailureCount and the DLQs;
		// the supervisor starts fresh traces, so it keeps the default.
		RecursiveLoop: recursive,
	})
	// aws-cdk-lib makes the function depend on its role and the role's policy
	// (so it never runs before its permissions exist); the role half is
	// redundant with Role: GetAtt, which cfn-lint's W3005 flags. Silenced here,
	// per resource, rather than for the whole template.
	f.Node().DefaultChild().(awscdk.CfnResource).AddMetadata(jsii.String("cfn-lint"), map[string]any{
		"config": map[string]any{"ignore_checks": []string{"W3005"}},
	})
	return fn{Function: f, role: role, logs: logs}
}

func (s *sasStack) functions() {
	p := s.p
	tables := map[string]string{
		"SAS_ORDERS_TABLE": *s.orders.TableName(),
		"SAS_STATE_TABLE":  *s.state.TableName(),
		"SAS_INDEX_SHARDS": strconv.Itoa(p.IndexShards),
	}
	alerts := map[string]string{
		"SAS_ALERT_TOPIC_ARN": *s.topic.TopicArn(),
		"SAS_EVENT_BUS_NAME":  "default",
	}
	replyURLs := make([]string, 0, len(p.AllowedReplyQueueARNs))
	for _, arn := range p.AllowedReplyQueueARNs {
		u, _ := replyQueueURL(arn) // checked by Validate
		replyURLs = append(replyURLs, u)
	}

	s.scheduler = s.function("Scheduler", "scheduler",
		"SAS scheduler: intake, step dispatch and agent replies", schedulerTimeout, awslambda.RecursiveLoop_ALLOW,
		merge(tables, alerts, map[string]string{
			"SAS_INTAKE_QUEUE_URL":     *s.intake.QueueUrl(),
			"SAS_SCHEDULER_QUEUE_URL":  *s.schedulerQ.QueueUrl(),
			"SAS_AGENT_QUEUE_URL":      *s.agentQ.QueueUrl(),
			"SAS_ALLOWED_REPLY_QUEUES": strings.Join(replyURLs, ","),
			"SAS_STEP_TIMEOUT":         p.StepTimeout.String(),
			"SAS_PICKUP_TIMEOUT":       p.PickupTimeout.String(),
		}))
	if p.PaymentsURL == "" {
		// The agent refuses to start without it; synth still works so that
		// the template can be checked without a payments service.
		awscdk.Annotations_Of(s.Stack).AddWarningV2(jsii.String("sas:paymentsUrl"), jsii.String(
			"no payments URL: the agent will fail at start-up until you deploy with -c paymentsUrl=https://..."))
	}
	s.agent = s.function("Agent", "agent",
		"SAS agent: calls the payments service for one step", agentTimeout(p.StepTimeout), awslambda.RecursiveLoop_ALLOW,
		merge(tables, map[string]string{
			"SAS_SCHEDULER_QUEUE_URL": *s.schedulerQ.QueueUrl(),
			// Its own queue: a request left without an outcome gets a short
			// visibility backoff there (docs/protocol.md, "Agent").
			"SAS_AGENT_QUEUE_URL": *s.agentQ.QueueUrl(),
			"SAS_PAYMENTS_URL":    p.PaymentsURL,
		}))
	s.super = s.function("Supervisor", "supervisor",
		"SAS supervisor: rescues steps past their deadline", supervisorTimeout, awslambda.RecursiveLoop_TERMINATE,
		merge(tables, alerts, map[string]string{
			"SAS_SCHEDULER_QUEUE_URL": *s.schedulerQ.QueueUrl(),
			// Read, with the scheduler queue, for its depth: a held step
			// past its deadline is waited on while they hold messages.
			"SAS_AGENT_QUEUE_URL": *s.agentQ.QueueUrl(),
			// The same step timeout as the scheduler's: the supervisor builds
			// the same workflows to know each step's limits.
			"SAS_STEP_TIMEOUT":   p.StepTimeout.String(),
			"SAS_MAX_FAILURES":   strconv.Itoa(p.MaxFailures),
			"SAS_PICKUP_TIMEOUT": p.PickupTimeout.String(),
		}))
	// A sweep that failed or waited is replaced by the next one a minute
	// later; Lambda's own async retries would only replay a stale one.
	s.super.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(1)),
	})
}

// eventSources wires the queues to their consumers with partial batch
// responses, so one bad message never sends its whole batch back.
func (s *sasStack) eventSources() {
	wire := func(id string, f fn, q awssqs.Queue, maxConcurrency float64) {
		f.AddEventSourceMapping(jsii.String(id), &awslambda.EventSourceMappingOptions{
			EventSourceArn:          q.QueueArn(),
			BatchSize:               jsii.Number(batchSize),
			MaxBatchingWindow:       seconds(batchingWindow),
			ReportBatchItemFailures: jsii.Bool(true),
			// Caps what one source can take from the shared account pool,
			// and keeps a flood on one queue from starving the other.
			MaxConcurrency: jsii.Number(maxConcurrency),
		})
	}
	wire("FromIntake", s.scheduler, s.intake, 10)
	wire("FromSchedulerQueue", s.scheduler, s.schedulerQ, 10)
	wire("FromAgentQueue", s.agent, s.agentQ, 20)
}

func (s *sasStack) schedule() {
	rule := awsevents.NewRule(s.Stack, jsii.String("SupervisorSchedule"), &awsevents.RuleProps{
		Description: jsii.String("Runs the SAS supervisor sweep"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
	})
	rule.AddTarget(awseventstargets.NewLambdaFunction(s.super.Function, &awseventstargets.LambdaFunctionProps{
		// A sweep older than the next one is worthless: let it go.
		MaxEventAge:   awscdk.Duration_Minutes(jsii.Number(1)),
		RetryAttempts: jsii.Number(1),
	}))
}

// permissions writes every function's policy by hand: named actions on named
// resources, nothing from the grant* helpers (they add actions we do not use).
func (s *sasStack) permissions() {
	stateIndexARN := jsii.String(*s.state.TableArn() + "/index/" + stateDueIndex)
	tables := []*string{s.orders.TableArn(), s.state.TableArn()}
	consume := []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ChangeMessageVisibility"}

	for _, f := range []fn{s.scheduler, s.agent, s.super} {
		// Only its own log group: the function's log streams.
		allow(f, []string{"logs:CreateLogStream", "logs:PutLogEvents"}, f.logs.LogGroupArn())
	}

	// Scheduler. TransactWriteItems is authorised per item action, so these
	// cover the atomic submission and every fenced transition.
	allow(s.scheduler, []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
		"dynamodb:ConditionCheckItem", "dynamodb:Query"}, tables...)
	allow(s.scheduler, []string{"dynamodb:Query"}, stateIndexARN)
	allow(s.scheduler, consume, s.intake.QueueArn(), s.schedulerQ.QueueArn())
	allow(s.scheduler, []string{"sqs:SendMessage"}, s.agentQ.QueueArn(), s.schedulerQ.QueueArn())
	if len(s.p.AllowedReplyQueueARNs) > 0 {
		allow(s.scheduler, []string{"sqs:SendMessage"}, *jsii.Strings(s.p.AllowedReplyQueueARNs...)...)
	}
	allow(s.scheduler, []string{"sns:Publish"}, s.topic.TopicArn())
	allow(s.scheduler, []string{"events:PutEvents"}, s.eventBusARN)

	// Agent: its queue in, the scheduler queue out; no state store at all.
	allow(s.agent, consume, s.agentQ.QueueArn())
	allow(s.agent, []string{"sqs:SendMessage"}, s.schedulerQ.QueueArn())

	// Supervisor: reads due records from the index, fences them in the table.
	allow(s.super, []string{"dynamodb:Query"}, stateIndexARN)
	allow(s.super, []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, s.state.TableArn())
	allow(s.super, []string{"sqs:SendMessage"}, s.schedulerQ.QueueArn())
	// The backlog check: queue depth only (ApproximateNumberOfMessages and
	// friends), on the two queues a held step's request or reply sits in.
	allow(s.super, []string{"sqs:GetQueueAttributes"}, s.agentQ.QueueArn(), s.schedulerQ.QueueArn())
	allow(s.super, []string{"sns:Publish"}, s.topic.TopicArn())
	allow(s.super, []string{"events:PutEvents"}, s.eventBusARN)
	// No cloudwatch:PutMetricData: the supervisor publishes its metrics as
	// Embedded Metric Format lines in its own log stream
	// (internal/supervisor/report.go), which the logs grant above covers.
}

func allow(f fn, actions []string, resources ...*string) {
	f.role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}))
}

func (s *sasStack) alarms() {
	action := awscloudwatchactions.NewSnsAction(s.topic)
	alarm := func(id string, opts awscloudwatch.AlarmProps) {
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
		a := awscloudwatch.NewAlarm(s.Stack, jsii.String(id), &opts)
		a.AddAlarmAction(action)
		a.AddOkAction(action) // tell the operator when it clears, too
	}
	minute := awscdk.Duration_Minutes(jsii.Number(1))

	dlqs := []struct {
		id string
		q  awssqs.Queue
	}{{"IntakeDLQ", s.intakeDLQ}, {"SchedulerDLQ", s.schedDLQ}, {"AgentDLQ", s.agentDLQ}}
	for _, d := range dlqs {
		alarm(d.id+"NotEmpty", awscloudwatch.AlarmProps{
			Metric: d.q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
				Period: minute, Statistic: jsii.String("Maximum"),
			}),
			AlarmDescription: jsii.String(d.id + " holds messages that failed " + strconv.Itoa(maxReceiveCount) + " times: inspect and redrive"),
			Threshold:        jsii.Number(0),
		})
	}
	fns := []struct {
		id string
		f  fn
	}{{"Scheduler", s.scheduler}, {"Agent", s.agent}, {"Supervisor", s.super}}
	for _, f := range fns {
		alarm(f.id+"Errors", awscloudwatch.AlarmProps{
			Metric: f.f.MetricErrors(&awscloudwatch.MetricOptions{
				Period: minute, Statistic: jsii.String("Sum"),
			}),
			AlarmDescription: jsii.String("The " + f.id + " function failed invocations"),
			Threshold:        jsii.Number(0),
		})
	}

	// Published by the supervisor on every sweep, zero included, as EMF with
	// an empty dimension set (internal/supervisor/report.go). No Unit on
	// purpose: an alarm with a unit ignores datapoints published with another.
	alarm("OldestStuckStep", awscloudwatch.AlarmProps{
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
	// A supervisor that is never invoked raises no errors and publishes no
	// metric; missing invocations are the only sign of it.
	alarm("SupervisorNotRunning", awscloudwatch.AlarmProps{
		Metric: s.super.MetricInvocations(&awscloudwatch.MetricOptions{
			Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum"),
		}),
		AlarmDescription:   jsii.String("The supervisor schedule has not run for 5 minutes"),
		Threshold:          jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_BREACHING,
	})
}

func (s *sasStack) outputs() {
	out := func(id string, value *string, desc string) {
		awscdk.NewCfnOutput(s.Stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
	}
	out("IntakeQueueUrl", s.intake.QueueUrl(), "SAS_INTAKE_QUEUE_URL: applications send orders here")
	out("IntakeQueueArn", s.intake.QueueArn(), "grant sqs:SendMessage on this to submitters")
	out("SchedulerQueueUrl", s.schedulerQ.QueueUrl(), "SAS_SCHEDULER_QUEUE_URL")
	out("AgentQueueUrl", s.agentQ.QueueUrl(), "SAS_AGENT_QUEUE_URL")
	out("IntakeDLQUrl", s.intakeDLQ.QueueUrl(), "intake dead-letter queue")
	out("SchedulerDLQUrl", s.schedDLQ.QueueUrl(), "scheduler dead-letter queue")
	out("AgentDLQUrl", s.agentDLQ.QueueUrl(), "agent dead-letter queue")
	out("OrdersTableName", s.orders.TableName(), "SAS_ORDERS_TABLE")
	out("StateTableName", s.state.TableName(), "SAS_STATE_TABLE")
	out("AlertTopicArn", s.topic.TopicArn(), "SAS_ALERT_TOPIC_ARN")
	out("SchedulerFunctionName", s.scheduler.FunctionName(), "scheduler function")
	out("AgentFunctionName", s.agent.FunctionName(), "agent function")
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
