//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sas-go/sas/internal/dynamostore"
	"github.com/sas-go/sas/internal/sas"
)

// approvalTimeout is trip-approval's wait in the deployed example
// (-c approvalTimeout): a wait nobody answers is given up by the
// supervisor's schedule within a minute after it.
const approvalTimeout = 40 * time.Second

// approvalBudget bounds each phase of the approvals: the timeout, the
// schedule's minute, and MiniStack's own pace.
const approvalBudget = 3 * time.Minute

// approvalEnv is what the approvals need of the deployed travel example.
type approvalEnv struct {
	sqs     *sqs.Client
	store   *dynamostore.Store
	intake  string
	replyTo string
	run     string
	// read drains the reply queue and returns every status heard so far,
	// by order and seq.
	read func() map[string]map[int64]sas.Status
}

// approvals is issue 28's black-box check on the deployed stack: two
// trip-approval orders wait for a manager (a callback step); a forged
// token, and a token of the other order re-signed for this one, change
// nothing; a real completion through the intake queue books the first
// trip, and a repeat of it changes nothing; the second, never answered,
// is given up at its timeout and its holds are released.
func approvals(t *testing.T, ctx context.Context, e approvalEnv) {
	t.Helper()
	approved, unanswered := "travel-"+e.run+"-approved", "travel-"+e.run+"-unapproved"
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i, id := range []string{approved, unanswered} {
		body := fmt.Sprintf(`{"v":1,"orderId":%q,"workflow":"trip-approval","payload":{"traveller":"Ada","flight":"LH 123","hotel":"Ritz","car":"compact","amount":420},"replyTo":%q}`, id, e.replyTo)
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String(body)})
	}
	if _, err := e.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(e.intake), Entries: entries}); err != nil {
		t.Fatalf("approvals: sending the orders: %v", err)
	}

	// Each waits, its token in its waiting status.
	tokens := map[string]string{}
	until(t, "both trips waiting for approval, tokens heard", func() bool {
		for id, sts := range e.read() {
			for _, st := range sts {
				if st.Status == sas.StatusWaiting && st.Step == "approve" {
					tokens[id] = st.Token
				}
			}
		}
		return tokens[approved] != "" && tokens[unanswered] != ""
	})
	step := func(id string, i int) sas.StepRecord {
		v, err := e.store.GetOrder(ctx, id)
		if err != nil {
			t.Fatalf("approvals: reading %s: %v", id, err)
		}
		return v.Steps[i]
	}
	complete := func(token string, result string) {
		t.Helper()
		body := fmt.Sprintf(`{"v":1,"kind":"complete","token":%q,"outcome":"done","result":%s}`, token, result)
		if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.intake), MessageBody: aws.String(body)}); err != nil {
			t.Fatalf("approvals: sending a completion: %v", err)
		}
	}

	// Forged: a token cut short, and the other order's token with this
	// order's id put in (its signature is the other's).
	good := tokens[approved]
	body, sig, _ := strings.Cut(tokens[unanswered], "~")
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		t.Fatalf("approvals: the token's body: %v", err)
	}
	swapped := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), unanswered, approved, 1))) + "~" + sig
	complete(good[:len(good)-3], `{"approvedBy":"mallory"}`)
	complete(swapped, `{"approvedBy":"mallory"}`)
	until(t, "the intake queue has taken the forged completions", func() bool { return queueEmpty(ctx, e.sqs, e.intake) })
	for _, id := range []string{approved, unanswered} {
		if r := step(id, 3); r.ProcessState != sas.Processing {
			t.Fatalf("approvals: %s's approval is %s after forged completions, want Processing (waiting)", id, r.ProcessState)
		}
	}

	// The real one books the trip; a repeat changes nothing.
	complete(good, `{"approvedBy":"Grace"}`)
	until(t, approved+" booked", func() bool {
		v, err := e.store.GetOrder(ctx, approved)
		return err == nil && v.State() == sas.Processed
	})
	r := step(approved, 3)
	var res map[string]string
	if err := json.Unmarshal(r.Result, &res); err != nil || res["approvedBy"] != "Grace" {
		t.Errorf("approvals: %s's approval result %s, want the real completion's", approved, r.Result)
	}
	if last := r.History[len(r.History)-1]; !strings.HasPrefix(last.Reason, "completed by ") {
		t.Errorf("approvals: %s's approval history ends %q, want who completed it", approved, last.Reason)
	}
	complete(good, `{"approvedBy":"again"}`)
	until(t, "the intake queue has taken the repeat", func() bool { return queueEmpty(ctx, e.sqs, e.intake) })
	if r := step(approved, 3); string(r.Result) != `{"approvedBy":"Grace"}` || step(approved, 4).Attempt != 1 {
		t.Errorf("approvals: a repeated completion changed %s: approval result %s, pay attempt %d", approved, r.Result, step(approved, 4).Attempt)
	}

	// Never answered: given up at its timeout, the holds released.
	until(t, unanswered+" given up and compensated", func() bool {
		v, err := e.store.GetOrder(ctx, unanswered)
		return err == nil && v.State() == sas.Compensated && v.Settled()
	})
	v, err := e.store.GetOrder(ctx, unanswered)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []sas.ProcessState{sas.Compensated, sas.Compensated, sas.Compensated, sas.Error, sas.Pending} {
		if got := v.Steps[i].ProcessState; got != want {
			t.Errorf("approvals: %s step %d (%s) is %s, want %s (%q)", unanswered, i, v.Steps[i].StepName, got, want, v.Steps[i].LastError)
		}
	}
	if !strings.Contains(v.Steps[3].LastError, "no completion or heartbeat by the deadline") {
		t.Errorf("approvals: %s's approval failed with %q, want its timeout", unanswered, v.Steps[3].LastError)
	}
	t.Logf("approvals: %s booked by its completion, forged and repeated ones changed nothing; %s given up %s after its wait began (timeout %s)",
		approved, unanswered, v.Steps[3].UpdatedAt.Sub(v.Steps[3].ClaimedAt()).Round(time.Second), approvalTimeout)
}

// until polls cond every half second for approvalBudget, and fails the
// test saying what it waited for.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(approvalBudget)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("approvals: not within %s: %s", approvalBudget, what)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// queueEmpty reports whether a queue holds no message, visible or in
// flight.
func queueEmpty(ctx context.Context, c *sqs.Client, url string) bool {
	a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return false
	}
	return a.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)] == "0" &&
		a.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)] == "0"
}
