package sascdk

import (
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

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
		// Only this account's alarms: without it, CloudWatch acting for an
		// alarm in any account could use the key (the confused deputy).
		Conditions: &map[string]any{
			"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Stack_Of(s).Account()},
			"ArnLike": map[string]any{"aws:SourceArn": awscdk.Stack_Of(s).FormatArn(&awscdk.ArnComponents{
				Service: jsii.String("cloudwatch"), Resource: jsii.String("alarm"), ResourceName: jsii.String("*"),
				ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
			})},
		},
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
		graph("Orders: submitted, processed, rejected, compensations started and finished",
			sum(metrics.OrdersSubmitted), sum(metrics.OrdersProcessed), sum(metrics.OrdersRejected), sum(metrics.CompensationsStarted), sum(metrics.CompensationsFinished)),
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
