package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// queue is a model of one SQS queue: at-least-once, unordered delivery,
// visibility timeouts, receive counts and a redrive policy. The simulator,
// not a poller, decides which message is delivered when, and may deliver
// one that is in flight again (a duplicate).
type queue struct {
	name, url, arn string
	visibility     time.Duration
	maxReceives    int    // 0: no redrive policy
	dlq            *queue // where a message goes on the receive past maxReceives
	msgs           []*message
	// consumer says who takes the queue's messages: "scheduler", an agent
	// name, or "" (the status and dead-letter queues, read by the checks).
	consumer string
}

// receive is one receive of a message: the task it went to, under which
// receipt, whether a later receive outran it (its receipt was stale by the
// time the task ended, so its deletes deleted nothing), and the task's stop
// at which it was handed on (handOff; 0: it was not).
type receive struct {
	t           *task // nil: the receive never reached a handler (Faults.Unhandled)
	receipt     string
	outrun      bool
	handedOffAt int
	// renewTried: the scheduler tried to renew this receive's message
	// (its copy's send went out or failed). It renews each record of a
	// batch once, in the batch's order, so a copy is matched to the first
	// record of its body not yet tried: two records of one body (an
	// agent's two replies to a duplicated request) are told apart.
	renewTried bool
}

// handedOff notes, on the message t received that body hands on (the
// first of the same order, step and attempt not yet handed on: a batch
// may hold duplicates, handled in its order), that t's current stop sent
// it.
func (t *task) handedOff(body string) {
	// A renewal's copy is its message's body with the renewal's fields:
	// the message it renews, when the batch holds it, is that one, not
	// another of the same attempt (a started report, a reply, before it).
	if x, ok := t.renewing(body); ok {
		x.r.handedOffAt = t.stops
		return
	}
	k := stepAttempt(body)
	for _, x := range t.received {
		if x.r.handedOffAt == 0 && stepAttempt(x.m.body) == k {
			x.r.handedOffAt = t.stops
			return
		}
	}
}

// sendFailed notes a send of msgs that failed: the task is excused what
// it owed, a hand-off among them failed, and a renewal's copy among them
// was tried (its record is handled as it is, Handler.renew), so the next
// copy of the same body renews the batch's next record of it.
func (t *task) sendFailed(msgs []sas.OutboundMessage) {
	t.excused = true
	t.handOffFailed = t.handOffFailed || slices.ContainsFunc(msgs, handOff)
	for _, m := range msgs {
		t.renewing(m.Body)
	}
}

// renewing is the message t received that body, a renewal's copy, renews:
// the first record of the same body, one renewal fewer, whose renewal was
// not tried yet (see receive.renewTried), now marked tried. ok is false
// when body is no renewal's copy of a message t holds.
func (t *task) renewing(body string) (received, bool) {
	own, n := unrenewed(body)
	if own == "" || n == 0 {
		return received{}, false
	}
	for _, x := range t.received {
		if was, m := unrenewed(x.m.body); !x.r.renewTried && was == own && m+1 == n {
			x.r.renewTried = true
			return x, true
		}
	}
	return received{}, false
}

// unrenewed is body without the scheduler's renewal fields, canonical ("" when
// body is not a JSON object), and its renewal count (0 for none).
func unrenewed(body string) (string, int) {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &m) != nil {
		return "", 0
	}
	var n int
	_ = json.Unmarshal(m["sasRenewals"], &n)
	delete(m, "sasRenewals")
	delete(m, "sasRenewalSig")
	delete(m, "sasSender")
	b, err := json.Marshal(m)
	if err != nil {
		return "", 0
	}
	return string(b), n
}

// stepAttempt is what a body is about: its order, step and attempt.
func stepAttempt(body string) string {
	var h struct {
		OrderID string          `json:"orderId"`
		Step    json.RawMessage `json:"step"`
		Attempt int             `json:"attempt"`
	}
	_ = json.Unmarshal([]byte(body), &h)
	return fmt.Sprintf("%s/%s/%d", h.OrderID, h.Step, h.Attempt)
}

