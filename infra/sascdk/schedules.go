package sascdk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/internal/sizing"
	"github.com/sas-go/sas/workflow"
)

// Schedule is one schedule of the deployment (docs/schedules.md): an
// EventBridge Scheduler schedule (AWS::Scheduler::Schedule) whose target is
// the intake queue. Each time it falls due, EventBridge Scheduler sends an
// intake naming the schedule and the time the run was scheduled for, with
// a role of the schedule's own that may send to the intake queue and
// nothing else. The run's order id is "<Name>-<scheduled time>", so a
// trigger delivered or retried twice starts one run; Overlap says what a
// run does while the previous one is in flight. There is no scheduler loop
// of the deployment's own.
type Schedule struct {
	// Name is the schedule's name, 1-64 characters of A-Z a-z 0-9 _ -,
	// unique in the deployment: it starts every run's order id.
	Name string
	// Expression is when it runs, in EventBridge Scheduler's syntax:
	// "cron(0 2 * * ? *)" (minutes hours day-of-month month day-of-week
	// year) or "rate(1 hour)". One-time "at(...)" schedules are refused:
	// submit an order instead.
	Expression string
	// TimeZone is the IANA time zone the cron expression is read in
	// ("Europe/Paris"); default UTC.
	TimeZone string
	// FlexibleWindow lets EventBridge Scheduler run the target up to this
	// long after the scheduled time, spreading load (whole minutes, 1 to
	// 1440); 0 turns the window off. The run's scheduled time, and so its
	// order id, is the schedule's, wherever in the window it runs.
	FlexibleWindow time.Duration
	// Workflow is the workflow each run is an order of; Payload is the
	// orders' payload, a JSON object (nil: none).
	Workflow string
	Payload  json.RawMessage
	// Overlap is "allow" (default: every run starts) or "skip" (a run
	// that falls due while the schedule's previous run is still in
	// flight is skipped and recorded, as Temporal's SKIP).
	Overlap string
	// Disabled deploys the schedule turned off (State DISABLED).
	Disabled bool
}

var scheduleExpression = regexp.MustCompile(`^(cron\([^()]+\)|rate\([1-9][0-9]* (minute|minutes|hour|hours|day|days)\))$`)

// validateSchedules checks the schedules against each other and the
// workflows (ws nil: the reference workflows).
func (p Props) validateSchedules(ws []workflow.Workflow) []error {
	var errs []error
	names := map[string]bool{}
	workflows := map[string]bool{"payment": ws == nil, "order": ws == nil}
	for _, w := range ws {
		workflows[w.Name] = true
	}
	for i, sc := range p.Schedules {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("schedules[%d] %q: "+format, append([]any{i, sc.Name}, args...)...))
		}
		switch {
		case !sizing.ValidScheduleName(sc.Name):
			bad("name must be 1-64 characters of A-Z a-z 0-9 _ -")
		case names[sc.Name]:
			bad("another schedule has this name")
		}
		names[sc.Name] = true
		if !scheduleExpression.MatchString(sc.Expression) {
			bad("expression %q: want cron(<minutes> <hours> <day-of-month> <month> <day-of-week> <year>) or rate(<n> minutes|hours|days)", sc.Expression)
		}
		if sc.TimeZone != "" {
			if _, err := time.LoadLocation(sc.TimeZone); err != nil || sc.TimeZone == "Local" {
				bad("time zone %q: want an IANA time zone such as Europe/Paris", sc.TimeZone)
			}
		}
		if sc.FlexibleWindow < 0 || sc.FlexibleWindow > 24*time.Hour || sc.FlexibleWindow%time.Minute != 0 {
			bad("flexible window %s: want whole minutes up to 24h (0: off)", sc.FlexibleWindow)
		}
		if !workflows[sc.Workflow] {
			bad("workflow %q is not one of the deployment's", sc.Workflow)
		}
		if len(sc.Payload) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(sc.Payload, &obj); err != nil || obj == nil {
				bad("payload must be a JSON object")
			} else if len(sc.Payload) > sizing.MaxPayloadBytes {
				bad("payload: %d bytes, over the %d-byte limit", len(sc.Payload), sizing.MaxPayloadBytes)
			}
		}
		if sc.Overlap != "" && sc.Overlap != sizing.OverlapAllow && sc.Overlap != sizing.OverlapSkip {
			bad("overlap %q: want allow or skip", sc.Overlap)
		}
	}
	return errs
}

