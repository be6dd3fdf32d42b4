package sascdk

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// variantSchedules are the variant stack's schedules.
var variantSchedules = []Schedule{
	{Name: "nightly-recon", Expression: "cron(0 2 * * ? *)", TimeZone: "Europe/Paris", FlexibleWindow: 15 * time.Minute,
		Workflow: "payment", Payload: json.RawMessage(`{ "amount": 0, "note": "<b>" }`), Overlap: "skip"},
	{Name: "hourly", Expression: "rate(1 hour)", Workflow: "order"},
}

// isScheduleGrant is the intake queue's Allow of sqs:SendMessage to the
// schedules' roles, and to them alone.
func isScheduleGrant(st map[string]any) bool {
	cond, _ := st["Condition"].(map[string]any)
	eq, _ := cond["ArnEquals"].(map[string]any)
	return st["Sid"] == sidSchedulesSend && len(cond) == 1 && len(eq) == 1 && eq["aws:PrincipalArn"] != nil &&
		reflect.DeepEqual(strs(st["Action"]), []string{"sqs:SendMessage"})
}

// isScheduleTrust is a schedule role's trust policy: EventBridge Scheduler,
// acting for this account's schedules only (the confused deputy's guard).
func isScheduleTrust(st map[string]any) bool {
	cond, _ := st["Condition"].(map[string]any)
	eq, _ := cond["StringEquals"].(map[string]any)
	return ref(st["Principal"]) == `{"Service":"scheduler.amazonaws.com"}` && len(cond) == 1 && len(eq) == 1 &&
		ref(eq["aws:SourceAccount"]) == "AWS::AccountId"
}

// Each declared schedule is an EventBridge Scheduler schedule targeting the
// intake queue, with its expression, time zone, window and state, its role,
// and an input that is an intake of its workflow naming the schedule and
// the scheduled time (the placeholder EventBridge Scheduler fills in). The
// default stack has none.
func TestSchedulesAreEventBridgeSchedules(t *testing.T) {
	def, variant := stacks(t)
	if got := def.resources("AWS::Scheduler::Schedule"); len(got) != 0 {
		t.Errorf("the default stack has %d schedules, want none", len(got))
	}
	scheds := variant.resources("AWS::Scheduler::Schedule")
	if len(scheds) != len(variantSchedules) {
		t.Fatalf("%d schedules, want %d", len(scheds), len(variantSchedules))
	}
	for _, sc := range variantSchedules {
		p := props(variant.resource(t, "AWS::Scheduler::Schedule", "Schedule"+logicalName(sc.Name)))
		tz := sc.TimeZone
		if tz == "" {
			tz = "UTC"
		}
		if p["ScheduleExpression"] != sc.Expression || p["ScheduleExpressionTimezone"] != tz || p["State"] != "ENABLED" {
			t.Errorf("%s: %v", sc.Name, p)
		}
		window := ref(p["FlexibleTimeWindow"])
		want := `{"Mode":"OFF"}`
		if sc.FlexibleWindow > 0 {
			want = `{"MaximumWindowInMinutes":15,"Mode":"FLEXIBLE"}`
		}
		if window != want {
			t.Errorf("%s: window %s, want %s", sc.Name, window, want)
		}
		target := p["Target"].(map[string]any)
		if !strings.Contains(ref(target["Arn"]), "IntakeQueue") {
			t.Errorf("%s: target %s, want the intake queue", sc.Name, ref(target["Arn"]))
		}
		if !strings.Contains(ref(target["RoleArn"]), "Schedule"+logicalName(sc.Name)+"Role") {
			t.Errorf("%s: role %s, want its own", sc.Name, ref(target["RoleArn"]))
		}
		var in map[string]any
		if err := json.Unmarshal([]byte(target["Input"].(string)), &in); err != nil {
			t.Fatalf("%s: input %v: %v", sc.Name, target["Input"], err)
		}
		if in["schedule"] != sc.Name || in["workflow"] != sc.Workflow || in["scheduledAt"] != "<aws.scheduler.scheduled-time>" || in["orderId"] != nil {
			t.Errorf("%s: input %v", sc.Name, in)
		}
		if sc.Payload != nil && ref(in["payload"]) != `{"amount":0,"note":"\u003cb\u003e"}` && ref(in["payload"]) != `{"amount":0,"note":"<b>"}` {
			t.Errorf("%s: payload %v", sc.Name, in["payload"])
		}
	}
}

