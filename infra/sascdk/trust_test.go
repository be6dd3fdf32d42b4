package sascdk

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The trust model in the template (docs/trust.md): who may send where,
// who may read the signing key, who may put alerts, and the alert topic's
// key.

// senderList is the principals a resource's Deny-all-but statement (sid)
// lets through, by construct id or literal ARN; nil when there is none.
func (s *synthesized) senderList(t *testing.T, typ, policyProp, sid string, match func(map[string]any) bool) []string {
	t.Helper()
	for _, r := range s.resources(typ) {
		p := props(r)
		if !match(p) {
			continue
		}
		doc, _ := p[policyProp].(map[string]any)
		for _, st := range list(doc["Statement"]) {
			st := st.(map[string]any)
			if st["Sid"] != sid {
				continue
			}
			if !isSenderList(st) || st["Effect"] != "Deny" {
				t.Errorf("%s: %v is not a Deny for all but a list", sid, st)
			}
			cond := st["Condition"].(map[string]any)["ArnNotEquals"].(map[string]any)
			return strs(cond["aws:PrincipalArn"])
		}
	}
	return nil
}

func queuePolicyOf(queue string) func(map[string]any) bool {
	return func(p map[string]any) bool {
		for _, q := range list(p["Queues"]) {
			if ref(q) == queue {
				return true
			}
		}
		return false
	}
}

func TestWhoMaySendWhere(t *testing.T) {
	def, variant := stacks(t)
	for _, tc := range []struct {
		name string
		s    *synthesized
		want []string
	}{
		// The scheduler's: its renewed copies (internal/scheduler/renew.go).
		{"default", def, []string{"SchedulerRole", "SupervisorRole"}},
		{"variant", variant, []string{operatorRoleARN, "SchedulerRole", "SupervisorRole"}},
	} {
		got := tc.s.senderList(t, "AWS::SQS::QueuePolicy", "PolicyDocument", "OnlySupervisorAndOperatorsSend", queuePolicyOf("ControlQueue"))
		want := append([]string(nil), tc.want...)
		sort.Strings(want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the control queue takes messages from %v, want %v", tc.name, got, want)
		}
		got = tc.s.senderList(t, "AWS::SQS::QueuePolicy", "PolicyDocument", "OnlyAgentsSend", queuePolicyOf("SchedulerQueue"))
		if want := []string{"AgentpaymentsRole", "SchedulerRole"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the scheduler queue takes messages from %v, want %v", tc.name, got, want)
		}
	}

	// Every agent queue and lane: the scheduler alone.
	for name, s := range map[string]*synthesized{"default": def, "variant": variant, "two": all(t).two, "five": all(t).five} {
		for _, a := range s.props.Agents {
			ids := idsOf(a.Name)
			queues := []string{ids.queue}
			if a.PriorityConcurrency > 0 {
				queues = append(queues, ids.lane)
			}
			for _, q := range queues {
				got := s.senderList(t, "AWS::SQS::QueuePolicy", "PolicyDocument", "OnlySchedulerSends", queuePolicyOf(q))
				if !reflect.DeepEqual(got, []string{"SchedulerRole"}) {
					t.Errorf("%s: %s takes messages from %v, want the scheduler alone", name, q, got)
				}
			}
		}
	}

	// Grants agree: only the supervisor's role (and the scheduler's, for
	// its renewed copies) may send to the control queue, and no agent may.
	for _, role := range []string{"SchedulerRole", "AgentpaymentsRole", "SupervisorRole"} {
		sends := def.grants(t, role)["sqs:SendMessage"]
		has := false
		for _, q := range sends {
			has = has || q == "ControlQueue"
		}
		if has != (role == "SupervisorRole" || role == "SchedulerRole") {
			t.Errorf("%s sqs:SendMessage on %v", role, sends)
		}
	}
}

func TestSigningKeyReadableByTheSchedulerAlone(t *testing.T) {
	def, _ := stacks(t)
	// No resource policy (the emulators reject the type): the scheduler's
	// role is the only one granted the secret.
	if n := len(def.resources("AWS::SecretsManager::ResourcePolicy")); n != 0 {
		t.Errorf("%d secret resource policies, want none", n)
	}
	for _, role := range []string{"SchedulerRole", "AgentpaymentsRole", "SupervisorRole"} {
		_, has := def.grants(t, role)["secretsmanager:GetSecretValue"]
		if has != (role == "SchedulerRole") {
			t.Errorf("%s secretsmanager:GetSecretValue: %v", role, has)
		}
	}
	// The function gets the secret's name, never the key.
	for _, fn := range []string{"Scheduler", "Supervisor", "AgentpaymentsFunction"} {
		env := def.env(t, fn)
		if _, ok := env["SAS_SIGNING_KEY"]; ok {
			t.Errorf("%s has the key itself in its environment", fn)
		}
		if _, ok := env["SAS_SIGNING_KEY_SECRET"]; ok != (fn == "Scheduler") {
			t.Errorf("%s SAS_SIGNING_KEY_SECRET set: %v", fn, ok)
		}
	}
	p := props(def.resource(t, "AWS::SecretsManager::Secret", "SigningKey"))
	gen, _ := p["GenerateSecretString"].(map[string]any)
	if n, _ := gen["PasswordLength"].(float64); n < 43 {
		t.Errorf("the generated key is %v characters; want at least 256 bits", gen["PasswordLength"])
	}
}

