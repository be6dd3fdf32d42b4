package sascdk

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/internal/sizing"
)

// sourceQueues maps each queue that feeds a function to its DLQ and consumer.
var sourceQueues = map[string]struct{ dlq, consumer string }{
	"IntakeQueue":        {"IntakeQueueDLQ", "Scheduler"},
	"SchedulerQueue":     {"SchedulerQueueDLQ", "Scheduler"},
	"ControlQueue":       {"ControlQueueDLQ", "Scheduler"},
	"AgentpaymentsQueue": {"AgentpaymentsQueueDLQ", "AgentpaymentsFunction"},
	// An agent's replies: its own queue, dead letters with the scheduler
	// queue's (docs/trust.md, "A reply queue per agent").
	"AgentpaymentsReplies": {"SchedulerQueueDLQ", "Scheduler"},
}

func TestResourceCounts(t *testing.T) {
	def, _ := stacks(t)
	for typ, n := range map[string]float64{
		"AWS::SQS::Queue":                     9, // four queues, four DLQs, the agent's reply queue
		"AWS::DynamoDB::Table":                2,
		"AWS::Lambda::Function":               3,
		"AWS::Lambda::EventSourceMapping":     5,
		"AWS::Events::Rule":                   1,
		"AWS::SNS::Topic":                     1,
		"AWS::CloudWatch::Alarm":              4 + 3 + 1 + 1 + 1 + 1, // DLQs, errors, stuck step, supervisor not running, give-up rate, owed too long
		"AWS::IAM::Role":                      3,
		"AWS::Logs::LogGroup":                 3,
		"AWS::SNS::Subscription":              0, // only with AlertEmail
		"AWS::Lambda::EventInvokeConfig":      1, // the supervisor's
		"AWS::Lambda::LayerVersion":           0,
		"Custom::LogRetention":                0, // retention is set on our own log groups
		"AWS::IAM::ManagedPolicy":             0,
		"AWS::DynamoDB::GlobalTable":          0,
		"AWS::SQS::QueuePolicy":               9, // TLS-only guards and fences, one per queue
		"AWS::SecretsManager::Secret":         1, // the signing key
		"AWS::SecretsManager::ResourcePolicy": 0, // rejected by the emulators: IAM alone (docs/trust.md)
		"AWS::KMS::Key":                       1, // the alert topic's
		"AWS::Events::EventBus":               1, // the alert bus
		"AWS::Events::EventBusPolicy":         0, // the bus's own Policy property instead
		"AWS::Lambda::Permission":             1, // EventBridge → supervisor
		"AWS::CloudFormation::CustomResource": 0,
	} {
		check(t, typ, func() { def.tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
	}
}

func TestQueuesHaveDLQsEncryptionAndVisibility(t *testing.T) {
	def, _ := stacks(t)
	queues := def.resources("AWS::SQS::Queue")
	functions := def.resources("AWS::Lambda::Function")
	for q, want := range sourceQueues {
		p := props(queues[q])
		if p == nil {
			t.Errorf("queue %s missing", q)
			continue
		}
		rp, _ := p["RedrivePolicy"].(map[string]any)
		if got := ref(rp["deadLetterTargetArn"]); got != want.dlq {
			t.Errorf("%s: redrive to %q, want %q", q, got, want.dlq)
		}
		if got, _ := rp["maxReceiveCount"].(float64); got < 1 || got > 10 {
			t.Errorf("%s: maxReceiveCount %v, want 1..10", q, rp["maxReceiveCount"])
		}
		// Lambda's rule: visibility ≥ 6× the consumer's timeout.
		timeout := props(functions[want.consumer])["Timeout"].(float64)
		if vis, _ := p["VisibilityTimeout"].(float64); vis < 6*timeout {
			t.Errorf("%s: visibility %vs < 6 × %s timeout %vs", q, vis, want.consumer, timeout)
		}
	}
	for id, q := range queues {
		// The limit the code holds to (internal/sqslimits.MaxBodyBytes).
		if got, _ := props(q)["MaximumMessageSize"].(float64); got != 262144 {
			t.Errorf("%s: MaximumMessageSize %v, want 262144", id, props(q)["MaximumMessageSize"])
		}
		if props(q)["SqsManagedSseEnabled"] != true {
			t.Errorf("%s: SQS-managed SSE not enabled", id)
		}
		if strings.HasSuffix(id, "DLQ") {
			if _, ok := props(q)["RedrivePolicy"]; ok {
				t.Errorf("%s: a DLQ must not redrive further", id)
			}
		} else if got, _ := props(q)["MessageRetentionPeriod"].(float64); got != sizing.QueueRetention.Seconds() {
			// The supervisor's delivery horizon for a request is this
			// retention (docs/protocol.md, "Deadlines start at pick-up").
			t.Errorf("%s: MessageRetentionPeriod %v, want sizing.QueueRetention (%v s)", id, props(q)["MessageRetentionPeriod"], sizing.QueueRetention.Seconds())
		}
	}
	check(t, "every queue encrypted", func() {
		def.tmpl.AllResourcesProperties(jsii.String("AWS::SQS::Queue"), map[string]any{"SqsManagedSseEnabled": true})
	})
}

func TestTablesMatchTheStateStoreContract(t *testing.T) {
	def, _ := stacks(t)
	common := map[string]any{
		"BillingMode":                      "PAY_PER_REQUEST",
		"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
		"SSESpecification":                 map[string]any{"SSEEnabled": true},
	}
	orders := map[string]any{
		"KeySchema": []any{map[string]any{"AttributeName": "OrderID", "KeyType": "HASH"}},
		"AttributeDefinitions": []any{
			map[string]any{"AttributeName": "OrderID", "AttributeType": "S"},
			map[string]any{"AttributeName": "ListPK", "AttributeType": "S"},
			map[string]any{"AttributeName": "CreatedAt", "AttributeType": "N"},
		},
		"GlobalSecondaryIndexes": []any{map[string]any{
			"IndexName": "orders-created",
			"KeySchema": []any{
				map[string]any{"AttributeName": "ListPK", "KeyType": "HASH"},
				map[string]any{"AttributeName": "CreatedAt", "KeyType": "RANGE"},
			},
			"Projection": map[string]any{"ProjectionType": "INCLUDE", "NonKeyAttributes": []any{"Workflow", "Version", "Priority"}},
		}},
	}
	for k, v := range common {
		orders[k] = v
	}
	check(t, "orders table", func() {
		def.tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), assertions.Match_ObjectEquals(withTableDefaults(orders)))
	})

	state := props(def.resource(t, "AWS::DynamoDB::Table", "StateTable"))
	wantKeys := []any{
		map[string]any{"AttributeName": "OrderID", "KeyType": "HASH"},
		map[string]any{"AttributeName": "Step", "KeyType": "RANGE"},
	}
	if !reflect.DeepEqual(state["KeySchema"], wantKeys) {
		t.Errorf("state table keys %v, want %v", state["KeySchema"], wantKeys)
	}
	attrs := map[string]string{}
	for _, a := range state["AttributeDefinitions"].([]any) {
		a := a.(map[string]any)
		attrs[a["AttributeName"].(string)] = a["AttributeType"].(string)
	}
	if want := map[string]string{"OrderID": "S", "Step": "N", "IdxPK": "S", "IdxSK": "N"}; !reflect.DeepEqual(attrs, want) {
		t.Errorf("state table attributes %v, want %v", attrs, want)
	}
	for k, v := range common {
		if !reflect.DeepEqual(state[k], v) {
			t.Errorf("state table %s = %v, want %v", k, state[k], v)
		}
	}

	gsis := state["GlobalSecondaryIndexes"].([]any)
	if len(gsis) != 1 {
		t.Fatalf("state table has %d GSIs, want 1 (state-due)", len(gsis))
	}
	gsi := gsis[0].(map[string]any)
	if gsi["IndexName"] != "state-due" {
		t.Errorf("GSI name %v, want state-due", gsi["IndexName"])
	}
	wantGSIKeys := []any{
		map[string]any{"AttributeName": "IdxPK", "KeyType": "HASH"},
		map[string]any{"AttributeName": "IdxSK", "KeyType": "RANGE"},
	}
	if !reflect.DeepEqual(gsi["KeySchema"], wantGSIKeys) {
		t.Errorf("GSI keys %v, want %v", gsi["KeySchema"], wantGSIKeys)
	}
	proj := gsi["Projection"].(map[string]any)
	if proj["ProjectionType"] != "INCLUDE" {
		t.Errorf("GSI projection %v, want INCLUDE", proj["ProjectionType"])
	}
	wantAttrs := []string{"Attempt", "CompleteBy", "CreatedAt", "FailureCount", "LastError", "LockedBy", "ProcessState", "Shard", "StartedAt", "StepName", "UpdatedAt", "WaitingSince"}
	if got := strs(proj["NonKeyAttributes"]); !reflect.DeepEqual(got, wantAttrs) {
		t.Errorf("GSI projected attributes %v, want %v", got, wantAttrs)
	}
}

