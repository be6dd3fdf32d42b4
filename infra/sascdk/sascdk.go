package sascdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
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
// The scheduler's and supervisor's timeouts, the queues' visibility and their
// maxReceiveCount are internal/sizing's, which the test kit and the dev
// server share.
const (
	schedulerTimeout  = sizing.SchedulerTimeout
	supervisorTimeout = sizing.SupervisorTimeout
	// maxReceiveCount is how often a message may fail before its DLQ.
	maxReceiveCount = sizing.MaxReceiveCount
	batchSize       = 10
	batchingWindow  = time.Second
	// schedulerConcurrency caps each of the scheduler's shared event
	// sources (intake, scheduler and control queues).
	schedulerConcurrency = 10
	// replyConcurrency caps the scheduler's event source on each agent's
	// reply queue: Lambda's least MaximumConcurrency, so that one agent's
	// flood takes two invocations and no more.
	replyConcurrency = 2
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
	// scheduleRole is each schedule's role, by schedule name (schedules.go).
	scheduleRole map[string]awsiam.Role
	busName      *string
	eventBusARN  *string
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
	// maxReceiveCount (10) times.
	Queue, DLQ awssqs.Queue
	// PriorityQueue is the priority lane and PriorityDLQ its dead-letter
	// queue; both nil without PriorityConcurrency.
	PriorityQueue, PriorityDLQ awssqs.Queue
	// Replies takes the agent's replies, reports and requeues, and only
	// its own (docs/trust.md, "A reply queue per agent"); its dead letters
	// go to the scheduler queue's DLQ.
	Replies  awssqs.Queue
	Function awslambda.Function
	Role     awsiam.Role
	Logs     awslogs.LogGroup

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
	s.scheduleRoles()
	s.functions()
	s.eventSources()
	s.schedule()
	s.schedules()
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

// ControlDLQ is the control queue's dead-letter queue.
func (s *SAS) ControlDLQ() awssqs.Queue { return s.controlDLQ }

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
	out("ControlDLQUrl", s.controlDLQ.QueueUrl(), "control dead-letter queue (retries and compensations; redrive only what a supervisor or operator sent)")
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
	out("SigningKeySecretArn", s.signingKey.SecretArn(), "the scheduler's signing key (its SAS_SIGNING_KEY_SECRET), the secret to rotate (docs/trust.md)")
	out("SupervisorRoleId", s.super.role.RoleId(), "SAS_SUPERVISOR_SENDER_ID: the supervisor role's unique id, the SQS SenderId of what it sends to the control queue (a console redrive moves back only its messages and the operators')")
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
