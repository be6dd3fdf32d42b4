//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/internal/dev/remotesim"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/sas"
)

// Knobs of the deployed test stack and of the scenario.
const (
	// stepTimeout is the stack's SAS_STEP_TIMEOUT. It must stay under the
	// agent's per-try timeout (10s, functions/agent) so that the hung call
	// uses up the step's whole deadline and the attempt is cut there and
	// reported failed: with a longer one the agent would retry within the
	// step by itself.
	stepTimeout = 10 * time.Second

	// processBudget is how long the orders without faults may take, from
	// sending them. They take well under a second each on MiniStack.
	processBudget = 2 * time.Minute
	// rescueBudget is how long the hung order may take, from the end of the
	// deploy. MiniStack fires a rate(1 minute) rule first about a minute
	// after it is created, then every minute: one sweep rescues the step
	// (deadline passed 10s after sending), and its retry goes out with the
	// supervisor's 5s backoff. Three sweeps fit in the budget.
	rescueBudget = 4 * time.Minute
	// hungCalls is how many of the hung order's calls hang: fewer than the
	// step's three attempts, so the order is Processed on the last one.
	hungCalls = 2
	// overall bounds the whole test, below `go test -timeout` in the Makefile.
	overall = 15 * time.Minute
)

// TestMain stops everything the test started on SIGINT and SIGTERM (also
// sent when `go test` dies, see sysproc_linux_test.go) before exiting.
func TestMain(m *testing.M) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping MiniStack and everything else the test started\n", s)
		stopAll()
		if dir, _ := keptRunDir.Load().(string); dir != "" {
			trimRunDir(dir)
			fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", dir)
		}
		os.Exit(2)
	}()
	code := m.Run()
	stopSharedEmulator(code != 0)
	stopAll()
	os.Exit(code)
}

// keptRunDir is the run's directory, for the signal handler.
var keptRunDir atomic.Value

// trimRunDir removes the bulky parts of a run's directory (the cloud
// assemblies with their bootstrap assets, MiniStack's unpacked copies of
// them), keeping the logs.
func trimRunDir(dir string) {
	_ = os.RemoveAll(filepath.Join(dir, "cdk.out"))
	_ = os.RemoveAll(filepath.Join(dir, travelDir, "cdk.out"))
	_ = os.RemoveAll(filepath.Join(dir, "ministack-tmp"))
	_ = os.RemoveAll(filepath.Join(dir, "localstack-tmp"))
	_ = os.RemoveAll(filepath.Join(dir, "localstack-fs"))
}

