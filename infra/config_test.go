package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/sas-go/sas/infra/sascdk"
)

// TestPropsFromContext reads the knobs the way `cdk -c key=value` passes
// them. It needs the jsii runtime (started on first use, closed by TestMain).
func TestPropsFromContext(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{
		"arch":               "x86_64",
		"allowedReplyQueues": " arn:aws:sqs:eu-west-1:111122223333:a , ,arn:aws:sqs:eu-west-1:111122223333:b-*",
		"removalPolicy":      "Destroy",
		"paymentsUrl":        "https://pay.example.test",
	}})
	p, err := PropsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	if p.Arch != sascdk.ArchX8664 || p.RemovalPolicy != awscdk.RemovalPolicy_DESTROY || p.DistDir != "../dist" {
		t.Errorf("props %+v", p)
	}
	if want := []sascdk.Agent{sascdk.HTTPAgent("payments", "https://pay.example.test")}; !reflect.DeepEqual(p.Agents, want) {
		t.Errorf("agents %+v, want %+v", p.Agents, want)
	}
	if want := []string{"arn:aws:sqs:eu-west-1:111122223333:a", "arn:aws:sqs:eu-west-1:111122223333:b-*"}; !reflect.DeepEqual(p.AllowedReplyQueueARNs, want) {
		t.Errorf("reply queues %v, want %v", p.AllowedReplyQueueARNs, want)
	}

	empty := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"allowedReplyQueues": ""}})
	if p, err := PropsFromContext(empty.Node()); err != nil || p.AllowedReplyQueueARNs != nil {
		t.Errorf("empty context: %+v, %v", p, err)
	}
	for name, ctx := range map[string]map[string]any{
		"removal policy":         {"removalPolicy": "snapshot"},
		"agents and url":         {"agents": `{"a": {"url": "https://a.example.test"}}`, "paymentsUrl": "https://p.example.test"},
		"agents not JSON":        {"agents": "a,b"},
		"agents field":           {"agents": `{"a": {"uri": "https://a.example.test"}}`},
		"agents concurrency":     {"agents": `{"payments": {"url": "https://a.example.test", "concurrency": 1}}`},
		"workflows file":         {"workflowsFile": "no-such-file.json"},
		"http without allowHttp": {"paymentsUrl": "http://127.0.0.1:8090"},
		"allowHttp not a bool":   {"paymentsUrl": "https://p.example.test", "allowHttp": "sometimes"},
		"operator not an ARN":    {"paymentsUrl": "https://p.example.test", "operatorRoles": "ops"},
		"auth in both":           {"agents": `{"payments": {"url": "https://a.example.test"}}`, "paymentsAuthSecret": authARN},
		"auth secret not an ARN": {"paymentsUrl": "https://p.example.test", "paymentsAuthSecret": "token"},
	} {
		bad := awscdk.NewApp(&awscdk.AppProps{Context: &ctx})
		if _, err := PropsFromContext(bad.Node()); err == nil {
			t.Errorf("%s: %v accepted", name, ctx)
		}
	}
}

const authARN = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:pay-token-AbCdEf"