func TestAlertTopicKey(t *testing.T) {
	def, _ := stacks(t)
	topic := props(def.resource(t, "AWS::SNS::Topic", "AlertTopic"))
	if ref(topic["KmsMasterKeyId"]) != "AlertKey" {
		t.Errorf("the alert topic's key is %v, want the stack's AlertKey", topic["KmsMasterKeyId"])
	}
	key := props(def.resource(t, "AWS::KMS::Key", "AlertKey"))
	if key["EnableKeyRotation"] != true {
		t.Error("the alert key does not rotate")
	}
	var cloudwatch bool
	for _, st := range list(key["KeyPolicy"].(map[string]any)["Statement"]) {
		st := st.(map[string]any)
		principal := ref(st["Principal"])
		switch {
		case st["Effect"] != "Allow":
			t.Errorf("key policy: %v", st)
		case strings.Contains(principal, ":root"):
			// CDK's default: the account administers its key through IAM.
		case principal == `{"Service":"cloudwatch.amazonaws.com"}`:
			cloudwatch = true
			if got := strs(st["Action"]); !reflect.DeepEqual(got, []string{"kms:Decrypt", "kms:GenerateDataKey"}) {
				t.Errorf("CloudWatch may %v on the alert key", got)
			}
		default:
			t.Errorf("key policy grants %s: %v", principal, st)
		}
	}
	if !cloudwatch {
		t.Error("CloudWatch alarms cannot publish to the encrypted topic: no grant in the key policy")
	}
}

func TestAlertsGoToTheStacksOwnBus(t *testing.T) {
	def, _ := stacks(t)
	for _, fn := range []string{"Scheduler", "Supervisor"} {
		if got := def.env(t, fn)["SAS_EVENT_BUS_NAME"]; got != "AlertBus" {
			t.Errorf("%s SAS_EVENT_BUS_NAME = %q, want the stack's AlertBus", fn, got)
		}
		if got := def.grants(t, fn+"Role")["events:PutEvents"]; !reflect.DeepEqual(got, []string{"AlertBus"}) {
			t.Errorf("%s events:PutEvents on %v", fn, got)
		}
	}
	// The bus's own Policy property carries the sender list.
	var got []string
	for _, r := range def.resources("AWS::Events::EventBus") {
		pol, _ := props(r)["Policy"].(map[string]any)
		sts, _ := pol["Statement"].([]any)
		for _, x := range sts {
			st, _ := x.(map[string]any)
			if isSenderList(st) && st["Effect"] == "Deny" && st["Sid"] == "OnlySasPutsAlerts" {
				got = strs(st["Condition"].(map[string]any)["ArnNotEquals"].(map[string]any)["aws:PrincipalArn"])
			}
		}
	}
	if want := []string{"SchedulerRole", "SupervisorRole"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the alert bus takes events from %v, want %v", got, want)
	}
}

