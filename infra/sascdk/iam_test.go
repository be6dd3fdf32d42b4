package sascdk

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// statement is one IAM statement found anywhere in the template, with where
// it was found.
type statement struct {
	where string // logical id and JSON path
	doc   map[string]any
}

// statements walks the whole template, not only AWS::IAM::Policy: inline
// role policies, queue and topic policies, trust policies, anything that
// holds a "Statement" list.
func (s *synthesized) statements() []statement {
	var out []statement
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if k == "Statement" {
					for i, st := range list(child) {
						if m, ok := st.(map[string]any); ok {
							out = append(out, statement{fmt.Sprintf("%s/Statement[%d]", where, i), m})
						}
					}
					continue
				}
				walk(where+"/"+k, child)
			}
		case []any:
			for i, child := range v {
				walk(fmt.Sprintf("%s[%d]", where, i), child)
			}
		}
	}
	walk("Resources", s.doc["Resources"])
	return out
}

// TestNoWildcardPermissions fails on any Allow of "*" or "service:*", on any
// Allow on Resource "*" (every action the functions use has a resource type;
// the supervisor's metrics go out as log lines, not PutMetricData), and on
// any Deny other than the TLS-only guards CDK writes into queue and topic
// policies (a Deny of sqs:* when aws:SecureTransport is false restricts, it
// grants nothing).
func TestNoWildcardPermissions(t *testing.T) {
	def, variant := stacks(t)
	for name, s := range map[string]*synthesized{"default": def, "variant": variant} {
		sts := s.statements()
		if len(sts) < 10 {
			t.Fatalf("%s: found only %d statements; the walk is broken", name, len(sts))
		}
		for _, st := range sts {
			checkStatement(t, name+" "+st.where, st.doc)
		}
	}
}

func checkStatement(t *testing.T, where string, st map[string]any) {
	t.Helper()
	if strings.Contains(where, "/KeyPolicy/") {
		return // a key policy: checked by TestAlertTopicKey
	}
	for _, k := range []string{"NotAction", "NotResource", "NotPrincipal"} {
		if _, ok := st[k]; ok {
			t.Errorf("%s: %s inverts the grant; name what is allowed instead", where, k)
		}
	}
	actions := strs(st["Action"])
	if len(actions) == 0 {
		t.Errorf("%s: no Action", where)
	}
	if st["Effect"] == "Deny" {
		if !isTLSGuard(st) && !isSenderList(st) && !isDeniedToAll(st) {
			t.Errorf("%s: unexpected Deny %v", where, st)
		}
		return
	}
	if st["Effect"] != "Allow" {
		t.Errorf("%s: Effect %v", where, st["Effect"])
	}
	for _, a := range actions {
		if a == "*" || strings.HasSuffix(a, ":*") || strings.Contains(a, "*") {
			t.Errorf("%s: wildcard action %q", where, a)
		}
	}
	if isCompleterGrant(st) || isScheduleGrant(st) || isTenantGrant(st) {
		return // the intake queue's grants to the named completers (Props.CompleterRoleARNs), to the schedules' roles and to the tenants' roles
	}
	if _, isTrust := st["Principal"]; isTrust {
		// A trust policy: who may assume the role, no resources: Lambda,
		// or EventBridge Scheduler for this account's schedules alone
		// (isScheduleTrust).
		if !reflect.DeepEqual(actions, []string{"sts:AssumeRole"}) || (ref(st["Principal"]) != `{"Service":"lambda.amazonaws.com"}` && !isScheduleTrust(st)) {
			t.Errorf("%s: unexpected resource-policy grant %v", where, st)
		}
		return
	}
	for _, r := range strs(st["Resource"]) {
		// X-Ray's two sending actions take no resource: "*" is the only
		// way to grant them (Props.XRayTracing; the variant sets it).
		xray := reflect.DeepEqual(actions, []string{"xray:PutTelemetryRecords", "xray:PutTraceSegments"})
		if r == "*" && !xray {
			t.Errorf("%s: Resource \"*\" for %v", where, actions)
		}
	}
	if len(strs(st["Resource"])) == 0 {
		t.Errorf("%s: Allow without Resource", where)
	}
}

