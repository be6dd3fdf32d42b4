//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/sas"
)

const (
	// travelStack is the example's stack (examples/travel/cdk, StackID).
	travelStack = "SasTravel"
	// travelConstruct is the construct id of sascdk in that stack: its
	// outputs are named Sas<output><hash>.
	travelConstruct = "Sas"
	// travelDir is the example's directory in the run directory: its
	// cdk-*.log, outputs.json and cloud assembly.
	travelDir = "travel"
	// travelReplyQueue is the queue the test creates for the statuses and
	// allows as replyTo (allowedReplyQueues, by its ARN).
	travelReplyQueue = "travel-e2e-statuses"

	// travelBudget is how long the trips may take, from sending them. Each
	// takes a second or two on MiniStack; nothing here waits for the
	// supervisor's schedule.
	travelBudget = 2 * time.Minute
	// travelOverall bounds the whole test, below `go test -timeout`.
	travelOverall = 10 * time.Minute
)

// trip is one order of the example's workflow and what must come of it.
// The payloads follow the example's demo services (examples/travel
// README): the hotel "full" has no room (booking.FullHotel), and the bank
// declines over 2000 EUR (payments.DemoLimit).
type trip struct {
	id      string
	payload string
	// workflow is "trip" (a straight line) unless it says trip-parallel:
	// flight, hotel and car at once, then pay after the three. Its steps
	// then settle in an order no test can fix: the undos are held to
	// "newest completion first" as the history shows the completions, and
	// the statuses are compared as a set.
	workflow string
	// want
	state    sas.ProcessState
	statuses []string          // "status" or "status/step", in seq order
	steps    map[string]string // step name → its final ProcessState
	undone   []string          // the steps undone, in the order they were undone
	reason   map[string]string // step name → a part of its LastError
}