type message struct {
	id, body  string
	sentAt    time.Time
	visibleAt time.Time
	receives  int
	receipt   string
	gone      bool
	// duplicated: SQS delivered it twice once already (at-least-once
	// delivery makes that rare, not a habit).
	duplicated bool
	// sender is the task that sent it, for the trace.
	sender string
	// receipts are its receives, in order: who handled each.
	receipts []*receive
	// poison: it went to its dead-letter queue with no handler of its last
	// receives finished (lastHandlersCut).
	poison bool
	// redriven: the operator moved it back from its dead-letter queue
	// (redrive.go).
	redriven bool
}

func (q *queue) visible(now time.Time) []*message {
	var out []*message
	for _, m := range q.msgs {
		if !m.gone && !m.visibleAt.After(now) {
			out = append(out, m)
		}
	}
	return out
}

func (q *queue) inFlight(now time.Time) []*message {
	var out []*message
	for _, m := range q.msgs {
		if !m.gone && !m.duplicated && m.receives > 0 && m.visibleAt.After(now) {
			out = append(out, m)
		}
	}
	return out
}

func (q *queue) live() int {
	n := 0
	for _, m := range q.msgs {
		if !m.gone {
			n++
		}
	}
	return n
}

// compact drops deleted messages so that long runs stay cheap.
func (q *queue) compact() {
	if len(q.msgs) < 64 {
		return
	}
	keep := q.msgs[:0]
	for _, m := range q.msgs {
		if !m.gone {
			keep = append(keep, m)
		}
	}
	q.msgs = keep
}

// queues is the world's sas.Queue and sas.DepthReader: every call stops
// the calling task first.
type queues struct{ w *World }

var (
	_ sas.Queue       = queues{}
	_ sas.DepthReader = queues{}
)

func (qs queues) Send(ctx context.Context, p sas.SendParams) (sas.SendResult, error) {
	w := qs.w
	q := w.byURL[p.QueueURL]
	if q == nil {
		return sas.SendResult{}, fmt.Errorf("sim: no queue %s", p.QueueURL)
	}
	c := stop(ctx, opSend, "send %d to %s: %s", len(p.Messages), q.name, describeBodies(p.Messages))
	if q == w.status {
		// Statuses are sent best effort: what the checks hold the system
		// to is that it tried to tell the submitter.
		for _, m := range p.Messages {
			var s sas.Status
			if err := json.Unmarshal([]byte(m.Body), &s); err == nil {
				w.statuses[s.OrderID] = append(w.statuses[s.OrderID], s)
			}
		}
	}
	if c.fault == faultFail {
		if t := taskOf(ctx); t != nil {
			t.sendFailed(p.Messages)
		}
		return sas.SendResult{}, errors.New("sim: the send failed (injected)")
	}
	sender := ""
	if t := taskOf(ctx); t != nil {
		sender = t.name
	}
	now := w.clock.Now()
	for _, m := range p.Messages {
		if w.loseSuccessor(ctx, m.Body) {
			continue
		}
		body := m.Body
		if w.oldAgent(ctx, body) {
			body = stripVersion(body)
		}
		w.nextMsg++
		msg := &message{id: fmt.Sprintf("m%d", w.nextMsg), body: body, sentAt: now, visibleAt: now.Add(m.Delay), sender: sender}
		q.msgs = append(q.msgs, msg)
		w.sent(ctx, q, msg)
	}
	if t := taskOf(ctx); t != nil {
		for _, m := range p.Messages {
			if handOff(m) {
				t.handedOff(m.Body)
			}
		}
	}
	return sas.SendResult{Requests: 1}, nil
}

func (qs queues) Receive(context.Context, sas.ReceiveParams) ([]sas.InboundMessage, error) {
	return nil, errors.New("sim: the simulator delivers the messages; nothing polls")
}

func (qs queues) Delete(ctx context.Context, p sas.DeleteParams) (sas.DeleteResult, error) {
	q := qs.w.byURL[p.QueueURL]
	if q == nil {
		return sas.DeleteResult{}, fmt.Errorf("sim: no queue %s", p.QueueURL)
	}
	stop(ctx, opOther, "delete %d from %s", len(p.Receipts), q.name)
	for _, r := range p.Receipts {
		q.delete(r)
	}
	return sas.DeleteResult{Requests: 1}, nil
}

