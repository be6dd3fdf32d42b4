package sascdk

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/sas-go/sas/internal/sizing"
)

// queueMaxMessageBytes is every queue's MaximumMessageSize: the limit the
// code holds to (internal/sqslimits.MaxBodyBytes; a test there checks they
// agree). Set, not left to the default, because the default changed in 2025
// (256 KiB to 1 MiB) and the code must not assume more than the queue takes.
const queueMaxMessageBytes = 256 * 1024

// queue creates a queue and its dead-letter queue under scope, both
// encrypted with SQS-managed keys (no KMS grants needed) and refusing plain
// HTTP.
func (s *SAS) queue(scope constructs.Construct, id, name string, visibility time.Duration) (awssqs.Queue, awssqs.Queue) {
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
	return s.queueTo(scope, id, name, visibility, dlq), dlq
}

// queueTo creates a queue whose dead letters go to dlq.
func (s *SAS) queueTo(scope constructs.Construct, id, name string, visibility time.Duration, dlq awssqs.Queue) awssqs.Queue {
	var queueName *string
	if name != "" {
		queueName = jsii.String(name)
	}
	return awssqs.NewQueue(scope, jsii.String(id), &awssqs.QueueProps{
		QueueName:         queueName,
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		VisibilityTimeout: seconds(visibility),
		// Long polling is what the Lambda poller uses anyway; this helps the
		// CLI and tests that receive directly.
		ReceiveMessageWaitTime: awscdk.Duration_Seconds(jsii.Number(20)),
		// The supervisor's delivery horizon for an agent's request
		// (sizing.QueueRetention): until it passes, a request may still be
		// delivered, and its step is not re-driven.
		RetentionPeriod:     seconds(sizing.QueueRetention),
		MaxMessageSizeBytes: jsii.Number(queueMaxMessageBytes),
		DeadLetterQueue:     &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(maxReceiveCount)},
		RemovalPolicy:       s.p.RemovalPolicy,
	})
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
		res.Queue, res.DLQ = s.queue(scope, "Queue", s.names.queue(a.Name, ""), vis)
		if a.PriorityConcurrency > 0 {
			res.PriorityQueue, res.PriorityDLQ = s.queue(scope, "PriorityQueue", s.names.queue(a.Name, laneSuffix), vis)
		}
		// Its replies: a queue of its own, which the scheduler reads as
		// from this agent alone (docs/trust.md, "A reply queue per
		// agent"); dead letters to the scheduler queue's DLQ, as replies
		// always went.
		res.Replies = s.queueTo(scope, "Replies", s.names.queue(a.Name, repliesSuffix), sizing.SchedulerVisibility, s.schedDLQ)
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
		// compares them): the supervisor decides from the index alone:
		// StartedAt tells a request that may still be queued from an attempt
		// that started, WaitingSince and CreatedAt bound how long it waits.
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
			"FailureCount", "Attempt", "UpdatedAt", "LastError", "Shard", "CreatedAt", "WaitingSince", "StartedAt"),
	})
}