// TestIndexProjectionMatchesTheStore holds the stack's state-due projection
// to the one the code reads from (internal/dynamostore.IndexProjection, which
// also creates the local and test tables). This module cannot import the main
// one, so the list is read from the store's source: its string constants
// resolved by name, as the compiler would.
func TestIndexProjectionMatchesTheStore(t *testing.T) {
	def, _ := stacks(t)
	for _, tc := range []struct{ table, index, projection string }{
		{"StateTable", "state-due", "IndexProjection"},
		{"OrdersTable", "orders-created", "OrdersIndexProjection"},
	} {
		want := storeIndexProjection(t, filepath.Join("..", "..", "internal", "dynamostore"), tc.projection)
		table := props(def.resource(t, "AWS::DynamoDB::Table", tc.table))
		gsi := list(table["GlobalSecondaryIndexes"])[0].(map[string]any)
		var got []string
		for _, a := range list(gsi["Projection"].(map[string]any)["NonKeyAttributes"]) {
			got = append(got, ref(a))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s projects %v; internal/dynamostore.%s is %v", tc.index, got, tc.projection, want)
		}
	}
}

// storeIndexProjection parses the package in dir and evaluates its
// IndexProjection: a []string literal of string constants and literals.
func storeIndexProjection(t *testing.T, dir, varName string) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s (%v)", dir, err)
	}
	consts := map[string]string{}
	var list *ast.CompositeLit
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, n := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					switch {
					case g.Tok == token.CONST:
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if v, err := strconv.Unquote(lit.Value); err == nil {
								consts[n.Name] = v
							}
						}
					case g.Tok == token.VAR && n.Name == varName:
						list, _ = vs.Values[i].(*ast.CompositeLit)
					}
				}
			}
		}
	}
	if list == nil {
		t.Fatalf("%s declares no %s = []string{...}", dir, varName)
	}
	var out []string
	for _, e := range list.Elts {
		switch e := e.(type) {
		case *ast.Ident:
			v, ok := consts[e.Name]
			if !ok {
				t.Fatalf("IndexProjection names %s, not a string constant of %s", e.Name, dir)
			}
			out = append(out, v)
		case *ast.BasicLit:
			v, err := strconv.Unquote(e.Value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		default:
			t.Fatalf("IndexProjection holds %T, which this test cannot evaluate", e)
		}
	}
	return out
}