// isCompleterGrant is the intake queue's Allow of sqs:SendMessage to the
// principals Props.CompleterRoleARNs names, and to them alone (callback
// steps' completions, docs/trust.md "Completion tokens").
func isCompleterGrant(st map[string]any) bool {
	cond, _ := st["Condition"].(map[string]any)
	eq, _ := cond["ArnEquals"].(map[string]any)
	return st["Sid"] == "CompletersSend" && len(cond) == 1 && len(eq) == 1 && eq["aws:PrincipalArn"] != nil &&
		reflect.DeepEqual(strs(st["Action"]), []string{"sqs:SendMessage"})
}

// isSenderList is a Deny for every principal but the ones named
// (resourcePolicies): it restricts, it grants nothing.
func isSenderList(st map[string]any) bool {
	cond, _ := st["Condition"].(map[string]any)
	ne, _ := cond["ArnNotEquals"].(map[string]any)
	return len(cond) == 1 && len(ne) == 1 && ne["aws:PrincipalArn"] != nil && ref(st["Principal"]) == `{"AWS":"*"}`
}

// isDeniedToAll is a dead-letter queue's send fence: nobody sends there
// (SQS moves messages in itself).
func isDeniedToAll(st map[string]any) bool {
	_, cond := st["Condition"]
	return !cond && st["Effect"] == "Deny" && ref(st["Principal"]) == `{"AWS":"*"}` &&
		reflect.DeepEqual(strs(st["Action"]), []string{"sqs:SendMessage"})
}

func isTLSGuard(st map[string]any) bool {
	cond, _ := st["Condition"].(map[string]any)
	b, _ := cond["Bool"].(map[string]any)
	return len(cond) == 1 && len(b) == 1 && b["aws:SecureTransport"] == "false"
}

