package sascdk

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

const tenantQueueARN = "arn:aws:sqs:eu-west-1:123456789012:acme-status"

// variantTenants gives the variant stack a tenant with a role of its own,
// an outside principal's id and a replyTo queue of its own.
func variantTenants(stack awscdk.Stack, p *Props) {
	role := awsiam.NewRole(stack, jsii.String("AcmeSubmitter"), &awsiam.RoleProps{AssumedBy: awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil)})
	p.Tenants = []Tenant{{Name: "acme", Roles: []awsiam.Role{role}, SenderIDs: []string{"AIDAACMEBATCH"}, ReplyQueueARNs: []string{tenantQueueARN}}}
}

// A tenant reaches the scheduler as SAS_TENANTS (its role's unique id, its
// other sender, its queue as a URL); the intake queue's policy lets its
// role send; the scheduler may post to its queue.
func TestTenantsAreWired(t *testing.T) {
	def, variant := stacks(t)
	envOf := func(s *synthesized) map[string]any {
		return props(s.resource(t, "AWS::Lambda::Function", "Scheduler"))["Environment"].(map[string]any)["Variables"].(map[string]any)
	}
	if v, ok := envOf(def)["SAS_TENANTS"]; ok {
		t.Errorf("the default stack has SAS_TENANTS %v, want none", v)
	}
	raw, _ := json.Marshal(envOf(variant)["SAS_TENANTS"])
	got := ref(envOf(variant)["SAS_TENANTS"])
	if !strings.Contains(string(raw), `"RoleId"`) || !strings.Contains(got, `"acme":{"replyTo":["https://sqs.eu-west-1.amazonaws.com/123456789012/acme-status"],"senders":["AcmeSubmitter`) ||
		!strings.Contains(got, `"AIDAACMEBATCH"]`) {
		t.Errorf("SAS_TENANTS %s (%s): want acme's queue URL, its role's unique id and its other sender", got, raw)
	}

	admitted := ""
	for _, r := range variant.resources("AWS::SQS::QueuePolicy") {
		p := props(r)
		if !queuePolicyOf("IntakeQueue")(p) {
			continue
		}
		for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
			if st := st.(map[string]any); isTenantGrant(st) && st["Effect"] == "Allow" {
				admitted = ref(st["Condition"])
			}
		}
	}
	if !strings.Contains(admitted, "AcmeSubmitter") {
		t.Errorf("the intake queue's TenantsSend admits %q, want the tenant's role", admitted)
	}
	if sends := variant.grants(t, "SchedulerRole")["sqs:SendMessage"]; !strings.Contains(strings.Join(sends, " "), tenantQueueARN) {
		t.Errorf("the scheduler may send to %v, want the tenant's queue too", sends)
	}
}

// Tenants are checked at synth, each problem on a line of its own.
func TestTenantsChecked(t *testing.T) {
	for _, c := range []struct {
		tenants []Tenant
		want    string
	}{
		{[]Tenant{{Name: "Acme", SenderIDs: []string{"AROAACME1"}}}, "a name is 1-32 characters"},
		{[]Tenant{{Name: "acme"}}, "nobody could submit for it"},
		{[]Tenant{{Name: "acme", SenderIDs: []string{"AROAACME1:session"}}}, "want a principal's unique id"},
		{[]Tenant{{Name: "a", SenderIDs: []string{"AROAACME1"}}, {Name: "b", SenderIDs: []string{"AROAACME1"}}}, "is tenant a's already"},
		{[]Tenant{{Name: "a", SenderIDs: []string{"AROAACME1"}}, {Name: "a", SenderIDs: []string{"AROAACME2"}}}, "named twice"},
		{[]Tenant{{Name: "a", SenderIDs: []string{"AROAACME1"}, ReplyQueueARNs: []string{"arn:aws:sqs:eu-west-1:123456789012:*"}}}, "account-wide wildcard"},
	} {
		p := Props{DistDir: fixtureDist, Tenants: c.tenants}
		errs := p.validateTenants()
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), c.want) || strings.Contains(errs[0].Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", c.tenants, errs, c.want)
		}
	}
}

// isTenantGrant is the intake queue's Allow of sqs:SendMessage to the
// tenants' roles, and to them alone.
func isTenantGrant(st map[string]any) bool {
	cond, _ := st["Condition"].(map[string]any)
	eq, _ := cond["ArnEquals"].(map[string]any)
	return st["Sid"] == "TenantsSend" && len(cond) == 1 && len(eq) == 1 && eq["aws:PrincipalArn"] != nil &&
		reflect.DeepEqual(strs(st["Action"]), []string{"sqs:SendMessage"})
}