// TestTravelExample deploys the travel example (examples/travel/cdk: the
// construct sascdk with the trip workflow and the example's two Go agents)
// to the same MiniStack and books trips through it: one booked, one
// refused by a full hotel (the flight released), one declined at payment
// (the car, the hotel and the flight released, newest first), and one of
// trip-parallel whose hotel, one of three branches, is refused (the flight
// and the car released, pay never run). It checks
// the state store and the statuses on a replyTo queue the deploy allows.
// Then the approvals (approvals) and a cancel while a step is in flight
// (cancelInFlight).
func TestTravelExample(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), travelOverall)
	defer cancel()
	begin := time.Now()
	timings := map[string]time.Duration{}
	mark := func(name string, since time.Time) {
		timings[name] = time.Since(since).Round(100 * time.Millisecond)
		t.Logf("travel: %s: %s", name, timings[name])
	}

	// --- inputs: the bootstraps (SAS's and the example's agents') and the CDK CLI ---
	root := repoRoot(t)
	lambdaArch := hostLambdaArch(t)
	exampleDir := filepath.Join(root, "examples", "travel")
	requireBootstraps(t, filepath.Join(root, "dist"), "make build", "scheduler", "supervisor")
	requireBootstraps(t, filepath.Join(exampleDir, "dist"), "make -C examples/travel build", "travel", "payments")
	cli := cdkCLI(t, root)

	em := sharedEmulator(t)
	workDir := filepath.Join(em.runDir, travelDir)
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer em.tailOnFailure(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("travel: logs in %s (cdk-*.log, outputs.json) and %s (every function's output), kept after the run", workDir, em.srv.logPath)
		}
	})
	t.Parallel()

	awsCfg := em.awsConfig()
	sqsc := sqs.NewFromConfig(awsCfg)
	db := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })

	// --- the replyTo queue, allowed by its ARN ---
	q, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(travelReplyQueue)})
	if err != nil {
		t.Fatalf("creating the reply queue: %v", err)
	}
	replyTo := aws.ToString(q.QueueUrl)
	attrs, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("reading the reply queue's ARN: %v", err)
	}
	replyARN := attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]

	// --- synth (the example's own CDK app), bootstrap once, deploy ---
	c := newCDK(cli, filepath.Join(exampleDir, "cdk"), travelStack, workDir, em.srv.endpoint)
	step := time.Now()
	// distDir and agentsDir keep the app's defaults (../../../dist and
	// ../dist from examples/travel/cdk), where `make e2e` built them.
	if err := c.synth(ctx, map[string]string{
		"arch":               lambdaArch,
		"allowedReplyQueues": replyARN,
		// trip-approval's wait, short enough to see one time out within
		// the test (the supervisor's schedule sweeps every minute).
		"approvalTimeout": approvalTimeout.String(),
	}); err != nil {
		t.Fatalf("cdk synth of examples/travel/cdk: %v", err)
	}
	mark("cdk synth", step)
	took, err := em.bootstrap(ctx, c)
	if err != nil {
		t.Fatalf("cdk bootstrap: %v", err)
	}
	timings["cdk bootstrap (0 when the other test did it)"] = took
	step = time.Now()
	outputs, err := em.deploy(ctx, c)
	if err != nil {
		t.Fatalf("cdk deploy %s: %v", travelStack, err)
	}
	mark("cdk deploy (with the wait for the other deploy)", step)
	out := func(name string) string {
		t.Helper()
		v, err := constructOutput(outputs, travelConstruct, name)
		if err != nil {
			t.Fatalf("%v (%s)", err, c.outputsFile())
		}
		return v
	}
	store, err := dynamostore.New(db, dynamostore.Config{OrdersTable: out("OrdersTableName"), StateTable: out("StateTableName")})
	if err != nil {
		t.Fatal(err)
	}

	// --- the trips ---
	run := time.Now().UTC().Format("150405")
	payload := func(hotel string, amount int) string {
		return fmt.Sprintf(`{"traveller":"Ada","flight":"LH 123","hotel":%q,"car":"compact","amount":%d}`, hotel, amount)
	}
	trips := []trip{{
		id: "travel-" + run + "-booked", payload: payload("Ritz", 420),
		state:    sas.Processed,
		statuses: []string{"received", "step-done/flight", "step-done/hotel", "step-done/car", "step-done/pay", "processed"},
		steps:    map[string]string{"flight": "Processed", "hotel": "Processed", "car": "Processed", "pay": "Processed"},
	}, {
		id: "travel-" + run + "-full-hotel", payload: payload("full", 420),
		state:    sas.Rejected, // a full hotel is a business answer (agent.Reject): nobody is paged
		statuses: []string{"received", "step-done/flight", "rejected/hotel"},
		// A refused step is undone too: a refusal is not proof of no effect
		// (docs/protocol.md).
		steps:  map[string]string{"flight": "Compensated", "hotel": "Compensated", "car": "Pending", "pay": "Pending"},
		undone: []string{"hotel", "flight"},
		reason: map[string]string{"hotel": "sold out"},
	}, {
		id: "travel-" + run + "-declined", payload: payload("Ritz", 5000),
		state:    sas.Rejected, // a declined card too
		statuses: []string{"received", "step-done/flight", "step-done/hotel", "step-done/car", "rejected/pay"},
		steps:    map[string]string{"flight": "Compensated", "hotel": "Compensated", "car": "Compensated", "pay": "Compensated"},
		undone:   []string{"pay", "car", "hotel", "flight"},
		reason:   map[string]string{"pay": "card declined"},
	}, {
		// Three branches at once, the third refused (issue 27's black-box
		// check): the other two branches' effects are undone, and pay never
		// runs.
		id: "travel-" + run + "-parallel-full-hotel", payload: payload("full", 420), workflow: "trip-parallel",
		state:    sas.Rejected,
		statuses: []string{"received", "step-done/flight", "step-done/car", "rejected/hotel"},
		steps:    map[string]string{"flight": "Compensated", "hotel": "Compensated", "car": "Compensated", "pay": "Pending"},
		undone:   []string{"flight", "hotel", "car"},
		reason:   map[string]string{"hotel": "sold out"},
	}}
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i, tr := range trips {
		wf := tr.workflow
		if wf == "" {
			wf = "trip"
		}
		body := fmt.Sprintf(`{"v":1,"orderId":%q,"workflow":%q,"payload":%s,"replyTo":%q}`, tr.id, wf, tr.payload, replyTo)
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(body)})
	}
	sent := time.Now()
	res, err := sqsc.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(out("IntakeQueueUrl")), Entries: entries})
	if err != nil {
		t.Fatalf("sending the trips to the intake queue: %v", err)
	}
	if len(res.Failed) > 0 {
		t.Fatalf("the intake queue refused %d trips: %+v", len(res.Failed), res.Failed)
	}
	t.Logf("travel: sent %d trips to the intake queue, replyTo %s (allowed as %s)", len(trips), replyTo, replyARN)

	// --- wait until every trip has settled, in the store and on the reply queue ---
	statuses := map[string]map[int64]sas.Status{} // order → seq → status
	readReplies := func() {
		for {
			r, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(replyTo), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil {
				t.Logf("travel: reading the reply queue: %v", err)
				return
			}
			for _, m := range r.Messages {
				var st sas.Status
				if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &st); err != nil {
					t.Errorf("the reply queue holds a message that is not a status: %s (%v)", aws.ToString(m.Body), err)
				} else {
					if statuses[st.OrderID] == nil {
						statuses[st.OrderID] = map[int64]sas.Status{}
					}
					statuses[st.OrderID][st.Sequence] = st // SQS may deliver one twice: keyed by seq
				}
				_, _ = sqsc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(replyTo), ReceiptHandle: m.ReceiptHandle})
			}
			if len(r.Messages) == 0 {
				return
			}
		}
	}
	views := func() map[string]*sas.OrderView {
		got := map[string]*sas.OrderView{}
		for _, tr := range trips {
			v, err := store.GetOrder(ctx, tr.id)
			if errors.Is(err, sas.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Logf("travel: reading order %s: %v", tr.id, err)
				continue
			}
			got[tr.id] = &v
		}
		return got
	}
	settled := func(v *sas.OrderView) bool {
		if v == nil {
			return false
		}
		switch v.State() {
		case sas.Processed, sas.Compensated, sas.CompensationFailed, sas.Rejected:
			return true
		}
		return false
	}
	final := func(id string) bool {
		for _, st := range statuses[id] {
			if st.Status == sas.StatusProcessed || st.Status == sas.StatusCompensated || st.Status == sas.StatusRejected {
				return true
			}
		}
		return false
	}
	var vs map[string]*sas.OrderView
	var allSettled time.Time // when the store first showed every trip settled
	for {
		readReplies()
		vs = views()
		done, heard := 0, 0
		for _, tr := range trips {
			if settled(vs[tr.id]) {
				done++
			}
			if final(tr.id) {
				heard++
			}
		}
		if done == len(trips) && allSettled.IsZero() {
			allSettled = time.Now()
		}
		// Settled in the store and the last status heard; or settled, and
		// 10 s for a status that never comes (the assertions say which).
		if done == len(trips) && (heard == len(trips) || time.Since(allSettled) > 10*time.Second) {
			break
		}
		if time.Now().After(sent.Add(travelBudget)) || ctx.Err() != nil {
			t.Fatalf("travel: trips not settled within %s of sending them (%d of %d settled in the store, %d of %d final statuses heard): "+
				"is an event source mapping or an agent failing? See the function output in %s:%s",
				travelBudget, done, len(trips), heard, len(trips), em.srv.logPath, describeTrips(trips, vs, statuses))
		}
		time.Sleep(500 * time.Millisecond)
	}
	settledAfter := time.Since(sent).Round(100 * time.Millisecond)
	t.Logf("travel: %d trips settled %s after sending:%s", len(trips), settledAfter, describeTrips(trips, vs, statuses))

	// --- the outcomes ---
	for _, tr := range trips {
		checkTrip(t, tr, vs[tr.id], statuses[tr.id])
	}

	// --- approvals: a person completes a waiting step; forged tokens change nothing; a wait times out ---
	approvals(t, ctx, approvalEnv{sqs: sqsc, store: store, intake: out("IntakeQueueUrl"), replyTo: replyTo, run: run,
		read: func() map[string]map[int64]sas.Status { readReplies(); return statuses }})
	mark("approvals", sent)

	// --- cancellation: a trip cancelled by its submitter while a step runs ---
	step = time.Now()
	cancelInFlight(t, ctx, approvalEnv{sqs: sqsc, store: store, intake: out("IntakeQueueUrl"), replyTo: replyTo, run: run,
		read: func() map[string]map[int64]sas.Status { readReplies(); return statuses }})
	mark("cancel in flight", step)

	// Nothing went to a dead-letter queue.
	dlqs := map[string]string{"intake DLQ": out("IntakeDLQUrl"), "scheduler DLQ": out("SchedulerDLQUrl"), "control DLQ": out("ControlDLQUrl")}
	var agentDLQs map[string]struct {
		URL         string `json:"url"`
		PriorityURL string `json:"priorityUrl"`
	}
	if err := json.Unmarshal([]byte(out("AgentDLQs")), &agentDLQs); err != nil {
		t.Errorf("decoding the AgentDLQs output: %v", err)
	}
	for name, q := range agentDLQs {
		dlqs["agent "+name+" DLQ"] = q.URL
		if q.PriorityURL != "" {
			dlqs["agent "+name+" priority DLQ"] = q.PriorityURL
		}
	}
	for name, u := range dlqs {
		r, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(u), MaxNumberOfMessages: 10, VisibilityTimeout: 0})
		if err != nil {
			t.Errorf("reading the %s: %v", name, err)
			continue
		}
		for _, m := range r.Messages {
			t.Errorf("the %s holds a message: %s", name, aws.ToString(m.Body))
		}
	}

	mark("total", begin)
	t.Logf("travel timings: %s; trips settled %s after sending", formatTimings(timings), settledAfter)
}