// delete deletes the message whose latest receipt is r. SQS accepts an
// older receipt without deleting the message: a duplicate delivery made it
// stale.
func (q *queue) delete(r string) {
	for _, m := range q.msgs {
		if !m.gone && m.receipt == r {
			m.gone = true
		}
	}
}

func (qs queues) ChangeVisibility(ctx context.Context, p sas.ChangeVisibilityParams) error {
	w := qs.w
	q := w.byURL[p.QueueURL]
	if q == nil {
		return fmt.Errorf("sim: no queue %s", p.QueueURL)
	}
	stop(ctx, opOther, "change visibility on %s to %s", q.name, p.Timeout)
	for _, m := range q.msgs {
		if !m.gone && m.receipt == p.Receipt {
			m.visibleAt = w.clock.Now().Add(p.Timeout)
		}
	}
	return nil
}

func (qs queues) Depth(ctx context.Context, url string) (sas.QueueDepth, error) {
	w := qs.w
	q := w.byURL[url]
	if q == nil {
		return sas.QueueDepth{}, fmt.Errorf("sim: no queue %s", url)
	}
	stop(ctx, opRead, "depth of %s", q.name)
	now := w.clock.Now()
	var d sas.QueueDepth
	for _, m := range q.msgs {
		switch {
		case m.gone:
		case m.receives == 0 && m.visibleAt.After(now):
			d.Delayed++
		case m.visibleAt.After(now):
			d.InFlight++
		default:
			d.Visible++
		}
	}
	return d, nil
}

// describeBodies is a short account of what a send carries, for the trace.
func describeBodies(ms []sas.OutboundMessage) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, describeBody(m.Body))
	}
	return strings.Join(parts, "; ")
}

func describeBody(body string) string {
	var m struct {
		Kind         string          `json:"kind"`
		OrderID      string          `json:"orderId"`
		Step         json.RawMessage `json:"step"`
		Attempt      int             `json:"attempt"`
		Outcome      string          `json:"outcome"`
		Compensation bool            `json:"compensation"`
		Status       string          `json:"status"`
		Requeue      bool            `json:"requeue"`
		Version      string          `json:"version"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return "undecodable"
	}
	s := m.Kind
	if s == "" {
		s = "intake"
	}
	s += " " + m.OrderID
	if len(m.Step) > 0 {
		sep := "/"
		if m.Kind == string(sas.KindStatus) {
			sep = " "
		}
		s += sep + strings.Trim(string(m.Step), `"`)
	}
	if m.Attempt > 0 {
		s += fmt.Sprintf(" a%d", m.Attempt)
	}
	if m.Compensation {
		s += " undo"
	}
	for _, x := range []string{m.Outcome, m.Status} {
		if x != "" {
			s += " " + x
		}
	}
	if m.Requeue {
		s += " requeue"
	}
	if m.Kind == string(sas.KindAgentReply) && m.Version == "" {
		s += " (no version)"
	}
	return s
}

// stripVersion removes the "version" field of a reply, and the fields that
// came after it, as an agent built before them would send it.
func stripVersion(body string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return body
	}
	// Fields added after the version: an agent without it has none of them.
	delete(m, "version")
	delete(m, "sig")
	delete(m, "generation")
	b, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return string(b)
}

// handOff reports whether m hands a received message on: a scheduler's
// renewal (a copy carrying sasRenewals), an agent's hand-back of a request
// (retry{requeue}), or an agent's reply, which disposes of the request it
// answers (one whose reply fails is left for redelivery). A started report
// (issue 31) is no hand-off: the agent goes on to run the request, which
// it still holds.
func handOff(m sas.OutboundMessage) bool {
	var h struct {
		Renewals *int        `json:"sasRenewals"`
		Kind     sas.Kind    `json:"kind"`
		Requeue  bool        `json:"requeue"`
		Outcome  sas.Outcome `json:"outcome"`
	}
	return json.Unmarshal([]byte(m.Body), &h) == nil &&
		(h.Renewals != nil || h.Kind == sas.KindRetry && h.Requeue ||
			h.Kind == sas.KindAgentReply && h.Outcome != sas.OutcomeStarted)
}