// The trust knobs: operators (context, else environment), http for an
// emulator, the payments agent's auth, unsigned replies.
func TestTrustFromContext(t *testing.T) {
	ops := "arn:aws:iam::111122223333:role/ops, arn:aws:iam::111122223333:user/alice"
	wantOps := []string{"arn:aws:iam::111122223333:role/ops", "arn:aws:iam::111122223333:user/alice"}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{
		"paymentsUrl":          "http://127.0.0.1:8090",
		"allowHttp":            "true",
		"operatorRoles":        ops,
		"paymentsAuthSecret":   authARN,
		"paymentsAuthHeader":   "X-Api-Key",
		"allowUnsignedReplies": true, // cdk.json gives a bool
	}})
	p, err := propsFrom(app.Node(), func(string) string { return "arn:aws:iam::111122223333:role/from-env" })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.OperatorRoleARNs, wantOps) {
		t.Errorf("operators %v, want %v (the context wins over the environment)", p.OperatorRoleARNs, wantOps)
	}
	a := p.Agents[0]
	if !a.AllowHTTP || !reflect.DeepEqual(a.Auth, &sascdk.AgentAuth{SecretARN: authARN, Header: "X-Api-Key"}) || !p.AllowUnsignedReplies {
		t.Errorf("agent %+v auth %+v, unsigned %v", a, a.Auth, p.AllowUnsignedReplies)
	}

	if !reflect.DeepEqual(p.DeployerRoleARNs, []string{"arn:aws:iam::111122223333:role/from-env"}) {
		t.Errorf("deployers %v, want the environment's when the context has none", p.DeployerRoleARNs)
	}
	env := func(k string) string {
		return map[string]string{"SAS_OPERATOR_ROLE_ARNS": ops, "SAS_DEPLOYER_ROLE_ARNS": ops}[k]
	}
	app = awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"paymentsUrl": "https://p.example.test"}})
	p, err = propsFrom(app.Node(), env)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.OperatorRoleARNs, wantOps) || !reflect.DeepEqual(p.DeployerRoleARNs, wantOps) || p.Agents[0].AllowHTTP || p.Agents[0].Auth != nil || p.AllowUnsignedReplies {
		t.Errorf("from the environment: %+v", p)
	}
	// An empty context value says "no operators", whatever the environment.
	app = awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"paymentsUrl": "https://p.example.test", "operatorRoles": ""}})
	if p, err = propsFrom(app.Node(), env); err != nil || p.OperatorRoleARNs != nil {
		t.Errorf("operatorRoles=\"\": %v, %v", p.OperatorRoleARNs, err)
	}

	// Per agent, in the agents key.
	app = awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{
		"agents": `{"payments": {"url": "https://p.example.test", "authSecret": "` + authARN + `",
			"authKmsKey": "arn:aws:kms:eu-west-1:111122223333:key/k-1"}}`,
	}})
	if p, err = propsFrom(app.Node(), env); err != nil {
		t.Fatal(err)
	}
	if want := (&sascdk.AgentAuth{SecretARN: authARN, KMSKeyARN: "arn:aws:kms:eu-west-1:111122223333:key/k-1"}); !reflect.DeepEqual(p.Agents[0].Auth, want) {
		t.Errorf("agents auth %+v, want %+v", p.Agents[0].Auth, want)
	}
}

// TestAgentsFromContext: many built-in agents, from -c (a JSON string) or
// from cdk.json (an object), with a workflow file naming them.
func TestAgentsFromContext(t *testing.T) {
	want := func() []sascdk.Agent {
		airline := sascdk.HTTPAgent("airline", "https://airline.example.test")
		airline.Concurrency, airline.PriorityConcurrency = 5, 2
		return []sascdk.Agent{
			airline,
			sascdk.HTTPAgent("hotels", "https://hotels.example.test"),
			sascdk.HTTPAgent("payments", "https://payments.example.test"),
		}
	}()
	agents := `{"payments": {"url": "https://payments.example.test"}, "hotels": {"url": "https://hotels.example.test"},
		"airline": {"url": "https://airline.example.test", "concurrency": 5, "priorityConcurrency": 2}}`
	for name, value := range map[string]any{
		"string": agents,
		"object": map[string]any{
			"payments": map[string]any{"url": "https://payments.example.test"},
			"hotels":   map[string]any{"url": "https://hotels.example.test"},
			"airline":  map[string]any{"url": "https://airline.example.test", "concurrency": 5, "priorityConcurrency": 2},
		},
	} {
		app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{
			"agents":        value,
			"workflowsFile": "../workflow/testdata/travel.json",
		}})
		p, err := PropsFromContext(app.Node())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(p.Agents, want) {
			t.Errorf("%s: agents %+v, want %+v", name, p.Agents, want)
		}
	}
	// The reference file names "airline", "hotels" and "payments": one
	// missing is refused with the path.
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{
		"agents":        `{"payments": {"url": "https://payments.example.test"}}`,
		"workflowsFile": "../workflow/testdata/travel.json",
	}})
	_, err := PropsFromContext(app.Node())
	if want := `travel.json: workflows[0].steps[0].agent: "airline" is not an agent of this deployment (agents: payments)`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("PropsFromContext = %v, want %q", err, want)
	}
}