// withTableDefaults adds what every table carries besides the contract.
func withTableDefaults(p map[string]any) *map[string]any {
	p["DeletionProtectionEnabled"] = true
	return &p
}

func TestRemovalPolicy(t *testing.T) {
	def, variant := stacks(t)
	for _, tc := range []struct {
		name   string
		s      *synthesized
		policy string
		guard  bool
	}{{"default", def, "Retain", true}, {"variant", variant, "Delete", false}} {
		for _, typ := range []string{"AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::SNS::Topic", "AWS::Logs::LogGroup"} {
			for id, r := range tc.s.resources(typ) {
				if r["DeletionPolicy"] != tc.policy || r["UpdateReplacePolicy"] != tc.policy {
					t.Errorf("%s %s: DeletionPolicy %v UpdateReplacePolicy %v, want %s",
						tc.name, id, r["DeletionPolicy"], r["UpdateReplacePolicy"], tc.policy)
				}
			}
		}
		for id, r := range tc.s.resources("AWS::DynamoDB::Table") {
			if props(r)["DeletionProtectionEnabled"] != tc.guard {
				t.Errorf("%s %s: deletion protection %v, want %v", tc.name, id, props(r)["DeletionProtectionEnabled"], tc.guard)
			}
		}
	}
}

// functionBootstraps maps the default stack's functions to their bootstraps.
var functionBootstraps = map[string]string{"Scheduler": "scheduler", "AgentpaymentsFunction": "agent", "Supervisor": "supervisor"}

