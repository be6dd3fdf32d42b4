//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/workflow"
)

// EnvManyAgents is how many agents TestManyAgents deploys (make e2e sets
// 30; about 20 s on MiniStack); unset, the test is skipped.
const EnvManyAgents = "SAS_E2E_AGENTS"

// TestManyAgents deploys this repository's stack with a few dozen built-in
// agents, each with a priority lane and in a nested stack of its own (past
// one template's 500 resources), and runs orders whose steps visit every
// agent (25 agents an order): the scheduler finds each agent's queue in the deployment file
// shipped beside its bootstrap, not in its environment.
func TestManyAgents(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(EnvManyAgents))
	if n <= 0 {
		t.Skipf("%s unset: `make e2e` sets it", EnvManyAgents)
	}
	ctx, cancel := context.WithTimeout(context.Background(), overall)
	defer cancel()
	root := repoRoot(t)
	requireBootstraps(t, filepath.Join(root, "dist"), "make build", "scheduler", "agent", "supervisor")
	cli := cdkCLI(t, root)
	em := sharedEmulator(t)
	defer em.tailOnFailure(t)

	sim, _ := startSim(t, remotesim.Faults{})
	agents := map[string]map[string]any{}
	var steps []workflow.Step
	for i := range n {
		name := fmt.Sprintf("agent-%02d", i)
		agents[name] = map[string]any{"url": sim, "concurrency": 2, "priorityConcurrency": 2}
		steps = append(steps, workflow.Step{Name: fmt.Sprintf("step-%02d", i), Agent: name, Action: "POST /calls", Timeout: workflow.Duration(20 * time.Second)})
	}
	// A workflow has at most 50 steps: one of up to 25 per order.
	var wfs []workflow.Workflow
	for i := 0; i < len(steps); i += 25 {
		wfs = append(wfs, workflow.Workflow{Name: fmt.Sprintf("wide-%d", i/25), Steps: steps[i:min(i+25, len(steps))]})
	}
	wfFile := filepath.Join(em.runDir, "many-agents-workflows.json")
	body, _ := json.Marshal(workflow.File{Workflows: wfs})
	if err := os.WriteFile(wfFile, body, 0o644); err != nil {
		t.Fatal(err)
	}
	agentsJSON, _ := json.Marshal(agents)

	const stack = "SasManyAgents"
	workDir := filepath.Join(em.runDir, "many-agents")
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := newCDK(cli, filepath.Join(root, "infra"), stack, workDir, em.srv.endpoint)
	began := time.Now()
	if err := c.synth(ctx, map[string]string{
		"arch": hostLambdaArch(t), "removalPolicy": "destroy", "stackName": stack,
		"nestedAgentStacks": "true", "workflowsFile": wfFile, "agents": string(agentsJSON),
		// The simulator serves http on 127.0.0.1: an emulator's setting.
		"allowHttp": "true",
	}); err != nil {
		t.Fatalf("cdk synth: %v", err)
	}
	synth := time.Since(began)
	if _, err := em.bootstrap(ctx, c); err != nil {
		t.Fatalf("cdk bootstrap: %v", err)
	}
	began = time.Now()
	outputs, err := em.deploy(ctx, c)
	if err != nil {
		t.Fatalf("cdk deploy of %d agents: %v", n, err)
	}
	deploy := time.Since(began)

	awsCfg := em.awsConfig()
	sqsc := sqs.NewFromConfig(awsCfg)
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	store, err := dynamostore.New(db, dynamostore.Config{OrdersTable: outputs["OrdersTableName"], StateTable: outputs["StateTableName"]})
	if err != nil {
		t.Fatal(err)
	}
	run := time.Now().UTC().Format("150405")
	sent := time.Now()
	var orders []string
	for _, wf := range wfs {
		order := "many-" + run + "-" + wf.Name
		orders = append(orders, order)
		msg, _ := json.Marshal(sas.Intake{V: sas.MessageVersion, OrderID: order, Workflow: wf.Name, Payload: json.RawMessage(`{}`)})
		if _, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(outputs["IntakeQueueUrl"]), MessageBody: aws.String(string(msg))}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := sent.Add(5 * time.Minute)
	for _, order := range orders {
		for {
			v, err := store.GetOrder(ctx, order)
			if err == nil && v.State() == sas.Processed {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				state := "not in the store"
				if err == nil {
					state = fmt.Sprint(v.State())
					for _, s := range v.Steps {
						state += fmt.Sprintf(" %d:%s", s.Step, s.ProcessState)
					}
				}
				t.Fatalf("order %s not Processed within %s: %s", order, time.Since(sent).Round(time.Second), state)
			}
			time.Sleep(time.Second)
		}
	}
	effects := map[string]int{}
	for _, e := range simLedger(t, sim).Effects {
		effects[e.Key]++
	}
	for i, wf := range wfs {
		for s := range wf.Steps {
			if k := sas.IdempotencyKey(orders[i], s, 0, false); effects[k] != 1 {
				t.Errorf("%s step %d: %d effects at the remote, want 1", orders[i], s, effects[k])
			}
		}
	}
	t.Logf("%d agents with lanes in nested stacks: synth %s, deploy %s; %d orders through every agent Processed in %s",
		n, synth.Round(time.Second), deploy.Round(time.Second), len(orders), time.Since(sent).Round(100*time.Millisecond))
}