// TestAgentAuthSecretReadableByThatAgentAlone: an agent's auth secret (and
// its key) is granted to that agent's role and named in its environment by
// ARN, and appears nowhere else in the template; an agent without one is
// granted no secret at all.
func TestAgentAuthSecretReadableByThatAgentAlone(t *testing.T) {
	f := all(t)
	base := map[string][]string{
		"logs:CreateLogStream":        {"AgentpaymentsLogs"},
		"logs:PutLogEvents":           {"AgentpaymentsLogs"},
		"sqs:ReceiveMessage":          {"AgentpaymentsQueue"},
		"sqs:DeleteMessage":           {"AgentpaymentsQueue"},
		"sqs:GetQueueAttributes":      {"AgentpaymentsQueue"},
		"sqs:ChangeMessageVisibility": {"AgentpaymentsQueue"},
		"sqs:SendMessage":             {"SchedulerQueue"},
	}
	want := merge2(base, map[string][]string{
		"secretsmanager:GetSecretValue": {authSecretARN},
		"kms:Decrypt":                   {authKeyARN},
		// The variant traces with X-Ray (Props.XRayTracing).
		"xray:PutTelemetryRecords": {"*"},
		"xray:PutTraceSegments":    {"*"},
	})
	if got := f.variant.grants(t, "AgentpaymentsRole"); !reflect.DeepEqual(got, want) {
		t.Errorf("variant agent grants:\n got %v\nwant %v", got, want)
	}
	env := f.variant.env(t, "AgentpaymentsFunction")
	if env["SAS_AGENT_AUTH_SECRET"] != authSecretARN || env["SAS_AGENT_AUTH_HEADER"] != "X-Api-Key" {
		t.Errorf("variant agent auth environment: secret %q, header %q", env["SAS_AGENT_AUTH_SECRET"], env["SAS_AGENT_AUTH_HEADER"])
	}
	if _, ok := env["SAS_AGENT_ALLOW_HTTP"]; ok {
		t.Error("the variant's https agent is allowed http")
	}
	onlyIn(t, f.variant, "AgentpaymentsRoleDefaultPolicy", authSecretARN, authKeyARN)
	for _, role := range []string{"SchedulerRole", "SupervisorRole"} {
		g := f.variant.grants(t, role)
		if got := g["secretsmanager:GetSecretValue"]; len(got) > 0 && !reflect.DeepEqual(got, []string{"SigningKey"}) {
			t.Errorf("variant %s reads secrets %v", role, got)
		}
		if got := g["kms:Decrypt"]; !reflect.DeepEqual(got, []string{"AlertKey"}) {
			t.Errorf("variant %s kms:Decrypt on %v", role, got)
		}
	}

	// An SSM parameter: ssm:GetParameter on it, for the built-in agent
	// that names it; the other agent of the stack gets nothing of it.
	flights := f.two.grants(t, "AgentflightsRole")
	if got := flights["ssm:GetParameter"]; !reflect.DeepEqual(got, []string{authParameterARN}) {
		t.Errorf("flights ssm:GetParameter on %v", got)
	}
	if got := f.two.env(t, "AgentflightsFunction")["SAS_AGENT_AUTH_SECRET"]; got != authParameterARN {
		t.Errorf("flights SAS_AGENT_AUTH_SECRET = %q", got)
	}
	if _, ok := f.two.env(t, "AgentflightsFunction")["SAS_AGENT_AUTH_HEADER"]; ok {
		t.Error("flights: a header named though the default was asked for")
	}
	onlyIn(t, f.two, "AgentflightsRoleDefaultPolicy", authParameterARN)

	// Nobody else reads any secret or parameter, in any stack.
	for name, s := range map[string]*synthesized{"default": f.def, "variant": f.variant, "two": f.two, "five": f.five} {
		for _, r := range s.props.Agents {
			if s == f.variant && r.Name == "payments" || s == f.two && r.Name == "flights" {
				continue
			}
			role := idsOf(r.Name).role
			for a := range s.grants(t, role) {
				if strings.HasPrefix(a, "secretsmanager:") || strings.HasPrefix(a, "ssm:") || strings.HasPrefix(a, "kms:") {
					t.Errorf("%s %s has %s", name, role, a)
				}
			}
		}
	}
}

// onlyIn fails when a value appears in any statement of the template but
// those of the policy whose logical id starts with owner.
func onlyIn(t *testing.T, s *synthesized, owner string, values ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, st := range s.statements() {
		raw, _ := json.Marshal(st.doc)
		for _, v := range values {
			if !strings.Contains(string(raw), v) {
				continue
			}
			seen[v] = true
			if !strings.HasPrefix(st.where, "Resources/"+owner) {
				t.Errorf("%s appears in %s: %s", v, st.where, raw)
			}
		}
	}
	for _, v := range values {
		if !seen[v] {
			t.Errorf("%s is granted nowhere", v)
		}
	}
}

func merge2(ms ...map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// TestControlQueueSenders: in every stack, the control queue takes
// messages from the supervisor's role, the operators' and the scheduler's
// (its renewed copies) alone, no role of the stack but those two is granted
// to send there, and the
// operators are granted nothing else (their rights are the deployer's to
// give).
func TestControlQueueSenders(t *testing.T) {
	f := all(t)
	for name, s := range map[string]*synthesized{"default": f.def, "variant": f.variant, "two": f.two, "five": f.five} {
		want := append([]string{"SchedulerRole", "SupervisorRole"}, s.props.OperatorRoleARNs...)
		sort.Strings(want)
		got := s.senderList(t, "AWS::SQS::QueuePolicy", "PolicyDocument", "OnlySupervisorAndOperatorsSend", queuePolicyOf("ControlQueue"))
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the control queue takes messages from %v, want %v", name, got, want)
		}
		for id, p := range s.resources("AWS::IAM::Policy") {
			for _, st := range list(props(p)["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				if !slices.Contains(strs(st["Resource"]), "ControlQueue") || !slices.Contains(strs(st["Action"]), "sqs:SendMessage") {
					continue
				}
				if roles := strs(props(p)["Roles"]); !reflect.DeepEqual(roles, []string{"SupervisorRole"}) && !reflect.DeepEqual(roles, []string{"SchedulerRole"}) {
					t.Errorf("%s: policy %s lets %v send to the control queue", name, id, roles)
				}
			}
		}
		for _, op := range s.props.OperatorRoleARNs {
			for _, st := range s.statements() {
				raw, _ := json.Marshal(st.doc)
				if strings.Contains(string(raw), op) && !isSenderList(st.doc) {
					t.Errorf("%s: operator %s appears in %s: %s", name, op, st.where, raw)
				}
			}
		}
	}
}