// TestDeployAndRun deploys the stack to MiniStack and runs orders through the
// built Lambda functions: every order ends Processed with exactly one effect
// per step at the remote service, and an order whose first call hangs is
// rescued by the scheduled supervisor.
//
// SAS_E2E_DROP=<logical id prefix>[,...] deploys the same stack without
// those resources (and what refers to them); the test must then fail. It is
// how README.md's proof that the test needs the supervisor schedule and each
// event source mapping is made.
func TestDeployAndRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), overall)
	defer cancel()
	begin := time.Now()
	timings := map[string]time.Duration{}
	mark := func(name string, since time.Time) {
		timings[name] = time.Since(since).Round(100 * time.Millisecond)
		t.Logf("%s: %s", name, timings[name])
	}

	// --- inputs: the bootstraps and the CDK CLI ---
	root := repoRoot(t)
	lambdaArch := hostLambdaArch(t)
	requireBootstraps(t, filepath.Join(root, "dist"), "make build", "scheduler", "agent", "supervisor")
	infraDir := filepath.Join(root, "infra")
	cli := cdkCLI(t, root)

	// --- MiniStack, shared with the example's test ---
	em := sharedEmulator(t)
	timings["install "+em.srv.name+" (0 when cached)"], timings["start "+em.srv.name] = em.install, em.start
	runDir := em.runDir
	defer em.tailOnFailure(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs in %s (%s, cdk-*.log, outputs.json), kept after the run", runDir, filepath.Base(em.srv.logPath))
		}
	})
	t.Parallel()

	// --- the remote service ---
	// In this process: the test reads its ledger and needs nothing else.
	// The hang is scripted for one order's first two calls: the agent cuts
	// each hung attempt at its deadline and reports it failed (transient;
	// docs/protocol.md, "A failure is not a wait"), the scheduler counts
	// the failure and sends the next attempt after its backoff, and the
	// third attempt (same idempotency key) passes clean: two failures of
	// the three the step is allowed.
	run := time.Now().UTC().Format("150405")
	hungOrder := "e2e-" + run + "-hung"
	// The trust checks (trust_test.go) forge a reply while this order's
	// first call hangs, once.
	forgedOrder := "e2e-" + run + "-forged-reply"
	sim, rec := startSim(t, remotesim.Faults{
		Profile: remotesim.Profile{HangFor: 2 * time.Minute},
		Scripts: []remotesim.Script{
			{OrderID: hungOrder, Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultHang, Times: hungCalls}}},
			{OrderID: forgedOrder, Plan: []remotesim.ScriptStep{{Fault: remotesim.FaultHang, Times: 1}}},
		},
	})

	// The agent's auth header is read from a secret (docs/trust.md): made
	// here, named to the stack by its ARN.
	awsCfg := em.awsConfig()
	authSecretARN, authValue := createAuthSecret(ctx, t, awsCfg, run)

	// --- synth, bootstrap, deploy ---
	c := newCDK(cli, infraDir, stackName, runDir, em.srv.endpoint)
	step := time.Now()
	if err := c.synth(ctx, map[string]string{
		"arch":          lambdaArch,
		"removalPolicy": "destroy",
		"paymentsUrl":   sim,
		"stepTimeout":   stepTimeout.String(),
		// The simulator serves http on 127.0.0.1: an emulator's setting.
		"allowHttp":          "true",
		"paymentsAuthSecret": authSecretARN,
		"operatorRoles":      e2eOperatorARN,
	}); err != nil {
		t.Fatalf("cdk synth: %v", err)
	}
	mark("cdk synth", step)
	if d := os.Getenv("SAS_E2E_DROP"); d != "" {
		removed, err := c.dropResources(strings.Split(d, ","))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("SAS_E2E_DROP=%s: deploying without %s; this run must FAIL", d, strings.Join(removed, ", "))
	}
	took, err := em.bootstrap(ctx, c)
	if err != nil {
		t.Fatalf("cdk bootstrap: %v", err)
	}
	timings["cdk bootstrap (0 when the other test did it)"] = took
	step = time.Now()
	outputs, err := em.deploy(ctx, c)
	if err != nil {
		t.Fatalf("cdk deploy: %v", err)
	}
	deployed := time.Now()
	mark("cdk deploy", step)
	for _, k := range []string{"IntakeQueueUrl", "OrdersTableName", "StateTableName"} {
		if outputs[k] == "" {
			t.Fatalf("the deploy outputs have no %s: %v", k, outputs)
		}
	}

	sqsc := sqs.NewFromConfig(awsCfg)
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	store, err := dynamostore.New(db, dynamostore.Config{OrdersTable: outputs["OrdersTableName"], StateTable: outputs["StateTableName"]})
	if err != nil {
		t.Fatal(err)
	}

	// MiniStack gap (docs/pattern.md §7): its CloudFormation used to drop a queue's
	// RedrivePolicy. Check every queue the template gives one, and put it
	// back with SetQueueAttributes if it is missing, so the DLQs work.
	if err := ensureRedrive(ctx, t, c, sqsc); err != nil {
		t.Fatalf("checking the queues' redrive policies: %v", err)
	}

	// --- the orders ---
	type order struct {
		id, workflow string
		steps        int
	}
	var orders []order
	for i := range 6 {
		orders = append(orders, order{fmt.Sprintf("e2e-%s-order-%d", run, i), "order", 3})
	}
	for i := range 3 {
		orders = append(orders, order{fmt.Sprintf("e2e-%s-payment-%d", run, i), "payment", 1})
	}
	orders = append(orders, order{hungOrder, "order", 3})
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i, o := range orders {
		body, _ := json.Marshal(sas.Intake{V: sas.MessageVersion, OrderID: o.id, Workflow: o.workflow,
			Payload: json.RawMessage(fmt.Sprintf(`{"amount":%d}`, 100+i))})
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(string(body))})
	}
	sent := time.Now()
	out, err := sqsc.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(outputs["IntakeQueueUrl"]), Entries: entries})
	if err != nil {
		t.Fatalf("sending the orders to the intake queue: %v", err)
	}
	if len(out.Failed) > 0 {
		t.Fatalf("the intake queue refused %d orders: %+v", len(out.Failed), out.Failed)
	}
	t.Logf("sent %d orders to the intake queue (%s is scripted to hang on its first %d calls)", len(orders), hungOrder, hungCalls)

	// The ghost order: its first step claimed, its request picked up by
	// an agent that reported the pick-up (the scheduler's Start write, as
	// the agent's started report makes it) and died. Nothing is in any
	// queue for it: only the scheduled supervisor, finding the deadline
	// counted from the pick-up passed, can hand the step back. (A claim
	// whose pick-up was never reported is not a failure: its request may
	// still be queued, and it waits for its delivery horizon, or for the
	// redelivery of the message that made it: docs/protocol.md,
	// "Deadlines start at pick-up".)
	ghostOrder := "e2e-" + run + "-ghost"
	ghostAt := time.Now().UTC()
	if _, err := store.Submit(ctx, sas.SubmitParams{
		Order: sas.Order{OrderID: ghostOrder, Workflow: "payment", Steps: []string{"charge"}, Payload: json.RawMessage(`{"amount":99}`)},
		Now:   ghostAt, PickupBy: ghostAt.Add(time.Minute),
		Claim: &sas.ClaimParams{Owner: "scheduler-that-died", Now: ghostAt, CompleteBy: ghostAt.Add(stepTimeout)},
	}); err != nil {
		t.Fatalf("writing the ghost order: %v", err)
	}
	if _, err := store.Start(ctx, sas.StartParams{Key: sas.StepKey{OrderID: ghostOrder}, From: sas.Processing,
		Owner: "scheduler-that-died", Attempt: 1, Now: ghostAt, CompleteBy: ghostAt.Add(stepTimeout)}); err != nil {
		t.Fatalf("recording the ghost's pick-up: %v", err)
	}
	orders = append(orders, order{ghostOrder, "payment", 1})

	// views polls the state store for every order.
	views := func() map[string]*sas.OrderView {
		got := map[string]*sas.OrderView{}
		for _, o := range orders {
			v, err := store.GetOrder(ctx, o.id)
			if errors.Is(err, sas.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Logf("reading order %s: %v", o.id, err)
				continue
			}
			got[o.id] = &v
		}
		return got
	}
	describe := func(vs map[string]*sas.OrderView, ids []string) string {
		var sb strings.Builder
		for _, id := range ids {
			v := vs[id]
			if v == nil {
				fmt.Fprintf(&sb, "\n    %s: not in the state store (the scheduler never took it from the intake queue)", id)
				continue
			}
			fmt.Fprintf(&sb, "\n    %s: %s;", id, v.State())
			for _, s := range v.Steps {
				fmt.Fprintf(&sb, " %d:%s(failures %d, attempt %d)", s.Step, s.ProcessState, s.FailureCount, s.Attempt)
			}
		}
		return sb.String()
	}
	waitProcessed := func(ids []string, deadline time.Time) (map[string]*sas.OrderView, bool) {
		for {
			vs := views()
			done := 0
			for _, id := range ids {
				if v := vs[id]; v != nil && v.State() == sas.Processed {
					done++
				}
			}
			if done == len(ids) {
				return vs, true
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return vs, false
			}
			time.Sleep(time.Second)
		}
	}

	// 1. The orders without faults: intake → scheduler → agent → simulator
	// → scheduler, through the three event source mappings.
	var plain []string
	for _, o := range orders {
		if o.id != hungOrder && o.id != ghostOrder {
			plain = append(plain, o.id)
		}
	}
	vs, ok := waitProcessed(plain, sent.Add(processBudget))
	if !ok {
		t.Fatalf("orders without faults not Processed within %s of sending them: the pipeline is broken "+
			"(an event source mapping missing, a function failing: see the MiniStack log below):%s", processBudget, describe(vs, plain))
	}
	t.Logf("%d orders without faults Processed %s after sending", len(plain), time.Since(sent).Round(100*time.Millisecond))
	for _, id := range plain {
		for _, s := range vs[id].Steps {
			if s.FailureCount != 0 {
				t.Logf("note: %s step %d needed %d rescue(s) (a slow machine?)", id, s.Step, s.FailureCount)
			}
		}
	}

	// The trust boundaries, from outside (trust_test.go), while the
	// schedule's first sweep is still to come.
	for _, id := range checkTrust(ctx, t, trustEnv{em: em, sqs: sqsc, store: store, outputs: outputs, rec: rec, cfg: awsCfg,
		forgedOrder: forgedOrder, settled: orders[0].id, run: run}) {
		orders = append(orders, order{id, "order", 3})
	}
	if err := checkOperatorsInTemplate(c); err != nil {
		t.Error(err)
	}

	// 2. The hung order: its agent cuts each hung attempt at the deadline
	// and reports it failed; the scheduler sends the next attempt after its
	// backoff; the third call passes. The ghost order: only the scheduled
	// supervisor can hand its step back.
	vs, ok = waitProcessed([]string{hungOrder, ghostOrder}, deployed.Add(rescueBudget))
	if !ok {
		hint := "the step was not even claimed"
		if v := vs[ghostOrder]; v != nil && len(v.Steps) > 0 {
			s0 := v.Steps[0]
			switch {
			case s0.FailureCount == 0 && s0.ProcessState == sas.Processing:
				hint = "its first step is still Processing with FailureCount 0 long after its deadline: the supervisor never ran " +
					"(is the SupervisorSchedule rule in the stack? MiniStack and LocalStack fire rate(1 minute) up to a minute after deploy)"
			case s0.FailureCount > 0:
				hint = "the supervisor rescued it, but the retry did not finish (scheduler queue mapping? agent?)"
			}
		}
		t.Fatalf("orders %s (hung) and %s (ghost) not both Processed within %s of the deploy (the ghost: %s):%s",
			hungOrder, ghostOrder, rescueBudget, hint, describe(vs, []string{hungOrder, ghostOrder}))
	}
	rescuedAfter := time.Since(deployed).Round(100 * time.Millisecond)
	t.Logf("hung order recovered and ghost order rescued, both Processed %s after the deploy", rescuedAfter)
	if h := vs[hungOrder].Steps[0]; h.FailureCount != hungCalls {
		t.Errorf("%s step 0: FailureCount %d, want %d (each hung attempt counted by the scheduler): %+v", hungOrder, h.FailureCount, hungCalls, h.History)
	} else {
		for _, e := range h.History {
			if strings.HasPrefix(e.Actor, "supervisor:") && e.From != e.To {
				t.Errorf("%s step 0: a supervisor moved it (%s → %s): an attempt its agent reported is the scheduler's to count", hungOrder, e.From, e.To)
			}
		}
	}
	s0 := vs[ghostOrder].Steps[0]
	if s0.FailureCount < 1 {
		t.Errorf("%s step 0: FailureCount %d, want ≥ 1 (the supervisor's rescue)", ghostOrder, s0.FailureCount)
	}
	rescuedBySupervisor := false
	for _, h := range s0.History {
		if strings.HasPrefix(h.Actor, "supervisor:") && h.From == sas.Processing && h.To == sas.Pending {
			rescuedBySupervisor = true
		}
	}
	if !rescuedBySupervisor {
		t.Errorf("%s step 0: no Processing → Pending transition by a supervisor in its history: %+v", ghostOrder, s0.History)
	}

	// 3. The remote side: exactly one effect per order step, whatever was
	// retried or redelivered on the way.
	ledger := simLedger(t, sim)
	effects := map[string]int{}
	for _, e := range ledger.Effects {
		effects[e.Key]++
	}
	for _, o := range orders {
		for s := range o.steps {
			key := sas.IdempotencyKey(o.id, s, 0, false)
			if n := effects[key]; n != 1 {
				t.Errorf("order %s step %d: %d effects at the remote service, want exactly 1", o.id, s, n)
			}
			delete(effects, key)
		}
	}
	for key, n := range effects {
		t.Errorf("unexpected effect(s) at the remote service: %s ×%d", key, n)
	}
	if len(ledger.Duplicates) > 0 {
		t.Errorf("the remote service saw duplicate effects: %v", ledger.Duplicates)
	}
	// Every call carried the auth header, its value read from the secret.
	for _, c := range rec.all() {
		if c.Auth != authValue {
			t.Errorf("call %s %s carried %s %q, want the secret's value", c.Path, c.Key, authHeader, c.Auth)
			break
		}
	}
	if st := simStats(t, sim); st.Hangs < hungCalls {
		t.Errorf("the simulator counted %d hung calls, want ≥ 1: the scripted fault did not happen", st.Hangs)
	}

	// 4. The console, against the deployment (console_test.go): the orders
	// in the states the store holds.
	want := map[string]sas.ProcessState{}
	for id, v := range views() {
		want[id] = v.State()
	}
	checkConsole(ctx, t, consoleCheck{em: em, c: c, root: root, want: want, detail: orders[0].id})

	// 5. Nothing went to a dead-letter queue.
	for _, k := range []string{"IntakeDLQUrl", "SchedulerDLQUrl", "ControlDLQUrl", "AgentDLQUrl"} {
		if outputs[k] == "" {
			continue
		}
		r, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(outputs[k]), MaxNumberOfMessages: 10, VisibilityTimeout: 0})
		if err != nil {
			t.Errorf("reading %s: %v", k, err)
			continue
		}
		for _, m := range r.Messages {
			t.Errorf("%s holds a message: %s", k, aws.ToString(m.Body))
		}
	}

	mark("total", begin)
	t.Logf("e2e timings: %s; first rescue done %s after the deploy", formatTimings(timings), rescuedAfter)
}