func TestFunctions(t *testing.T) {
	def, variant := stacks(t)
	for _, tc := range []struct {
		s      *synthesized
		arch   string
		goarch string
	}{{def, "arm64", "arm64"}, {variant, "x86_64", "amd64"}} {
		fns := tc.s.resources("AWS::Lambda::Function")
		for name, bootstrap := range functionBootstraps {
			r, ok := fns[name]
			if !ok {
				t.Errorf("function %s missing", name)
				continue
			}
			p := props(r)
			if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" {
				t.Errorf("%s: runtime %v handler %v, want provided.al2023 bootstrap", name, p["Runtime"], p["Handler"])
			}
			if got := strs(p["Architectures"]); !reflect.DeepEqual(got, []string{tc.arch}) {
				t.Errorf("%s: architectures %v, want [%s]", name, got, tc.arch)
			}
			if got, want := ref(p["LoggingConfig"].(map[string]any)["LogGroup"]), strings.TrimSuffix(name, "Function")+"Logs"; got != want {
				t.Errorf("%s: logs to %s, want its own log group %s", name, got, want)
			}
			// The staged asset is the bootstrap built for this function and arch.
			body, err := os.ReadFile(filepath.Join(tc.s.assetDir(t, p), "bootstrap"))
			if err != nil {
				t.Errorf("%s: asset: %v", name, err)
			} else if want := distFakeMarker + tc.goarch + "/" + bootstrap + "\n"; string(body) != want {
				t.Errorf("%s: ships %q, want %q", name, body, want)
			}
		}
		// A loop of scheduler ↔ agent is the workflow itself; the supervisor
		// starts fresh chains and keeps Lambda's loop guard.
		for name, want := range map[string]any{"Scheduler": "Allow", "AgentpaymentsFunction": "Allow", "Supervisor": nil} {
			if got := props(fns[name])["RecursiveLoop"]; got != want && !(want == nil && got == "Terminate") {
				t.Errorf("%s: RecursiveLoop %v, want %v", name, got, want)
			}
		}
	}
}

func TestFunctionEnvironment(t *testing.T) {
	def, variant := stacks(t)
	tables := map[string]string{"SAS_ORDERS_TABLE": "OrdersTable", "SAS_STATE_TABLE": "StateTable", "SAS_INDEX_SHARDS": "8"}
	alerts := map[string]string{"SAS_ALERT_TOPIC_ARN": "AlertTopic", "SAS_EVENT_BUS_NAME": "AlertBus"}
	// The agents' queues and the limits are in the file it names.
	routing := map[string]string{"SAS_WORKFLOWS_FILE": "workflows.json"}
	want := map[string]map[string]string{
		"Scheduler": merge(tables, alerts, routing, map[string]string{
			"SAS_INTAKE_QUEUE_URL":    "IntakeQueue",
			"SAS_SCHEDULER_QUEUE_URL": "SchedulerQueue",
			"SAS_CONTROL_QUEUE_URL":   "ControlQueue",
			"SAS_SIGNING_KEY_SECRET":  "SigningKey",
			// Unsigned replies are dropped unless the deployer allows them.
			"SAS_REQUIRE_SIGNED_REPLIES": "true",
		}),
		// No tables: the agent never touches the state store.
		"AgentpaymentsFunction": {"SAS_SCHEDULER_QUEUE_URL": "AgentpaymentsReplies", "SAS_AGENT_QUEUE_URL": "AgentpaymentsQueue", "SAS_AGENT_NAME": "payments", "SAS_WORKFLOWS_FILE": "workflows.json"},
		"Supervisor": merge(tables, alerts, routing, map[string]string{
			"SAS_SCHEDULER_QUEUE_URL": "SchedulerQueue",
			"SAS_CONTROL_QUEUE_URL":   "ControlQueue",
		}),
	}
	for fn, w := range want {
		if got := def.env(t, fn); !reflect.DeepEqual(got, w) {
			t.Errorf("%s environment:\n got %v\nwant %v", fn, got, w)
		}
	}
	// The variant's allow-list arrives as queue URLs, the prefix kept.
	if got, want := variant.env(t, "Scheduler")["SAS_ALLOWED_REPLY_QUEUES"],
		"https://sqs.eu-west-1.amazonaws.com/111122223333/caller-status,https://sqs.eu-west-1.amazonaws.com/111122223333/tenant-*"; got != want {
		t.Errorf("variant SAS_ALLOWED_REPLY_QUEUES = %q, want %q", got, want)
	}
	if got := variant.env(t, "Scheduler")["SAS_REQUIRE_SIGNED_REPLIES"]; got != "false" {
		t.Errorf("variant (AllowUnsignedReplies) SAS_REQUIRE_SIGNED_REPLIES = %q, want false", got)
	}
	// The built-in agent's service under both names: the new and the old.
	env := variant.env(t, "AgentpaymentsFunction")
	if env["SAS_AGENT_BASE_URL"] != "https://payments.example.test" || env["SAS_PAYMENTS_URL"] != "https://payments.example.test" {
		t.Errorf("variant agent SAS_AGENT_BASE_URL = %q, SAS_PAYMENTS_URL = %q", env["SAS_AGENT_BASE_URL"], env["SAS_PAYMENTS_URL"])
	}
}