// The schedules key: a JSON string from -c, or a list from cdk.json, each
// a sascdk.Schedule, checked with the rest.
func TestSchedulesFromContext(t *testing.T) {
	list := `[{"name": "nightly", "expression": "cron(0 2 * * ? *)", "timeZone": "Europe/Paris", "flexibleWindowMinutes": 15, "workflow": "payment", "payload": {"amount": 1}, "overlap": "skip"}]`
	var fromJSON []any
	if err := json.Unmarshal([]byte(list), &fromJSON); err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{list, fromJSON} {
		app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"paymentsUrl": "https://p.example.test", "schedules": v}})
		p, err := propsFrom(app.Node(), func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		want := []sascdk.Schedule{{Name: "nightly", Expression: "cron(0 2 * * ? *)", TimeZone: "Europe/Paris", FlexibleWindow: 15 * time.Minute,
			Workflow: "payment", Payload: json.RawMessage(`{"amount":1}`), Overlap: "skip"}}
		if len(p.Schedules) != 1 || p.Schedules[0].Name != want[0].Name || p.Schedules[0].FlexibleWindow != want[0].FlexibleWindow ||
			p.Schedules[0].Overlap != "skip" || p.Schedules[0].TimeZone != want[0].TimeZone {
			t.Errorf("%T: schedules %+v, want %+v", v, p.Schedules, want)
		}
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"paymentsUrl": "https://p.example.test",
		"schedules": `[{"name": "nightly", "expression": "cron(0 2 * * ? *)", "workflow": "nope"}]`}})
	if _, err := propsFrom(app.Node(), func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), `workflow "nope"`) {
		t.Errorf("a schedule of no workflow: %v", err)
	}
}

// The tenants key: a JSON string from -c, or a list from cdk.json, each a
// sascdk.Tenant by its sender ids, checked with the rest.
func TestTenantsFromContext(t *testing.T) {
	list := `[{"name": "acme", "senderIds": ["AROAACME1"], "replyQueueArns": ["arn:aws:sqs:eu-west-1:123456789012:acme-status"]}]`
	var fromJSON []any
	if err := json.Unmarshal([]byte(list), &fromJSON); err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{list, fromJSON} {
		app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"paymentsUrl": "https://p.example.test", "tenants": v}})
		p, err := propsFrom(app.Node(), func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Tenants) != 1 || p.Tenants[0].Name != "acme" || !reflect.DeepEqual(p.Tenants[0].SenderIDs, []string{"AROAACME1"}) ||
			!reflect.DeepEqual(p.Tenants[0].ReplyQueueARNs, []string{"arn:aws:sqs:eu-west-1:123456789012:acme-status"}) {
			t.Errorf("%T: tenants %+v", v, p.Tenants)
		}
	}
	for v, want := range map[string]string{
		`[{"name": "Acme", "senderIds": ["AROAACME1"]}]`: "a name is 1-32 characters",
		`[{"name": "acme", "roles": []}]`:                `unknown field "roles"`,
	} {
		app := awscdk.NewApp(&awscdk.AppProps{Context: &map[string]any{"paymentsUrl": "https://p.example.test", "tenants": v}})
		if _, err := propsFrom(app.Node(), func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("tenants %s: %v, want %q", v, err, want)
		}
	}
}
