package sascdk

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/workflow"
)

// hundredAgents is a deployment of n built-in agents, each with a priority
// lane, and workflows that name every one of them.
func hundredAgents(n int, nested bool) Props {
	p := Props{DistDir: fixtureDist, NestedAgentStacks: nested}
	var steps []workflow.Step
	for i := range n {
		a := HTTPAgent(fmt.Sprintf("agent-%03d", i), fmt.Sprintf("https://agent-%03d.example.test", i))
		a.PriorityConcurrency = 2
		p.Agents = append(p.Agents, a)
		steps = append(steps, workflow.Step{Name: fmt.Sprintf("s%03d", i), Agent: a.Name, Action: "POST /x", Timeout: workflow.Duration(30 * time.Second)})
	}
	for i := 0; i < len(steps); i += 25 {
		p.Workflows = append(p.Workflows, workflow.Workflow{Name: fmt.Sprintf("w%d", i/25), Steps: steps[i:min(i+25, len(steps))]})
	}
	return p
}

// TestHundredAgentsWithinLimits synthesizes 100 agents, each with a lane,
// in nested agent stacks, and checks every template the assembly holds
// against CloudFormation's 500 resources and every function's environment
// against Lambda's 4 KB; the same deployment in one stack is refused by the
// synth-time check with a one-line reason.
func TestHundredAgentsWithinLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("synthesizes a hundred agents (about a minute)")
	}
	all(t) // the shared runtime and fixtureDist

	flatApp := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: cdkJSONContext()})
	flat := awscdk.NewStack(flatApp, jsii.String("Flat"), nil)
	if _, err := New(flat, "Default", ptrTo(hundredAgents(100, false))); err != nil {
		t.Fatal(err)
	}
	over := regexp.MustCompile(`^stack Flat: 20[0-9]{2} resources, over CloudFormation's limit of 500 per template: set Props.NestedAgentStacks to put each agent in a nested stack of its own$`)
	if problems := CheckLimits(flat); len(problems) != 1 || !over.MatchString(problems[0]) {
		t.Errorf("one stack of 100 agents, before synth: %q, want one line over the limit", problems)
	}
	err := Synth(flatApp)
	if err == nil || strings.Contains(err.Error(), "\n") || !regexp.MustCompile(`^synth: TooManyResourcesInStack: Number of resources in stack 'Flat': 20[0-9]{2} is greater than allowed maximum of 500: .*; set Props.NestedAgentStacks`).MatchString(err.Error()) {
		t.Errorf("one stack of 100 agents, at synth: %v, want one line over the limit", err)
	}

	start := time.Now()
	outdir := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir), Context: cdkJSONContext()})
	stack := awscdk.NewStack(app, jsii.String("Hundred"), nil)
	if _, err := New(stack, "Default", ptrTo(hundredAgents(100, true))); err != nil {
		t.Fatal(err)
	}
	if p := CheckLimits(stack); len(p) != 0 {
		t.Fatalf("nested: %q", p)
	}
	if err := Synth(app); err != nil {
		t.Fatal(err)
	}
	synth := time.Since(start)

	templates, _ := filepath.Glob(filepath.Join(outdir, "*.template.json"))
	if len(templates) != 101 {
		t.Fatalf("%d templates, want the core's and one per agent", len(templates))
	}
	most, core, functions := 0, 0, 0
	for _, path := range templates {
		var doc struct {
			Resources  map[string]map[string]any
			Parameters map[string]any
			Outputs    map[string]any
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		n := len(doc.Resources)
		if n > MaxResourcesPerTemplate || len(doc.Parameters) > 200 || len(doc.Outputs) > 200 {
			t.Errorf("%s: %d resources, %d parameters, %d outputs", filepath.Base(path), n, len(doc.Parameters), len(doc.Outputs))
		}
		if strings.HasSuffix(path, "Hundred.template.json") {
			core = n
			// Policies that do not grow with the agents: the deployment's
			// queue name prefix and its reply queues' pattern, not a
			// hundred ARNs; no queue policy of the core names an agent's
			// role (each reply queue's own policy does, in its stack).
			prefix := regexp.MustCompile(`:Hundred-[0-9a-f]{8}-\*"`)
			replies := regexp.MustCompile(`:Hundred-[0-9a-f]{8}-\*-replies"`)
			if !prefix.Match(raw) || !replies.Match(raw) {
				t.Errorf("the core template names no agent queue prefix or reply queue pattern")
			}
		} else {
			most = max(most, n)
		}
		for id, r := range doc.Resources {
			if r["Type"] != "AWS::Lambda::Function" {
				continue
			}
			functions++
			if size := TemplateEnvSize(props(r)); size > lambdaEnvLimit {
				t.Errorf("%s %s: environment up to %d bytes", filepath.Base(path), id, size)
			}
		}
	}
	if functions != 102 {
		t.Errorf("%d functions, want 102", functions)
	}
	t.Logf("100 agents with lanes: the core template %d resources, each agent's at most %d, %d templates; synthesized in %s",
		core, most, len(templates), synth.Round(time.Second))
}

func ptrTo[T any](v T) *T { return &v }
