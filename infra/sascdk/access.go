package sascdk

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

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

// everyAgentQueueARN is agentQueueARNs and, without nested agent stacks
// (whose prefix covers them), replyQueueARNs.
func (s *SAS) everyAgentQueueARN() []*string {
	if s.p.NestedAgentStacks {
		return s.agentQueueARNs()
	}
	return append(s.agentQueueARNs(), s.replyQueueARNs()...)
}

// replyQueueARNs lists every agent's reply queue; with nested agent
// stacks, the one ARN of the deployment's prefix and the replies' suffix.
func (s *SAS) replyQueueARNs() []*string {
	if s.p.NestedAgentStacks {
		return []*string{awscdk.Stack_Of(s).FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("sqs"), Resource: jsii.String(s.names.prefix + "*" + repliesSuffix), ArnFormat: awscdk.ArnFormat_NO_RESOURCE_NAME,
		})}
	}
	var out []*string
	for _, a := range s.agents {
		out = append(out, a.Replies.QueueArn())
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
	allow(s.scheduler.role, consume, append(s.replyQueueARNs(), s.intake.QueueArn(), s.schedulerQ.QueueArn(), s.controlQ.QueueArn())...)
	// Besides the agents' queues: the queues it reads, since a message on
	// its last receives before the DLQ is renewed by a fresh copy sent to
	// the queue it came from (internal/scheduler/renew.go).
	allow(s.scheduler.role, []string{"sqs:SendMessage"}, append(s.everyAgentQueueARN(), s.schedulerQ.QueueArn(), s.intake.QueueArn(), s.controlQ.QueueArn())...)
	if replies := append(append([]string(nil), s.p.AllowedReplyQueueARNs...), s.tenantReplyQueueARNs()...); len(replies) > 0 {
		allow(s.scheduler.role, []string{"sqs:SendMessage"}, *jsii.Strings(replies...)...)
	}
	allow(s.scheduler.role, []string{"sns:Publish"}, s.topic.TopicArn())
	allow(s.scheduler.role, []string{"events:PutEvents"}, s.eventBusARN)
	allow(s.scheduler.role, []string{"secretsmanager:GetSecretValue"}, s.signingKey.SecretArn())

	// Each agent: its own queues in, its own reply queue out, its own logs;
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
		allow(a.Role, []string{"sqs:SendMessage"}, a.Replies.QueueArn())
	}

	// Supervisor: reads due records from the index, fences them in the table.
	allow(s.super.role, []string{"dynamodb:Query"}, stateIndexARN)
	allow(s.super.role, []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, s.state.TableArn())
	allow(s.super.role, []string{"sqs:SendMessage"}, s.controlQ.QueueArn())
	// The backlog check: queue depth only (ApproximateNumberOfMessages and
	// friends), on the queues a held step's request or reply sits in.
	allow(s.super.role, []string{"sqs:GetQueueAttributes"}, append(s.everyAgentQueueARN(), s.schedulerQ.QueueArn())...)
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

// The actions a queue policy fences (resourcePolicies, docs/trust.md):
// sending; consuming, which reads other principals' messages (payloads,
// signatures) and takes them away; and administering, which could lift the
// fences themselves (the policy is a queue attribute) or empty the queue.
// GetQueueAttributes stays open: it reads counts and settings, and the
// supervisor's backlog check and the console read depths with it.
var (
	queueSendActions    = []string{"sqs:SendMessage"}
	queueConsumeActions = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"}
	queueAdminActions   = []string{"sqs:SetQueueAttributes", "sqs:AddPermission", "sqs:RemovePermission",
		"sqs:PurgeQueue", "sqs:DeleteQueue", "sqs:TagQueue", "sqs:UntagQueue",
		"sqs:StartMessageMoveTask", "sqs:CancelMessageMoveTask"}
)

// Sids of the statements every queue policy carries besides its sender
// fence (the trust test finds them by these).
const (
	sidConsume  = "OnlyConsumersReceive"
	sidAdmin    = "OnlyDeployersAdminister"
	sidNoSender = "NobodySends"
)

// bootstrapQualifierContext is the CDK context key of the bootstrap
// qualifier, which names the bootstrap's roles.
const bootstrapQualifierContext = "@aws-cdk/core:bootstrapQualifier"

// deployers are the principals that may administer the queues: Props.
// DeployerRoleARNs, or CDK's bootstrap CloudFormation execution role, and
// always the account's root user (so that a wrong list cannot lock the
// account out of its own queues).
func (s *SAS) deployers() []*string {
	stack := awscdk.Stack_Of(s)
	out := []*string{stack.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("iam"), Region: jsii.String(""), Resource: jsii.String("root"), ArnFormat: awscdk.ArnFormat_NO_RESOURCE_NAME,
	})}
	if len(s.p.DeployerRoleARNs) > 0 {
		return append(out, *jsii.Strings(s.p.DeployerRoleARNs...)...)
	}
	qualifier := "hnb659fds" // CDK's default
	if q, ok := s.Node().TryGetContext(jsii.String(bootstrapQualifierContext)).(string); ok && q != "" {
		qualifier = q
	}
	return append(out, stack.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("iam"), Region: jsii.String(""), Resource: jsii.String("role"),
		ResourceName: jsii.String("cdk-" + qualifier + "-cfn-exec-role-" + *stack.Account() + "-" + *stack.Region()),
	}))
}

