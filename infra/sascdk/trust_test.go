package sascdk

import (
	"reflect"
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
		{"default", def, []string{"SupervisorRole"}},
		{"variant", variant, []string{operatorRoleARN, "SupervisorRole"}},
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

	// Grants agree: only the supervisor's role may send to the control
	// queue, and no agent may.
	for _, role := range []string{"SchedulerRole", "AgentpaymentsRole", "SupervisorRole"} {
		sends := def.grants(t, role)["sqs:SendMessage"]
		has := false
		for _, q := range sends {
			has = has || q == "ControlQueue"
		}
		if has != (role == "SupervisorRole") {
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
