//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/sas-go/sas/internal/awssecret"
	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/sas"
)

// The trust boundaries (docs/trust.md), from outside, on the deployed stack:
// messages forged by someone who can send to the scheduler's queues but
// holds no role the construct made. MiniStack enforces no IAM and no
// resource policy (README.md), so what it tests is what the scheduler
// enforces by itself: where a message came from (the queue), and the
// signature over what a reply echoes. Who may send to which queue is
// tested on the template (infra/sascdk, trust_test.go).

// recorder stands in front of the remote-service simulator and keeps every
// business call as it arrived: what the remote service was asked to do.
type recorder struct {
	next http.Handler

	mu    sync.Mutex
	calls []recordedCall
}

type recordedCall struct {
	Seq     int
	Path    string
	Key     string // Idempotency-Key
	Auth    string // the auth header the agent sent
	OrderID string
	Body    map[string]any
	Raw     string
}

// authHeader is the header the stack's agent sends its secret in: the
// default one, since the test names none.
const authHeader = "Authorization"

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if !strings.HasPrefix(req.URL.Path, "/_sim") {
		raw, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(raw))
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		id, _ := body["orderId"].(string)
		r.mu.Lock()
		r.calls = append(r.calls, recordedCall{Seq: len(r.calls), Path: req.URL.Path, Key: req.Header.Get("Idempotency-Key"),
			Auth: req.Header.Get(authHeader), OrderID: id, Body: body, Raw: string(raw)})
		r.mu.Unlock()
	}
	r.next.ServeHTTP(w, req)
}

// of returns the calls for one order, in arrival order.
func (r *recorder) of(orderID string) []recordedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recordedCall
	for _, c := range r.calls {
		if c.OrderID == orderID {
			out = append(out, c)
		}
	}
	return out
}

func (r *recorder) all() []recordedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedCall(nil), r.calls...)
}

// createAuthSecret puts the agent's auth header value in a Secrets Manager
// secret of the emulator, before the synth that names its ARN.
func createAuthSecret(ctx context.Context, t *testing.T, cfg aws.Config, run string) (arn, value string) {
	t.Helper()
	value = "Bearer e2e-" + run + "-token"
	out, err := secretsmanager.NewFromConfig(cfg).CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String("sas-e2e-payments-token-" + run), SecretString: aws.String(value),
	})
	if err != nil {
		t.Fatalf("creating the agent's auth secret: %v", err)
	}
	return aws.ToString(out.ARN), value
}

// trustEnv is what the trust checks need of the deployed stack.
type trustEnv struct {
	em      *emulator
	sqs     *sqs.Client
	store   *dynamostore.Store
	outputs map[string]string
	rec     *recorder
	cfg     aws.Config
	// forgedOrder is scripted to hang on its first call: its first step is
	// in flight long enough to forge a reply for it.
	forgedOrder string
	// settled is an order already Processed, whose undo is forged.
	settled string
	run     string
}