// resourcePolicies fence the resources whose senders matter with policies
// of their own, so that a principal whose identity policy allows more
// (sqs:* on *, an administrator's role) is still refused (docs/trust.md).
// Each is a Deny for every principal but the ones named, conditioned on
// aws:PrincipalArn (a role session's ARN is its role's there).
//
// Every queue, dead-letter queues included, is fenced three ways: who may
// send (its senders; a dead-letter queue: nobody, SQS moves messages there
// itself), who may receive, delete or hide its messages (its consumer; a
// dead-letter queue: the operators, who redrive it), and who may change,
// purge or delete it (the deployers).
func (s *SAS) resourcePolicies() {
	roleARNs := func(roles ...awsiam.Role) []*string {
		var out []*string
		for _, r := range roles {
			out = append(out, r.RoleArn())
		}
		return out
	}
	denyAllBut := func(sid string, actions []string, resource *string, principals []*string) awsiam.PolicyStatement {
		return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String(sid),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings(actions...),
			Resources:  &[]*string{resource},
			Conditions: &map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": principals}},
		})
	}
	deployers := s.deployers()
	operators := *jsii.Strings(s.p.OperatorRoleARNs...)
	// fence writes a queue's three fences; a nil senders list means the
	// queue's senders are the deployer's to grant (the intake queue).
	fence := func(q awssqs.Queue, sendSid string, senders, consumers []*string) {
		if senders != nil {
			q.AddToResourcePolicy(denyAllBut(sendSid, queueSendActions, q.QueueArn(), senders))
		}
		q.AddToResourcePolicy(denyAllBut(sidConsume, queueConsumeActions, q.QueueArn(), consumers))
		q.AddToResourcePolicy(denyAllBut(sidAdmin, queueAdminActions, q.QueueArn(), deployers))
	}
	// A dead-letter queue: nobody sends (SQS moves a message there itself,
	// which no queue policy governs), the operators and deployers read it
	// (a redrive receives and deletes), the deployers administer it.
	fenceDLQ := func(dlq awssqs.Queue) {
		if dlq == nil {
			return
		}
		dlq.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String(sidNoSender),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings(queueSendActions...),
			Resources:  &[]*string{dlq.QueueArn()},
		}))
		dlq.AddToResourcePolicy(denyAllBut(sidConsume, queueConsumeActions, dlq.QueueArn(), append(append([]*string(nil), operators...), deployers...)))
		dlq.AddToResourcePolicy(denyAllBut(sidAdmin, queueAdminActions, dlq.QueueArn(), deployers))
	}
	scheduler := roleARNs(s.scheduler.role)
	// The intake queue: the submitters the deployer grants; the scheduler
	// consumes it.
	fence(s.intake, "", nil, scheduler)
	// Who may complete a waiting callback step (docs/trust.md, "Completion
	// tokens"), and each tenant's roles, whose orders the scheduler tells
	// by who sent them (docs/trust.md, "Tenants").
	s.allowIntakeSenders("CompletersSend", *jsii.Strings(s.p.CompleterRoleARNs...))
	s.allowIntakeSenders("TenantsSend", s.tenantRoleARNs())
	// The control queue: the supervisor and the operators, and the
	// scheduler's renewed copies of their messages.
	control := append(roleARNs(s.super.role, s.scheduler.role), operators...)
	fence(s.controlQ, "OnlySupervisorAndOperatorsSend", control, scheduler)
	// The scheduler queue: the scheduler alone (its renewed copies and
	// delayed messages); each agent replies on its own queue below.
	fence(s.schedulerQ, "OnlySchedulerSends", scheduler, scheduler)
	for _, dlq := range []awssqs.Queue{s.intakeDLQ, s.schedDLQ, s.controlDLQ} {
		fenceDLQ(dlq)
	}
	// Each agent's queue and lane: the scheduler alone sends, the agent
	// alone consumes. The built-in agent calls what a request's action
	// says, checked against the current workflows but not for an order on
	// an earlier version of its workflow (internal/builtinagent): this
	// policy is what fences those.
	for _, a := range s.agents {
		for _, q := range []awssqs.Queue{a.Queue, a.PriorityQueue} {
			if q != nil {
				fence(q, "OnlySchedulerSends", scheduler, roleARNs(a.Role))
			}
		}
		fenceDLQ(a.DLQ)
		fenceDLQ(a.PriorityDLQ)
		// Its reply queue: the agent alone, and the scheduler's renewed
		// copies; the scheduler alone consumes.
		fence(a.Replies, "OnlyItsAgentSends", roleARNs(a.Role, s.scheduler.role), scheduler)
	}
	// The signing key: only the scheduler's role is granted it. No
	// resource policy denies the others (AWS::SecretsManager::ResourcePolicy):
	// the emulators the deploy-and-run suite uses reject the resource type,
	// so a principal with account-wide secretsmanager rights can still read
	// it (docs/trust.md, "The signing key").
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

// allowIntakeSenders names principals the intake queue's own policy lets
// send, under its own Sid: the completers, the schedules' roles, the
// tenants' roles. None: no statement.
func (s *SAS) allowIntakeSenders(sid string, principals []*string) {
	if len(principals) == 0 {
		return
	}
	s.intake.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String(sid),
		Effect:     awsiam.Effect_ALLOW,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{s.intake.QueueArn()},
		Conditions: &map[string]any{"ArnEquals": map[string]any{"aws:PrincipalArn": principals}},
	}))
}