// scheduleRoles makes each schedule's role before the scheduler's
// environment names them (SAS_SCHEDULES): assumed by EventBridge Scheduler
// for this account's schedules only, allowed to send to the intake queue
// and nothing else.
func (s *SAS) scheduleRoles() {
	s.scheduleRole = map[string]awsiam.Role{}
	for _, sc := range s.p.Schedules {
		role := awsiam.NewRole(s, jsii.String("Schedule"+logicalName(sc.Name)+"Role"), &awsiam.RoleProps{
			AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
				Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
			}),
			Description: jsii.String("SAS schedule " + sc.Name + ": sends its runs to the intake queue"),
		})
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("sqs:SendMessage"),
			Resources: &[]*string{s.intake.QueueArn()},
		}))
		s.scheduleRole[sc.Name] = role
	}
}

// schedulesEnv is SAS_SCHEDULES: each schedule's overlap policy and the
// role that alone may start its runs (its unique id, the principal SQS
// reports as the sender).
func (s *SAS) schedulesEnv() map[string]string {
	if len(s.p.Schedules) == 0 {
		return nil
	}
	m := map[string]any{}
	for _, sc := range s.p.Schedules {
		m[sc.Name] = map[string]any{"overlap": overlapOf(sc), "senders": []*string{s.scheduleRole[sc.Name].RoleId()}}
	}
	return map[string]string{"SAS_SCHEDULES": *awscdk.Stack_Of(s).ToJsonString(m, nil)}
}

func overlapOf(sc Schedule) string {
	if sc.Overlap == "" {
		return sizing.OverlapAllow
	}
	return sc.Overlap
}

// schedules makes each schedule, and admits its role in the intake queue's
// policy.
func (s *SAS) schedules() {
	if len(s.p.Schedules) == 0 {
		return
	}
	var roles []*string
	declared := make([]map[string]any, 0, len(s.p.Schedules))
	for _, sc := range s.p.Schedules {
		role := s.scheduleRole[sc.Name]
		roles = append(roles, role.RoleArn())
		window := &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")}
		if sc.FlexibleWindow > 0 {
			window = &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("FLEXIBLE"),
				MaximumWindowInMinutes: jsii.Number(sc.FlexibleWindow.Minutes())}
		}
		tz := sc.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		state := "ENABLED"
		if sc.Disabled {
			state = "DISABLED"
		}
		awsscheduler.NewCfnSchedule(s, jsii.String("Schedule"+logicalName(sc.Name)), &awsscheduler.CfnScheduleProps{
			Description:                jsii.String("SAS schedule " + sc.Name + ": runs workflow " + sc.Workflow),
			ScheduleExpression:         jsii.String(sc.Expression),
			ScheduleExpressionTimezone: jsii.String(tz),
			FlexibleTimeWindow:         window,
			State:                      jsii.String(state),
			Target: &awsscheduler.CfnSchedule_TargetProperty{
				Arn:     s.intake.QueueArn(),
				RoleArn: role.RoleArn(),
				Input:   jsii.String(runInput(sc)),
				// EventBridge Scheduler's defaults, stated: a day of retries.
				// A retried trigger is the same run (its order id).
				RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
					MaximumEventAgeInSeconds: jsii.Number(86400), MaximumRetryAttempts: jsii.Number(185),
				},
			},
		})
		declared = append(declared, map[string]any{"name": sc.Name, "expression": sc.Expression, "timeZone": tz,
			"flexibleWindowMinutes": int(sc.FlexibleWindow.Minutes()), "workflow": sc.Workflow, "overlap": overlapOf(sc)})
	}
	// The queue's own policy names the schedules' roles (besides each
	// role's identity policy), as it names the completers.
	s.allowIntakeSenders(sidSchedulesSend, roles)
	b, _ := json.Marshal(declared)
	awscdk.NewCfnOutput(s, jsii.String("Schedules"), &awscdk.CfnOutputProps{Value: jsii.String(string(b)),
		Description: jsii.String("the deployment's schedules (sasctl schedules -file reads this list)")})
}

// sidSchedulesSend is the intake queue's Allow for the schedules' roles.
const sidSchedulesSend = "SchedulesSend"

// runInput is the intake message EventBridge Scheduler sends for each run:
// the time the run was scheduled for is its context attribute, which it
// fills in, and the order id is left to the scheduler to derive.
func runInput(sc Schedule) string {
	in := map[string]any{"v": 1, "kind": "intake", "workflow": sc.Workflow, "schedule": sc.Name,
		"scheduledAt": "<aws.scheduler.scheduled-time>"}
	if len(sc.Payload) > 0 {
		var compact bytes.Buffer
		_ = json.Compact(&compact, sc.Payload) // checked by Validate
		in["payload"] = json.RawMessage(compact.Bytes())
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the placeholder's < and > as written
	_ = enc.Encode(in)
	return strings.TrimSpace(b.String())
}

// logicalName is a schedule name as a CloudFormation logical id part.
func logicalName(name string) string {
	return strings.NewReplacer("-", "", "_", "").Replace(name) + fmt.Sprintf("%08x", fnv32(name))
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}