// checkTrip compares one trip's outcome with what it must be: its state,
// each step's state (and why a refused one failed), which steps were undone
// and in which order (by the time each reached Compensated in its history),
// and the statuses on the reply queue.
func checkTrip(t *testing.T, tr trip, v *sas.OrderView, got map[int64]sas.Status) {
	t.Helper()
	if v == nil {
		t.Errorf("%s: not in the state store", tr.id)
		return
	}
	if s := v.State(); s != tr.state {
		t.Errorf("%s: state %s, want %s", tr.id, s, tr.state)
	}
	if len(v.Steps) != len(tr.steps) {
		t.Errorf("%s: %d steps, want %d", tr.id, len(v.Steps), len(tr.steps))
	}
	undoneAt := map[string]time.Time{}  // step → when it reached Compensated
	undoStart := map[string]time.Time{} // step → when its undo was claimed
	settledAt := map[string]time.Time{} // step → when it reached Processed or Error
	index := map[string]int{}
	for _, s := range v.Steps {
		index[s.StepName] = s.Step
		if want := tr.steps[s.StepName]; string(s.ProcessState) != want {
			t.Errorf("%s: step %s is %s, want %s (last error %q)", tr.id, s.StepName, s.ProcessState, want, s.LastError)
		}
		if want, ok := tr.reason[s.StepName]; ok && !strings.Contains(s.LastError, want) {
			t.Errorf("%s: step %s failed with %q, want it to say %q", tr.id, s.StepName, s.LastError, want)
		}
		if tr.steps[s.StepName] == "Pending" && s.Attempt != 0 {
			t.Errorf("%s: step %s was tried (attempt %d): nothing after a refused step may run", tr.id, s.StepName, s.Attempt)
		}
		for _, h := range s.History {
			switch h.To {
			case sas.Compensating:
				undoStart[s.StepName] = h.At
			case sas.Compensated:
				undoneAt[s.StepName] = h.At
			case sas.Processed, sas.Error:
				if h.From == sas.Processing {
					settledAt[s.StepName] = h.At
				}
			}
		}
	}
	undone := make([]string, 0, len(undoneAt))
	for name := range undoneAt {
		undone = append(undone, name)
	}
	sort.Slice(undone, func(i, j int) bool { return undoneAt[undone[i]].Before(undoneAt[undone[j]]) })
	want := tr.undone
	if tr.workflow != "" {
		// Branches: newest completion first (docs/protocol.md), a tie to
		// the higher step, of the steps the test says are undone.
		want = slices.Clone(tr.undone)
		sort.Slice(want, func(i, j int) bool {
			a, b := settledAt[want[i]], settledAt[want[j]]
			if a.Equal(b) {
				return index[want[i]] > index[want[j]]
			}
			return a.After(b)
		})
	}
	if !slices.Equal(undone, want) && (len(undone) > 0 || len(want) > 0) {
		t.Errorf("%s: undone %v (in the order they reached Compensated), want %v", tr.id, undone, want)
	}
	// One undo at a time: each starts once the one before it is done.
	for i := 1; i < len(undone); i++ {
		prev, cur := undone[i-1], undone[i]
		if undoStart[cur].Before(undoneAt[prev]) {
			t.Errorf("%s: the undo of %s started at %s, before the undo of %s was done at %s", tr.id, cur,
				undoStart[cur].Format(time.StampMilli), prev, undoneAt[prev].Format(time.StampMilli))
		}
	}
	seq, wantSeq := statusSequence(got), tr.statuses
	if tr.workflow != "" {
		seq, wantSeq = slices.Sorted(slices.Values(seq)), slices.Sorted(slices.Values(wantSeq))
	}
	if !slices.Equal(seq, wantSeq) {
		t.Errorf("%s: statuses on the reply queue %v, want %v", tr.id, statusSequence(got), tr.statuses)
	}
}