func TestEventSourceMappings(t *testing.T) {
	def, _ := stacks(t)
	var wired []string
	for id, r := range def.resources("AWS::Lambda::EventSourceMapping") {
		p := props(r)
		sc, _ := p["ScalingConfig"].(map[string]any)
		wired = append(wired, fmt.Sprintf("%s→%s max %v", ref(p["EventSourceArn"]), ref(p["FunctionName"]), sc["MaximumConcurrency"]))
		if got := strs(p["FunctionResponseTypes"]); !reflect.DeepEqual(got, []string{"ReportBatchItemFailures"}) {
			t.Errorf("%s: FunctionResponseTypes %v, want [ReportBatchItemFailures]", id, got)
		}
		if p["BatchSize"] != 10.0 {
			t.Errorf("%s: BatchSize %v, want 10", id, p["BatchSize"])
		}
		if w, _ := p["MaximumBatchingWindowInSeconds"].(float64); w < 1 {
			t.Errorf("%s: no batching window", id)
		}
	}
	sort.Strings(wired)
	if want := []string{
		"AgentpaymentsQueue→AgentpaymentsFunction max 20",
		"AgentpaymentsReplies→Scheduler max 2",
		"ControlQueue→Scheduler max 10",
		"IntakeQueue→Scheduler max 10",
		"SchedulerQueue→Scheduler max 10",
	}; !reflect.DeepEqual(wired, want) {
		t.Errorf("event sources %v, want %v", wired, want)
	}
	check(t, "partial batch responses everywhere", func() {
		def.tmpl.AllResourcesProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
		})
	})
}

func TestSupervisorSchedule(t *testing.T) {
	def, _ := stacks(t)
	rule := props(def.resource(t, "AWS::Events::Rule", "SupervisorSchedule"))
	if rule["ScheduleExpression"] != "rate(1 minute)" {
		t.Errorf("schedule %v, want rate(1 minute)", rule["ScheduleExpression"])
	}
	targets := list(rule["Targets"])
	if len(targets) != 1 || ref(targets[0].(map[string]any)["Arn"]) != "Supervisor" {
		t.Errorf("rule targets %v, want the supervisor only", targets)
	}
	check(t, "EventBridge may invoke the supervisor", func() {
		def.tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), map[string]any{
			"Action":       "lambda:InvokeFunction",
			"Principal":    "events.amazonaws.com",
			"FunctionName": map[string]any{"Fn::GetAtt": []any{def.logicalID(t, "AWS::Lambda::Function", "Supervisor"), "Arn"}},
		})
	})
	// Lambda's own async retries would replay a stale sweep: none.
	check(t, "no async retries of a sweep", func() {
		def.tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), map[string]any{
			"FunctionName":         map[string]any{"Ref": def.logicalID(t, "AWS::Lambda::Function", "Supervisor")},
			"MaximumRetryAttempts": 0,
		})
	})
}