// Each schedule's role may send to the intake queue and do nothing else,
// and is assumed by EventBridge Scheduler for this account only; the intake
// queue's policy names exactly the schedules' roles; the scheduler's
// SAS_SCHEDULES gives each schedule its policy and its role's unique id as
// its only sender.
func TestScheduleRolesMaySendToTheIntakeOnly(t *testing.T) {
	_, variant := stacks(t)
	for _, sc := range variantSchedules {
		role := "Schedule" + logicalName(sc.Name) + "Role"
		grants := variant.grants(t, role)
		if len(grants) != 1 || len(grants["sqs:SendMessage"]) != 1 || !strings.Contains(grants["sqs:SendMessage"][0], "IntakeQueue") {
			t.Errorf("%s may %v, want sqs:SendMessage on the intake queue alone", role, grants)
		}
		trust := props(variant.resource(t, "AWS::IAM::Role", role))["AssumeRolePolicyDocument"].(map[string]any)
		sts := list(trust["Statement"])
		if len(sts) != 1 || !isScheduleTrust(sts[0].(map[string]any)) {
			t.Errorf("%s trusts %v", role, sts)
		}
	}

	var admitted []string
	for _, r := range variant.resources("AWS::SQS::QueuePolicy") {
		p := props(r)
		if !queuePolicyOf("IntakeQueue")(p) {
			continue
		}
		for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			if st["Sid"] != sidSchedulesSend {
				continue
			}
			if !isScheduleGrant(st) || st["Effect"] != "Allow" {
				t.Errorf("the schedules' statement is %v", st)
			}
			for _, arn := range list(st["Condition"].(map[string]any)["ArnEquals"].(map[string]any)["aws:PrincipalArn"]) {
				admitted = append(admitted, ref(arn))
			}
		}
	}
	if len(admitted) != len(variantSchedules) {
		t.Fatalf("the intake policy admits %v, want the %d schedules' roles", admitted, len(variantSchedules))
	}
	for i, sc := range variantSchedules {
		if !strings.Contains(admitted[i], "Schedule"+logicalName(sc.Name)+"Role") {
			t.Errorf("the intake policy admits %s, want %s's role", admitted[i], sc.Name)
		}
	}

	env := props(variant.resource(t, "AWS::Lambda::Function", "Scheduler"))["Environment"].(map[string]any)["Variables"].(map[string]any)
	got := ref(env["SAS_SCHEDULES"])
	if raw, _ := json.Marshal(env["SAS_SCHEDULES"]); strings.Count(string(raw), `"RoleId"`) != len(variantSchedules) {
		t.Errorf("SAS_SCHEDULES %s: want each schedule's role's unique id (RoleId, SQS's SenderId)", raw)
	}
	for _, sc := range variantSchedules {
		overlap := sc.Overlap
		if overlap == "" {
			overlap = "allow"
		}
		if !strings.Contains(got, `"`+sc.Name+`":{"overlap":"`+overlap+`","senders":["Schedule`+logicalName(sc.Name)+`Role"]}`) {
			t.Errorf("SAS_SCHEDULES %s lacks %s (overlap %s, its role's id)", got, sc.Name, overlap)
		}
	}
	if out := variant.doc["Outputs"].(map[string]any); out != nil {
		found := false
		for id, o := range out {
			if strings.HasPrefix(id, "DefaultSchedules") || id == "Schedules" {
				found = true
				var decl []map[string]any
				if err := json.Unmarshal([]byte(o.(map[string]any)["Value"].(string)), &decl); err != nil || len(decl) != len(variantSchedules) {
					t.Errorf("output %s: %v (%v)", id, o, err)
				}
			}
		}
		if !found {
			t.Error("no Schedules output")
		}
	}
}

// A schedule is checked at synth, each problem named.
func TestSchedulesChecked(t *testing.T) {
	base := Props{DistDir: "dist", Agents: []Agent{HTTPAgent("payments", "")}}
	for _, tc := range []struct {
		sc   Schedule
		want string
	}{
		{Schedule{Name: "bad name", Expression: "rate(1 hour)", Workflow: "payment"}, "name must be"},
		{Schedule{Name: "s", Expression: "every day", Workflow: "payment"}, `expression "every day"`},
		{Schedule{Name: "s", Expression: "at(2026-11-28T02:00:00)", Workflow: "payment"}, "expression"},
		{Schedule{Name: "s", Expression: "rate(0 hours)", Workflow: "payment"}, "expression"},
		{Schedule{Name: "s", Expression: "rate(1 hour)", Workflow: "payment", TimeZone: "Mars/Olympus"}, "time zone"},
		{Schedule{Name: "s", Expression: "rate(1 hour)", Workflow: "payment", FlexibleWindow: 90 * time.Second}, "flexible window"},
		{Schedule{Name: "s", Expression: "rate(1 hour)", Workflow: "trip"}, `workflow "trip"`},
		{Schedule{Name: "s", Expression: "rate(1 hour)", Workflow: "payment", Payload: json.RawMessage(`[1]`)}, "payload must be a JSON object"},
		{Schedule{Name: "s", Expression: "rate(1 hour)", Workflow: "payment", Overlap: "buffer"}, `overlap "buffer"`},
	} {
		p := base
		p.Schedules = []Schedule{tc.sc}
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.sc, err, tc.want)
		}
	}
	p := base
	p.Schedules = []Schedule{{Name: "s", Expression: "rate(1 hour)", Workflow: "payment"}, {Name: "s", Expression: "rate(2 hours)", Workflow: "order"}}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "another schedule has this name") {
		t.Errorf("two schedules named s: %v", err)
	}
}