// statusSequence is an order's statuses in seq order, "status" or
// "status/step".
func statusSequence(got map[int64]sas.Status) []string {
	seqs := make([]int64, 0, len(got))
	for s := range got {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	out := make([]string, 0, len(seqs))
	for _, s := range seqs {
		st := got[s]
		if st.Step != "" {
			out = append(out, st.Status+"/"+st.Step)
		} else {
			out = append(out, st.Status)
		}
	}
	return out
}

// describeTrips says where each trip is: its state, each step's state,
// attempt, failures and last error, and the statuses heard so far.
func describeTrips(trips []trip, vs map[string]*sas.OrderView, statuses map[string]map[int64]sas.Status) string {
	var sb strings.Builder
	for _, tr := range trips {
		v := vs[tr.id]
		if v == nil {
			fmt.Fprintf(&sb, "\n    %s: not in the state store (the scheduler never took it from the intake queue, or refused it: see the scheduler's \"intake rejected\" lines)", tr.id)
		} else {
			fmt.Fprintf(&sb, "\n    %s: %s;", tr.id, v.State())
			for _, s := range v.Steps {
				fmt.Fprintf(&sb, " %s:%s(attempt %d, failures %d", s.StepName, s.ProcessState, s.Attempt, s.FailureCount)
				if s.LastError != "" {
					fmt.Fprintf(&sb, ", %q", s.LastError)
				}
				sb.WriteString(")")
			}
		}
		fmt.Fprintf(&sb, "\n      statuses: %v", statusSequence(statuses[tr.id]))
	}
	return sb.String()
}