func TestAlarms(t *testing.T) {
	def, _ := stacks(t)
	type key struct{ namespace, metric, dimension string }
	got := map[key]bool{}
	for id, r := range def.resources("AWS::CloudWatch::Alarm") {
		p := props(r)
		if a := strs(p["AlarmActions"]); !reflect.DeepEqual(a, []string{"AlertTopic"}) {
			t.Errorf("%s: alarm actions %v, want the alert topic", id, a)
		}
		dim := ""
		for _, d := range list(p["Dimensions"]) {
			dim = ref(d.(map[string]any)["Value"])
		}
		got[key{p["Namespace"].(string), p["MetricName"].(string), dim}] = true
	}
	want := []key{
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", "IntakeQueueDLQ"},
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", "SchedulerQueueDLQ"},
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", "ControlQueueDLQ"},
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", "AgentpaymentsQueueDLQ"},
		{"AWS/Lambda", "Errors", "Scheduler"},
		{"AWS/Lambda", "Errors", "AgentpaymentsFunction"},
		{"AWS/Lambda", "Errors", "Supervisor"},
		{"AWS/Lambda", "Invocations", "Supervisor"},
		{MetricNamespace, StuckStepMetric, ""},
		{MetricNamespace, metrics.GiveUps, ""},
		{MetricNamespace, metrics.OwedOldestAge, ""},
	}
	for _, k := range want {
		if !got[k] {
			t.Errorf("no alarm on %v", k)
		}
	}
	check(t, "DLQ depth > 0 alarms", func() {
		def.tmpl.ResourcePropertiesCountIs(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"MetricName":         "ApproximateNumberOfMessagesVisible",
			"ComparisonOperator": "GreaterThanThreshold",
			"Threshold":          0,
		}, jsii.Number(4))
	})
	check(t, "stuck-step alarm", func() {
		def.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"Namespace":          "SAS",
			"MetricName":         "OldestStuckStepAgeSeconds",
			"ComparisonOperator": "GreaterThanThreshold",
			"Threshold":          300,
			"Unit":               assertions.Match_Absent(),
		})
	})
	check(t, "give-up rate alarm", func() {
		def.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"Namespace":          "SAS",
			"MetricName":         "GiveUps",
			"Statistic":          "Sum",
			"Period":             300,
			"ComparisonOperator": "GreaterThanOrEqualToThreshold",
			"Threshold":          5,
		})
	})
}