// ensureRedrive checks, for every queue the template gives a RedrivePolicy,
// that the deployed queue has one, and sets it when MiniStack dropped it.
func ensureRedrive(ctx context.Context, t *testing.T, c *cdk, sqsc *sqs.Client) error {
	tmpl, err := c.template()
	if err != nil {
		return err
	}
	res, _ := tmpl["Resources"].(map[string]any)
	urlOf := func(logicalID string) (string, error) {
		// A queue the template names (the agents' queues: the deployment
		// file lists them by name) is found by its name.
		if r, _ := res[logicalID].(map[string]any); r != nil {
			if props, _ := r["Properties"].(map[string]any); props != nil {
				if name, ok := props["QueueName"].(string); ok {
					out, err := sqsc.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
					if err != nil {
						return "", fmt.Errorf("queue %s (%s): %w", logicalID, name, err)
					}
					return aws.ToString(out.QueueUrl), nil
				}
			}
		}
		// CloudFormation names a queue <stack>-<logical id>-<suffix>, the
		// logical id cut short when the name would be too long (LocalStack
		// cuts the SAS stack's; MiniStack does not).
		out, err := sqsc.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(c.stack + "-")})
		if err != nil {
			return "", err
		}
		var found []string
		for _, u := range out.QueueUrls {
			name := sas.QueueName(u)
			part := strings.TrimPrefix(name, c.stack+"-")
			if i := strings.LastIndex(part, "-"); i > 0 {
				part = part[:i]
			}
			if part == logicalID || len(part) >= 16 && strings.HasPrefix(logicalID, part) {
				found = append(found, u)
			}
		}
		if len(found) != 1 {
			return "", fmt.Errorf("queue %s: found %v", logicalID, found)
		}
		return found[0], nil
	}
	checked, repaired := 0, 0
	for id, r := range res {
		r, _ := r.(map[string]any)
		if r["Type"] != "AWS::SQS::Queue" {
			continue
		}
		props, _ := r["Properties"].(map[string]any)
		rp, _ := props["RedrivePolicy"].(map[string]any)
		if rp == nil {
			continue
		}
		getAtt, _ := rp["deadLetterTargetArn"].(map[string]any)["Fn::GetAtt"].([]any)
		if len(getAtt) != 2 {
			return fmt.Errorf("queue %s: RedrivePolicy target is not a GetAtt: %v", id, rp)
		}
		qURL, err := urlOf(id)
		if err != nil {
			return err
		}
		dlqURL, err := urlOf(fmt.Sprint(getAtt[0]))
		if err != nil {
			return err
		}
		attrs, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(qURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameRedrivePolicy}})
		if err != nil {
			return err
		}
		checked++
		if attrs.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)] != "" {
			continue
		}
		dlq, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlqURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return err
		}
		policy, _ := json.Marshal(map[string]any{
			"deadLetterTargetArn": dlq.Attributes[string(sqstypes.QueueAttributeNameQueueArn)],
			"maxReceiveCount":     rp["maxReceiveCount"],
		})
		t.Logf("MiniStack gap: queue %s was deployed without its RedrivePolicy; setting %s", id, policy)
		if _, err := sqsc.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(qURL),
			Attributes: map[string]string{string(sqstypes.QueueAttributeNameRedrivePolicy): string(policy)}}); err != nil {
			return err
		}
		repaired++
	}
	if checked == 0 {
		return errors.New("the template has no queue with a RedrivePolicy: is the stack still the SAS stack?")
	}
	t.Logf("RedrivePolicy: %d queues checked, %d set after the deploy", checked, repaired)
	return nil
}

// startSim serves the remote-service simulator on a free 127.0.0.1 port,
// behind a recorder of every business call, and returns its base URL; the
// cleanup closes it (and lets hung calls go).
func startSim(t *testing.T, faults remotesim.Faults) (string, *recorder) {
	t.Helper()
	sim, err := remotesim.New(remotesim.Config{Seed: 1, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: sim}
	srv := &http.Server{Handler: rec, ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(sim.Close)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String(), rec
}

// simLedger reads GET /_sim/ledger, as any black-box client would.
func simLedger(t *testing.T, base string) remotesim.Ledger {
	t.Helper()
	var l remotesim.Ledger
	getJSON(t, base+"/_sim/ledger", &l)
	return l
}

func simStats(t *testing.T, base string) remotesim.Stats {
	t.Helper()
	var s remotesim.Stats
	getJSON(t, base+"/_sim/stats", &s)
	return s
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: decoding: %v", url, err)
	}
}

func formatTimings(m map[string]time.Duration) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