// checkTrust sends the forged messages and checks that none had an effect.
// It returns the orders it submitted (for the caller's ledger check).
func checkTrust(ctx context.Context, t *testing.T, e trustEnv) []string {
	t.Helper()
	begin := time.Now()
	sent := map[string]string{} // what → SQS message id, for the log check
	send := func(what, queueOutput string, body any) {
		t.Helper()
		raw, _ := json.Marshal(body)
		out, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.outputs[queueOutput]), MessageBody: aws.String(string(raw))})
		if err != nil {
			t.Fatalf("sending %s: %v", what, err)
		}
		sent[what] = aws.ToString(out.MessageId)
	}
	settledBefore, err := e.store.GetOrder(ctx, e.settled)
	if err != nil || settledBefore.State() != sas.Processed {
		t.Fatalf("order %s should be Processed before its undo is forged: %v %v", e.settled, settledBefore.State(), err)
	}

	// 1. An intake sent to the scheduler queue (an agent's right) and to
	// the control queue (an operator's) creates nothing: only the intake
	// queue takes orders. A compensate sent to the scheduler queue undoes
	// nothing, and one on the intake queue is no order either.
	forgedIntake := "e2e-" + e.run + "-forged-intake"
	intake := sas.Intake{V: sas.MessageVersion, Kind: sas.KindIntake, OrderID: forgedIntake, Workflow: "payment", Payload: json.RawMessage(`{"amount":5}`)}
	send("intake on the scheduler queue", "SchedulerQueueUrl", intake)
	send("intake on the control queue", "ControlQueueUrl", intake)
	undo := sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: e.settled, Reason: "forged", Actor: "operator:alice"}
	send("compensate on the scheduler queue", "SchedulerQueueUrl", undo)
	send("compensate on the intake queue", "IntakeQueueUrl", undo)

	// 2. A forged reply for a step in flight, its echo rewritten: the
	// payload the next steps would be sent with. Its first call hangs until
	// the step's deadline; the reply is forged while it does.
	body, _ := json.Marshal(sas.Intake{V: sas.MessageVersion, OrderID: e.forgedOrder, Workflow: "order", Payload: json.RawMessage(`{"amount":42}`)})
	if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.outputs["IntakeQueueUrl"]), MessageBody: aws.String(string(body))}); err != nil {
		t.Fatalf("sending order %s: %v", e.forgedOrder, err)
	}
	var inFlight sas.StepRecord
	for deadline := time.Now().Add(processBudget); ; {
		v, err := e.store.GetOrder(ctx, e.forgedOrder)
		if err == nil && len(v.Steps) > 0 && v.Steps[0].ProcessState == sas.Processing && v.Steps[0].LockedBy != "" && len(e.rec.of(e.forgedOrder)) > 0 {
			inFlight = v.Steps[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s: its first step was never seen in flight at the remote service (%v)", e.forgedOrder, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	rewritten := json.RawMessage(`{"amount":999999,"iban":"ATTACKER"}`)
	forged := sas.AgentReply{
		V: sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: e.forgedOrder, Step: 0, Attempt: inFlight.Attempt,
		LockedBy: inFlight.LockedBy, Outcome: sas.OutcomeDone, Agent: "payments", Workflow: "order", StepName: "reserve",
		Payload: rewritten,
	}
	send("unsigned forged reply", "SchedulerQueueUrl", forged) // as an agent built before signatures would
	forged.Sig = "v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	send("forged reply with a made-up signature", "SchedulerQueueUrl", forged)
	t.Logf("trust: forged replies sent for %s step 0 attempt %d (held by %s), echo rewritten to %s", e.forgedOrder, inFlight.Attempt, inFlight.LockedBy, rewritten)

	// The genuine reply finishes the order, every step with the stored
	// payload.
	var done *sas.OrderView
	for deadline := time.Now().Add(processBudget); ; {
		v, err := e.store.GetOrder(ctx, e.forgedOrder)
		if err == nil && v.State() == sas.Processed {
			done = &v
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s not Processed within %s of the forged replies: %+v %v", e.forgedOrder, processBudget, v.Steps, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := waitDrained(ctx, e.sqs, e.outputs, "IntakeQueueUrl", "SchedulerQueueUrl", "ControlQueueUrl"); err != nil {
		t.Fatal(err)
	}

	// --- what the remote service was asked to do ---
	calls := e.rec.of(e.forgedOrder)
	lastStep0, firstStep1 := -1, -1
	for _, c := range calls {
		if amount, _ := c.Body["amount"].(float64); amount != 42 || c.Body["iban"] != nil {
			t.Errorf("the remote service was called with a rewritten payload: %s %s", c.Path, c.Raw)
		}
		switch c.Key {
		case sas.IdempotencyKey(e.forgedOrder, 0, 0, false):
			lastStep0 = c.Seq
		case sas.IdempotencyKey(e.forgedOrder, 1, 0, false):
			if firstStep1 < 0 {
				firstStep1 = c.Seq
			}
		}
	}
	if firstStep1 < lastStep0 {
		t.Errorf("order %s: step 1 was called (call %d) before step 0's last call (%d): a forged reply completed step 0", e.forgedOrder, firstStep1, lastStep0)
	}
	if n := len(done.Steps); n != 3 {
		t.Errorf("order %s has %d steps, want 3", e.forgedOrder, n)
	}

	// --- nothing was created, nothing undone ---
	if v, err := e.store.GetOrder(ctx, forgedIntake); !errors.Is(err, sas.ErrNotFound) {
		t.Errorf("an intake sent to the scheduler or control queue created order %s: %s %v", forgedIntake, v.State(), err)
	}
	if n := len(e.rec.of(forgedIntake)); n != 0 {
		t.Errorf("the remote service was called %d times for %s", n, forgedIntake)
	}
	after, err := e.store.GetOrder(ctx, e.settled)
	if err != nil || after.State() != sas.Processed {
		t.Errorf("order %s after a forged compensate: %s %v", e.settled, after.State(), err)
	}
	for i, s := range after.Steps {
		if s.ProcessState != sas.Processed || len(s.History) != len(settledBefore.Steps[i].History) {
			t.Errorf("order %s step %d changed after a forged compensate: %s, history %+v", e.settled, i, s.ProcessState, s.History)
		}
	}
	for _, c := range e.rec.of(e.settled) {
		if strings.HasSuffix(c.Key, ":undo") {
			t.Errorf("order %s was undone at the remote service: %s %s", e.settled, c.Path, c.Key)
		}
	}

	// --- the scheduler's word for it (MiniStack's log holds its output) ---
	if !useLocalStack() {
		logText, err := os.ReadFile(e.em.srv.logPath)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(logText), "\n")
		for what, id := range sent {
			found := ""
			for _, l := range lines {
				if strings.Contains(l, id) && (strings.Contains(l, "message dropped") || strings.Contains(l, "reply refused")) {
					found = l
					break
				}
			}
			if found == "" {
				t.Errorf("the scheduler's log has no refusal of the %s (message %s)", what, id)
				continue
			}
			t.Logf("trust: %s: %s", what, cut(found, 300))
		}
		refused := 0
		for _, l := range lines {
			if strings.Contains(l, "reply refused") && strings.Contains(l, e.forgedOrder) {
				refused++
			}
		}
		if refused < 2 {
			t.Errorf("the scheduler's log shows %d refused replies for %s, want the 2 forged ones", refused, e.forgedOrder)
		}
	}

	// --- an SSM SecureString read the way the agent reads its secret ---
	checkParameterSecret(ctx, t, e)

	t.Logf("trust checks done in %s", time.Since(begin).Round(100*time.Millisecond))
	return []string{e.forgedOrder}
}

// checkParameterSecret reads an SSM SecureString parameter of the emulator by
// ARN through awssecret, as the built-in agent does with one named in
// SAS_AGENT_AUTH_SECRET (the deployed stack's agent reads a Secrets
// Manager secret; this covers the other store against an emulator).
func checkParameterSecret(ctx context.Context, t *testing.T, e trustEnv) {
	t.Helper()
	client := ssm.NewFromConfig(e.cfg)
	name := "/sas-e2e/" + e.run + "/token"
	if _, err := client.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String("ssm-token"), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatalf("creating an SSM parameter: %v", err)
	}
	got, err := client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	if err != nil || got.Parameter == nil {
		t.Fatalf("reading the SSM parameter's ARN: %v", err)
	}
	v, err := awssecret.New(e.cfg).Value(ctx, aws.ToString(got.Parameter.ARN))
	if err != nil || v != "ssm-token" {
		t.Errorf("awssecret on %s: %q, %v", aws.ToString(got.Parameter.ARN), v, err)
	}
}

// waitDrained waits until the queues hold no message, visible, in flight or
// delayed: everything sent to them before has been handled.
func waitDrained(ctx context.Context, c *sqs.Client, outputs map[string]string, names ...string) error {
	deadline := time.Now().Add(processBudget)
	for {
		busy := ""
		for _, n := range names {
			out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(outputs[n]), AttributeNames: []sqstypes.QueueAttributeName{
				sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
			if err != nil {
				return fmt.Errorf("reading %s's depth: %w", n, err)
			}
			for k, v := range out.Attributes {
				if v != "0" {
					busy = fmt.Sprintf("%s %s=%s", n, k, v)
				}
			}
		}
		if busy == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the scheduler's queues never drained: %s", busy)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// e2eOperatorARN is the operator the stack is deployed with
// (-c operatorRoles): a role of MiniStack's account, which need not exist.
const e2eOperatorARN = "arn:aws:iam::" + account + ":role/sas-e2e-operator"

// checkOperatorsInTemplate checks that the operators given as context reach
// the control queue's policy in the template that was deployed: with the
// supervisor's role, the only senders it lets through.
func checkOperatorsInTemplate(c *cdk) error {
	tmpl, err := c.template()
	if err != nil {
		return err
	}
	res, _ := tmpl["Resources"].(map[string]any)
	for _, r := range res {
		r, _ := r.(map[string]any)
		if r["Type"] != "AWS::SQS::QueuePolicy" {
			continue
		}
		raw, _ := json.Marshal(r)
		if !strings.Contains(string(raw), "OnlySupervisorAndOperatorsSend") {
			continue
		}
		if !strings.Contains(string(raw), e2eOperatorARN) || !strings.Contains(string(raw), "SupervisorRole") {
			return fmt.Errorf("the control queue's policy does not let exactly the supervisor and %s send: %s", e2eOperatorARN, raw)
		}
		return nil
	}
	return errors.New("the deployed template has no control queue policy (OnlySupervisorAndOperatorsSend)")
}
