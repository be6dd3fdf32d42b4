package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/examples/travel/trip"
)

// requireSynthEnv, when set, makes missing bootstraps a failure rather
// than a skip: `make test` sets it after building them.
const requireSynthEnv = "TRAVEL_REQUIRE_SYNTH"

func TestMain(m *testing.M) {
	// Node starts with the first jsii call and inherits the environment:
	// the Makefile sets CDK_VALIDATION=false (aws-cdk-lib's own template
	// validation, seconds of WASM per synth) as the repository's does.
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// The app synthesizes with the built bootstraps, and each agent has its
// queue, dead-letter queue and function, fed by an event source.
func TestSynth(t *testing.T) {
	cfg := Config{Arch: "arm64", DistDir: defaultDistDir, AgentsDir: defaultAgentsDir}
	if err := cfg.Missing(); err != nil {
		if os.Getenv(requireSynthEnv) != "" {
			t.Fatal(err)
		}
		t.Skipf("%v; `make test` in examples/travel builds them and runs this test", err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack, sas, err := NewStack(app, StackID, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := assertions.Template_FromStack(stack, nil)
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range doc.Resources {
		count[r.Type]++
	}
	// The intake, scheduler and control queues and one per agent, each with
	// its DLQ, and each agent's reply queue (docs/trust.md, "A reply queue
	// per agent"); the scheduler, the supervisor and one function per
	// agent; event sources: the scheduler's three, each agent's queue to
	// its function, and each agent's reply queue to the scheduler.
	for typ, want := range map[string]int{"AWS::SQS::Queue": 12, "AWS::Lambda::Function": 4, "AWS::Lambda::EventSourceMapping": 7} {
		if count[typ] != want {
			t.Errorf("%s: %d, want %d", typ, count[typ], want)
		}
	}

	id := func(c awscdk.CfnElement) string { return *stack.GetLogicalId(c) }
	for _, name := range []string{trip.TravelAgent, trip.PaymentsAgent} {
		a := sas.Agent(name)
		if a == nil || a.Queue == nil || a.DLQ == nil || a.Function == nil {
			t.Fatalf("agent %s: want a queue, a DLQ and a function, got %+v", name, a)
		}
		queue := id(a.Queue.Node().DefaultChild().(awscdk.CfnElement))
		dlq := id(a.DLQ.Node().DefaultChild().(awscdk.CfnElement))
		fn := id(a.Function.Node().DefaultChild().(awscdk.CfnElement))

		redrive, _ := doc.Resources[queue].Properties["RedrivePolicy"].(map[string]any)
		if !refersTo(redrive["deadLetterTargetArn"], dlq) {
			t.Errorf("agent %s: its queue's dead-letter target is %v, want %s", name, redrive["deadLetterTargetArn"], dlq)
		}
		props := doc.Resources[fn].Properties
		if props["Handler"] != "bootstrap" || props["Runtime"] != "provided.al2023" {
			t.Errorf("agent %s: handler %v, runtime %v", name, props["Handler"], props["Runtime"])
		}
		env, _ := props["Environment"].(map[string]any)["Variables"].(map[string]any)
		if !refersTo(env["SAS_AGENT_QUEUE_URL"], queue) || env["SAS_AGENT_NAME"] != name {
			t.Errorf("agent %s: environment %v", name, env)
		}
		mappings := 0
		for _, r := range doc.Resources {
			if r.Type == "AWS::Lambda::EventSourceMapping" && refersTo(r.Properties["EventSourceArn"], queue) && refersTo(r.Properties["FunctionName"], fn) {
				mappings++
			}
		}
		if mappings != 1 {
			t.Errorf("agent %s: %d event sources from its queue to its function, want 1", name, mappings)
		}
	}
}

// refersTo reports whether a CloudFormation value is a Ref or GetAtt of
// the resource with logical id id.
func refersTo(v any, id string) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	if ref, ok := m["Ref"]; ok {
		return ref == id
	}
	if att, ok := m["Fn::GetAtt"].([]any); ok && len(att) > 0 {
		return att[0] == id
	}
	return false
}

// -c approvalTimeout sets how long trip-approval waits for its manager; a
// value that is not a positive duration is refused with why.
func TestApprovalTimeoutFromContext(t *testing.T) {
	for v, want := range map[string]time.Duration{"": trip.ApprovalTimeout, "45s": 45 * time.Second} {
		ctx := map[string]any{}
		if v != "" {
			ctx[ctxApprovalTimeout] = v
		}
		app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())})
		cfg := ConfigFromContext(app.Node())
		if err := cfg.Invalid(); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		ws := cfg.Props().Workflows
		got := ws[len(ws)-1]
		if got.Name != trip.ApprovalName || time.Duration(got.Steps[3].Callback.Timeout) != want {
			t.Errorf("%q: %s's approval waits %s, want %s", v, got.Name, time.Duration(got.Steps[3].Callback.Timeout), want)
		}
	}
	for _, bad := range []string{"soon", "-5s", "0s"} {
		ctx := map[string]any{ctxApprovalTimeout: bad}
		app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())})
		if err := ConfigFromContext(app.Node()).Invalid(); err == nil || !strings.Contains(err.Error(), "approvalTimeout="+bad) {
			t.Errorf("%q: %v, want a refusal naming it", bad, err)
		}
	}
}
