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
		got = tc.s.senderList(t, "AWS::SQS::QueuePolicy", "PolicyDocument", "OnlySchedulerSends", queuePolicyOf("SchedulerQueue"))
		if want := []string{"SchedulerRole"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the scheduler queue takes messages from %v, want %v (each agent replies on its own queue)", tc.name, got, want)
		}
		// Each agent's reply queue: that agent, and the scheduler's
		// renewed copies (issue 29, F-13).
		got = tc.s.senderList(t, "AWS::SQS::QueuePolicy", "PolicyDocument", "OnlyItsAgentSends", queuePolicyOf("AgentpaymentsReplies"))
		if want := []string{"AgentpaymentsRole", "SchedulerRole"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: payments' reply queue takes messages from %v, want %v", tc.name, got, want)
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
			// Only for this account's alarms (the confused deputy).
			cond, _ := st["Condition"].(map[string]any)
			eq, _ := cond["StringEquals"].(map[string]any)
			like, _ := cond["ArnLike"].(map[string]any)
			if ref(eq["aws:SourceAccount"]) != "${AWS::AccountId}" && ref(eq["aws:SourceAccount"]) != "AWS::AccountId" {
				t.Errorf("CloudWatch may use the alert key for any account's alarms: %v", cond)
			}
			if got := ref(like["aws:SourceArn"]); got != "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:*" {
				t.Errorf("CloudWatch may use the alert key for the alarms %q", got)
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
		"sqs:SendMessage":             {"AgentpaymentsReplies"},
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

// fences maps each action a queue's policy denies to every principal but a
// list to that list, by construct id or literal ARN; an action denied to
// everyone maps to an empty, non-nil list.
func (s *synthesized) fences(t *testing.T, queue string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range s.resources("AWS::SQS::QueuePolicy") {
		p := props(r)
		if !queuePolicyOf(queue)(p) {
			continue
		}
		for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
			st := st.(map[string]any)
			if st["Effect"] != "Deny" || isTLSGuard(st) {
				continue
			}
			var but []string
			switch {
			case isSenderList(st):
				but = strs(st["Condition"].(map[string]any)["ArnNotEquals"].(map[string]any)["aws:PrincipalArn"])
			case isDeniedToAll(st):
				but = []string{}
			default:
				t.Errorf("%s: a Deny that is neither for all nor for all but a list: %v", queue, st)
				continue
			}
			for _, a := range strs(st["Action"]) {
				if _, dup := out[a]; dup {
					t.Errorf("%s: %s fenced twice", queue, a)
				}
				out[a] = but
			}
		}
	}
	return out
}

// deployersOf is who may administer a stack's queues: its root user and
// Props.DeployerRoleARNs, or CDK's bootstrap execution role.
func deployersOf(p Props) []string {
	out := []string{"arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}
	if len(p.DeployerRoleARNs) > 0 {
		out = append(out, p.DeployerRoleARNs...)
	} else {
		out = append(out, "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/cdk-hnb659fds-cfn-exec-role-${AWS::AccountId}-${AWS::Region}")
	}
	sort.Strings(out)
	return out
}

// TestEveryQueueFenced: every queue of every test stack, dead-letter
// queues included, refuses sending, receiving, deleting, hiding, purging,
// deleting the queue and changing its policy or attributes to every
// principal but the ones each is for (docs/trust.md, "Queues and what each
// takes"): a principal with sqs:* on * can neither steal nor plant nor
// lift the fence.
func TestEveryQueueFenced(t *testing.T) {
	f := all(t)
	consume := []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"}
	admin := []string{"sqs:SetQueueAttributes", "sqs:AddPermission", "sqs:RemovePermission", "sqs:PurgeQueue",
		"sqs:DeleteQueue", "sqs:TagQueue", "sqs:UntagQueue", "sqs:StartMessageMoveTask", "sqs:CancelMessageMoveTask"}
	for name, s := range map[string]*synthesized{"default": f.def, "variant": f.variant, "two": f.two, "five": f.five} {
		deployers := deployersOf(s.props)
		dlqReaders := append(append([]string(nil), s.props.OperatorRoleARNs...), deployers...)
		sort.Strings(dlqReaders)
		consumers := map[string][]string{
			"IntakeQueue": {"SchedulerRole"}, "SchedulerQueue": {"SchedulerRole"}, "ControlQueue": {"SchedulerRole"},
		}
		for _, a := range s.props.Agents {
			ids := idsOf(a.Name)
			consumers[ids.queue] = []string{ids.role}
			consumers[ids.replies] = []string{"SchedulerRole"}
			if a.PriorityConcurrency > 0 {
				consumers[ids.lane] = []string{ids.role}
			}
		}
		queues := s.resources("AWS::SQS::Queue")
		if len(queues) < 2*len(consumers)-len(s.props.Agents) { // a reply queue shares the scheduler queue's DLQ
			t.Fatalf("%s: %d queues, want a queue and a DLQ for each of %v", name, len(queues), consumers)
		}
		for q := range queues {
			got := s.fences(t, q)
			dlq := strings.HasSuffix(q, "DLQ")
			if !dlq && consumers[q] == nil {
				t.Errorf("%s: queue %s is neither a known queue nor a DLQ", name, q)
				continue
			}
			// Send: a DLQ takes nothing from anyone; the intake queue's
			// senders are the deployer's to grant (docs/trust.md); every
			// other queue has its senders (TestWhoMaySendWhere names them).
			switch send, ok := got["sqs:SendMessage"]; {
			case dlq && (!ok || len(send) != 0):
				t.Errorf("%s: %s takes messages from %v, want nobody", name, q, send)
			case !dlq && q != "IntakeQueue" && len(send) == 0:
				t.Errorf("%s: %s has no sender fence (%v)", name, q, send)
			case q == "IntakeQueue" && ok:
				t.Errorf("%s: the intake queue fences its senders (%v), which the deployer grants", name, send)
			}
			wantConsumers := consumers[q]
			if dlq {
				wantConsumers = dlqReaders
			}
			for _, a := range consume {
				if !reflect.DeepEqual(got[a], wantConsumers) {
					t.Errorf("%s: %s lets %v %s, want %v alone", name, q, got[a], a, wantConsumers)
				}
			}
			for _, a := range admin {
				if !reflect.DeepEqual(got[a], deployers) {
					t.Errorf("%s: %s lets %v %s, want the deployers %v alone", name, q, got[a], a, deployers)
				}
			}
		}
	}
}

// TestDeployerARNsChecked: a deployer that is not a role or user ARN is
// refused at synth, as an operator is. (The variant stack names one:
// TestEveryQueueFenced checks that it replaces the bootstrap role.)
func TestDeployerARNsChecked(t *testing.T) {
	p := Props{Agents: []Agent{HTTPAgent("payments", "")}, DistDir: t.TempDir(), DeployerRoleARNs: []string{"deployer"}}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), `deployer "deployer"`) {
		t.Errorf("a deployer that is not an ARN: %v", err)
	}
}

// The intake queue's policy names who may complete callback steps
// (Props.CompleterRoleARNs), and names nobody when none is given.
func TestCompletersAreNamedInTheIntakePolicy(t *testing.T) {
	f := all(t)
	completers := func(s *synthesized) []any {
		var out []any
		for _, r := range s.resources("AWS::SQS::QueuePolicy") {
			p := props(r)
			if !queuePolicyOf("IntakeQueue")(p) {
				continue
			}
			for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
				st := st.(map[string]any)
				if st["Sid"] != "CompletersSend" {
					continue
				}
				if st["Effect"] != "Allow" || st["Action"] != "sqs:SendMessage" {
					t.Errorf("the completers' statement is %v", st)
				}
				out = append(out, list(st["Condition"].(map[string]any)["ArnEquals"].(map[string]any)["aws:PrincipalArn"])...)
			}
		}
		return out
	}
	if got := completers(f.variant); !reflect.DeepEqual(got, []any{completerRoleARN}) {
		t.Errorf("the variant's intake policy names %v as completers, want %s", got, completerRoleARN)
	}
	if got := completers(f.def); len(got) != 0 {
		t.Errorf("the default's intake policy names %v as completers, want none", got)
	}
}