// TestDashboard: one dashboard, whose body names the supervisor's metrics,
// the queues' depth and age, and the functions' duration (docs/console.md).
func TestDashboard(t *testing.T) {
	def, _ := stacks(t)
	check(t, "one dashboard", func() {
		def.tmpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(1))
	})
	body, err := json.Marshal(props(def.resource(t, "AWS::CloudWatch::Dashboard", "Dashboard"))["DashboardBody"])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"OldestStuckStepAgeSeconds", "GiveUps", "Rescues", "Held", "ApproximateAgeOfOldestMessage", "ApproximateNumberOfMessagesVisible", "Duration", "Errors"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
	// Every metric the actors publish, by the names they publish it under
	// (internal/metrics), the agents' by agent.
	for _, want := range metricNames() {
		if !strings.Contains(string(body), `\"`+want+`\"`) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
	for _, want := range []string{`\"QueueWait\",\"Agent\",\"payments\"`, `\"ExecutionTime\",\"Agent\",\"payments\"`, `\"AgentNoOutcome\",\"Agent\",\"payments\"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

// metricNames are the names of every metric the actors publish.
func metricNames() []string {
	var out []string
	v := reflect.ValueOf(metrics)
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; name != "Namespace" && !strings.HasPrefix(name, "Dim") {
			out = append(out, v.Field(i).String())
		}
	}
	return out
}

// TestMetricNamesMatchTheCode holds metrics.go to internal/metrics, whose
// string constants (its units aside) are read from its source, as
// TestIndexProjectionMatchesTheStore reads the store's.
func TestMetricNamesMatchTheCode(t *testing.T) {
	t.Parallel()
	code := map[string]string{}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join("..", "..", "internal", "metrics", "metrics.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Unit" {
				continue
			}
			for i, n := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					code[n.Name] = v
				}
			}
		}
	}
	here := map[string]string{}
	v := reflect.ValueOf(metrics)
	for i := range v.NumField() {
		here[v.Type().Field(i).Name] = v.Field(i).String()
	}
	if !reflect.DeepEqual(here, code) {
		t.Errorf("sascdk's metric names\n %v\ninternal/metrics'\n %v", here, code)
	}
	if MetricNamespace != code["Namespace"] || StuckStepMetric != code["OldestStuckStepAge"] {
		t.Errorf("MetricNamespace %q, StuckStepMetric %q: not the code's", MetricNamespace, StuckStepMetric)
	}
}

// TestOwedTooLongAlarm: what a give-up owes and has not sent for longer
// than OwedAlarmAge (default 5 minutes) pages an operator, on the metric
// the supervisor publishes (internal/metrics.OwedOldestAge).
func TestOwedTooLongAlarm(t *testing.T) {
	def, _ := stacks(t)
	check(t, "owed-too-long alarm", func() {
		def.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"Namespace":          metrics.Namespace,
			"MetricName":         metrics.OwedOldestAge,
			"Statistic":          "Maximum",
			"Period":             60,
			"ComparisonOperator": "GreaterThanThreshold",
			"Threshold":          300,
			"EvaluationPeriods":  1,
			"Dimensions":         assertions.Match_Absent(),
		})
	})
}

// TestXRayTracing: off by default; Props.XRayTracing makes every function
// trace actively, with the permission to send its traces.
func TestXRayTracing(t *testing.T) {
	def, variant := stacks(t)
	fns := variant.tmpl.FindResources(jsii.String("AWS::Lambda::Function"), nil)
	if len(*fns) < 3 {
		t.Fatalf("%d functions", len(*fns))
	}
	for id, r := range *fns {
		p := (*r)["Properties"].(map[string]any)
		if tc, _ := p["TracingConfig"].(map[string]any); tc["Mode"] != "Active" {
			t.Errorf("variant function %s: TracingConfig %v, want Mode Active", id, p["TracingConfig"])
		}
	}
	check(t, "the variant's roles may send traces", func() {
		variant.tmpl.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
			"PolicyDocument": assertions.Match_ObjectLike(&map[string]any{
				"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
					"Action": []any{"xray:PutTelemetryRecords", "xray:PutTraceSegments"}, "Effect": "Allow", "Resource": "*",
				})}),
			}),
		})
	})
	for id, r := range *def.tmpl.FindResources(jsii.String("AWS::Lambda::Function"), nil) {
		if tc, ok := (*r)["Properties"].(map[string]any)["TracingConfig"]; ok {
			t.Errorf("default function %s: TracingConfig %v, want none (off by default)", id, tc)
		}
	}
}

func TestAlertingAndOutputs(t *testing.T) {
	def, variant := stacks(t)
	for _, out := range []string{"IntakeQueueUrl", "SchedulerQueueUrl", "AgentQueueUrl", "OrdersTableName", "StateTableName", "AlertTopicArn", "SigningKeySecretArn"} {
		check(t, "output "+out, func() { def.tmpl.HasOutput(jsii.String(out), map[string]any{}) })
	}
	// Every DLQ has its output, the control queue's too (issue 29 §3), and
	// the supervisor role's unique id names its messages' sender for the
	// console's redrive.
	outputs, _ := def.doc["Outputs"].(map[string]any)
	for out, want := range map[string]string{"IntakeDLQUrl": "IntakeQueueDLQ", "SchedulerDLQUrl": "SchedulerQueueDLQ",
		"ControlDLQUrl": "ControlQueueDLQ", "AgentDLQUrl": "AgentpaymentsQueueDLQ", "SupervisorRoleId": "SupervisorRole"} {
		o, _ := outputs[out].(map[string]any)
		if got := ref(o["Value"]); got != want {
			t.Errorf("output %s is %q, want %s's", out, got, want)
		}
	}
	if o, _ := outputs["SupervisorRoleId"].(map[string]any); !strings.Contains(fmt.Sprint(o["Value"]), "RoleId") {
		t.Errorf("output SupervisorRoleId is %v, want the role's RoleId", o["Value"])
	}
	check(t, "variant email subscription", func() {
		variant.tmpl.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), map[string]any{
			"Protocol": "email", "Endpoint": "ops@example.test",
		})
	})
}

// logicalID finds the template's logical id of a construct.
func (s *synthesized) logicalID(t *testing.T, typ, constructID string) string {
	t.Helper()
	for id, r := range s.doc["Resources"].(map[string]any) {
		if r.(map[string]any)["Type"] == typ && construct(id) == constructID {
			return id
		}
	}
	t.Fatalf("no %s %q", typ, constructID)
	return ""
}

func TestWarnsWithoutPaymentsURL(t *testing.T) {
	def, variant := stacks(t)
	// Read from the cloud assembly: assertions.Annotations would force a
	// second synthesis of the whole app.
	if got := def.warnings(t); len(got) != 1 || !strings.Contains(got[0], `agent "payments" has no base URL`) {
		t.Errorf("default stack warnings %q, want the missing base URL", got)
	}
	if got := variant.warnings(t); len(got) != 0 {
		t.Errorf("variant stack warnings %q, want none", got)
	}
}