// grants is a role's permissions as "action → resources", resources named
// by construct id (see ref), so the expected tables below read like a spec.
func (s *synthesized) grants(t *testing.T, role string) map[string][]string {
	t.Helper()
	roleID := s.logicalID(t, "AWS::IAM::Role", role)
	out := map[string][]string{}
	found := false
	for _, p := range s.resources("AWS::IAM::Policy") {
		attached := false
		for _, r := range list(props(p)["Roles"]) {
			if ref(r) == construct(roleID) {
				attached = true
			}
		}
		if !attached {
			continue
		}
		found = true
		for _, st := range list(props(p)["PolicyDocument"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			if st["Effect"] != "Allow" {
				continue
			}
			for _, a := range strs(st["Action"]) {
				out[a] = append(out[a], strs(st["Resource"])...)
			}
		}
	}
	if !found {
		t.Fatalf("no policy attached to role %s", role)
	}
	// Inline policies and managed policies would hide grants from this test.
	rp := props(s.resource(t, "AWS::IAM::Role", role))
	for _, k := range []string{"Policies", "ManagedPolicyArns"} {
		if _, ok := rp[k]; ok {
			t.Errorf("role %s has %s; keep every grant in its default policy", role, k)
		}
	}
	for a := range out {
		sort.Strings(out[a])
	}
	return out
}

func TestLeastPrivilegePerFunction(t *testing.T) {
	def, variant := stacks(t)
	tables := []string{"OrdersTable", "StateTable"}
	index := "StateTable/index/state-due"
	want := map[string]map[string][]string{
		"SchedulerRole": {
			"logs:CreateLogStream":          {"SchedulerLogs"},
			"logs:PutLogEvents":             {"SchedulerLogs"},
			"dynamodb:GetItem":              tables,
			"dynamodb:PutItem":              tables,
			"dynamodb:UpdateItem":           tables,
			"dynamodb:ConditionCheckItem":   tables,
			"dynamodb:Query":                {"OrdersTable", "StateTable", index},
			"sqs:ReceiveMessage":            {"AgentpaymentsReplies", "ControlQueue", "IntakeQueue", "SchedulerQueue"},
			"sqs:DeleteMessage":             {"AgentpaymentsReplies", "ControlQueue", "IntakeQueue", "SchedulerQueue"},
			"sqs:GetQueueAttributes":        {"AgentpaymentsReplies", "ControlQueue", "IntakeQueue", "SchedulerQueue"},
			"sqs:ChangeMessageVisibility":   {"AgentpaymentsReplies", "ControlQueue", "IntakeQueue", "SchedulerQueue"},
			"sqs:SendMessage":               {"AgentpaymentsQueue", "AgentpaymentsReplies", "ControlQueue", "IntakeQueue", "SchedulerQueue"},
			"sns:Publish":                   {"AlertTopic"},
			"kms:Decrypt":                   {"AlertKey"},
			"kms:GenerateDataKey":           {"AlertKey"},
			"events:PutEvents":              {"AlertBus"},
			"secretsmanager:GetSecretValue": {"SigningKey"},
		},
		"AgentpaymentsRole": {
			"logs:CreateLogStream":        {"AgentpaymentsLogs"},
			"logs:PutLogEvents":           {"AgentpaymentsLogs"},
			"sqs:ReceiveMessage":          {"AgentpaymentsQueue"},
			"sqs:DeleteMessage":           {"AgentpaymentsQueue"},
			"sqs:GetQueueAttributes":      {"AgentpaymentsQueue"},
			"sqs:ChangeMessageVisibility": {"AgentpaymentsQueue"},
			"sqs:SendMessage":             {"AgentpaymentsReplies"},
		},
		"SupervisorRole": {
			"logs:CreateLogStream": {"SupervisorLogs"},
			"logs:PutLogEvents":    {"SupervisorLogs"},
			"dynamodb:Query":       {index},
			"dynamodb:GetItem":     {"StateTable"},
			"dynamodb:UpdateItem":  {"StateTable"},
			"sqs:SendMessage":      {"ControlQueue"},
			// The backlog check reads the depth of these two, and no more.
			"sqs:GetQueueAttributes": {"AgentpaymentsQueue", "AgentpaymentsReplies", "SchedulerQueue"},
			"sns:Publish":            {"AlertTopic"},
			"kms:Decrypt":            {"AlertKey"},
			"kms:GenerateDataKey":    {"AlertKey"},
			"events:PutEvents":       {"AlertBus"},
		},
	}
	for role, w := range want {
		if got := def.grants(t, role); !reflect.DeepEqual(got, w) {
			t.Errorf("%s grants:\n got %v\nwant %v", role, got, w)
		}
	}

	// The supervisor reads queue depth on exactly the agent and scheduler
	// queues, in any configuration, and consumes from no queue: depth is all
	// the backlog check needs.
	for name, s := range map[string]*synthesized{"default": def, "variant": variant} {
		g := s.grants(t, "SupervisorRole")
		if got, want := g["sqs:GetQueueAttributes"], []string{"AgentpaymentsQueue", "AgentpaymentsReplies", "SchedulerQueue"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s supervisor sqs:GetQueueAttributes on %v, want %v", name, got, want)
		}
		for a := range g {
			if strings.HasPrefix(a, "sqs:") && a != "sqs:GetQueueAttributes" && a != "sqs:SendMessage" {
				t.Errorf("%s supervisor has %s", name, a)
			}
		}
	}

	// The agent never touches the state store, in any configuration.
	for _, s := range []*synthesized{def, variant} {
		for a := range s.grants(t, "AgentpaymentsRole") {
			if strings.HasPrefix(a, "dynamodb:") {
				t.Errorf("agent has %s", a)
			}
		}
	}

	// Reply queues: the variant's scheduler may post to exactly the listed
	// ARNs (prefix included) and its tenant's, besides its own queues.
	got := variant.grants(t, "SchedulerRole")["sqs:SendMessage"]
	wantSend := append([]string{"AgentpaymentsQueue", "AgentpaymentsReplies", "ControlQueue", "IntakeQueue", "SchedulerQueue", tenantQueueARN}, replyQueueARNs...)
	sort.Strings(wantSend)
	if !reflect.DeepEqual(got, wantSend) {
		t.Errorf("variant scheduler SendMessage on %v, want %v", got, wantSend)
	}
}
