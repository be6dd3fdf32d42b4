// Package memqueue is an in-memory sas.Queue with the SQS semantics the
// system depends on, for unit tests of the scheduler, agent and supervisor:
//
//   - a received message is hidden until its visibility timeout ends, then
//     comes back (nothing is lost when a consumer dies), with a new receipt;
//   - time is the injected sas.Clock's: tests move it, nothing sleeps, and a
//     long poll returns at once;
//   - a receipt from an earlier receive is stale: Delete accepts it and does
//     nothing (SQS "might not" delete; we take the case that finds bugs),
//     ChangeVisibility refuses it with sas.ErrLostRace;
//   - per-message and queue delays; receive counts; a redrive policy moves a
//     message to its dead-letter queue on the receive after maxReceiveCount;
//   - the same limits, batching and request counts as the SQS adapter (both
//     take them from internal/sqslimits).
//
// Visible messages are delivered in the order they were sent: deterministic,
// which SQS standard queues are not, so code under test must not rely on it.
package memqueue

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqslimits"
)

var (
	_ sas.Queue       = (*Queue)(nil)
	_ sas.DepthReader = (*Queue)(nil)
)

// Op names an operation, for Options.Fault.
type Op string

const (
	OpSend             Op = "Send"
	OpReceive          Op = "Receive"
	OpDelete           Op = "Delete"
	OpChangeVisibility Op = "ChangeVisibility"
)

// Options configure a Queue. The zero value is usable: the system clock, no
// injected faults.
type Options struct {
	Clock sas.Clock
	// Fault, when set, is asked before each call; an error fails the whole
	// call (as a network failure or throttling would) and nothing changes.
	Fault func(op Op, queueURL string) error
	// SendFault, when set, is asked for each valid message of a Send; a
	// failure is reported in SendResult.Failed and the message is not sent
	// (as SQS reports per-entry failures of a batch).
	SendFault func(queueURL string, m sas.OutboundMessage) *sas.SendFailure
}

// Queue holds any number of named queues, addressed by URL as in SQS. It is
// safe for concurrent use.
type Queue struct {
	opts Options

	mu     sync.Mutex
	byURL  map[string]*queue
	byARN  map[string]*queue
	nextID uint64
}

// New returns an empty set of queues.
func New(opts Options) *Queue {
	if opts.Clock == nil {
		opts.Clock = sas.SystemClock{}
	}
	return &Queue{opts: opts, byURL: map[string]*queue{}, byARN: map[string]*queue{}}
}

type queue struct {
	name, url, arn string
	attrs          map[string]string
	visibility     time.Duration
	delay          time.Duration
	dlqARN         string // "" without a redrive policy
	maxReceives    int
	msgs           []*message // in send order
}

type message struct {
	id        string
	body      string
	sentAt    time.Time
	visibleAt time.Time // hidden while now < visibleAt (delay or visibility)
	receives  int
	receipt   string // of the latest receive; "" before the first
}

// URL and ARN shapes follow SQS's, under names that cannot be mistaken for a
// real account.
const (
	urlPrefix = "http://memqueue.local/000000000000/"
	arnPrefix = "arn:aws:sqs:memory:000000000000:"
)

// CreateQueue creates a queue (and its dead-letter queue). The same name with
// the same attributes returns the existing queue, as SQS does; with other
// attributes it is ErrInvalid. Attributes supported: VisibilityTimeout,
// DelaySeconds, RedrivePolicy; MessageRetentionPeriod,
// ReceiveMessageWaitTimeSeconds and MaximumMessageSize are accepted and
// ignored. Others are ErrInvalid, so that a test never relies on a
// semantics this fake does not have. Names are of standard queues: FIFO
// semantics are not modelled.
func (q *Queue) CreateQueue(ctx context.Context, p sas.CreateQueueParams) (sas.CreatedQueue, error) {
	if err := ctx.Err(); err != nil {
		return sas.CreatedQueue{}, fmt.Errorf("creating queue %s: %w", p.Name, err)
	}
	if p.Name == "" {
		return sas.CreatedQueue{}, fmt.Errorf("creating queue: %w", &sas.ValidationError{Field: "Name", Reason: "empty"})
	}
	if p.MaxReceiveCount < 0 {
		return sas.CreatedQueue{}, fmt.Errorf("creating queue %s: %w", p.Name, &sas.ValidationError{Field: "MaxReceiveCount", Reason: "negative"})
	}
	attrs := maps.Clone(p.Attributes)
	if attrs == nil {
		attrs = map[string]string{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var created sas.CreatedQueue
	if p.MaxReceiveCount > 0 {
		dlq, err := q.createLocked(dlqName(p.Name), map[string]string{})
		if err != nil {
			return sas.CreatedQueue{}, err
		}
		policy, err := json.Marshal(map[string]string{"deadLetterTargetArn": dlq.arn, "maxReceiveCount": strconv.Itoa(p.MaxReceiveCount)})
		if err != nil {
			return sas.CreatedQueue{}, fmt.Errorf("creating queue %s: %w", p.Name, err)
		}
		attrs["RedrivePolicy"] = string(policy)
		created.DLQURL = dlq.url
	}
	mq, err := q.createLocked(p.Name, attrs)
	if err != nil {
		return sas.CreatedQueue{}, err
	}
	created.URL = mq.url
	return created, nil
}

func dlqName(name string) string { return name + "-dlq" }

func validName(name string) bool {
	if len(name) == 0 || len(name) > 80 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func (q *Queue) createLocked(name string, attrs map[string]string) (*queue, error) {
	invalid := func(field, reason string) error {
		return fmt.Errorf("creating queue %s: %w", name, &sas.ValidationError{Field: field, Reason: reason})
	}
	if !validName(name) {
		return nil, invalid("Name", fmt.Sprintf("%q is not a standard queue name (1-80 of A-Z a-z 0-9 - _; FIFO queues are not modelled)", name))
	}
	if existing, ok := q.byURL[urlPrefix+name]; ok {
		if !maps.Equal(existing.attrs, attrs) {
			return nil, invalid("Attributes", "a queue of this name exists with other attributes")
		}
		return existing, nil
	}
	mq := &queue{name: name, url: urlPrefix + name, arn: arnPrefix + name, attrs: attrs, visibility: sqslimits.DefaultVisibility}
	for k, v := range attrs {
		switch k {
		case "VisibilityTimeout", "DelaySeconds":
			n, err := strconv.Atoi(v)
			limit := sqslimits.MaxVisibility
			if k == "DelaySeconds" {
				limit = sqslimits.MaxDelay
			}
			if err != nil || n < 0 || time.Duration(n)*time.Second > limit {
				return nil, invalid(k, fmt.Sprintf("%q is not a number of seconds in 0..%s", v, limit))
			}
			if k == "VisibilityTimeout" {
				mq.visibility = time.Duration(n) * time.Second
			} else {
				mq.delay = time.Duration(n) * time.Second
			}
		case "RedrivePolicy":
			var rp struct {
				Target string `json:"deadLetterTargetArn"`
				Max    any    `json:"maxReceiveCount"` // SQS takes a string or a number
			}
			if err := json.Unmarshal([]byte(v), &rp); err != nil {
				return nil, invalid(k, err.Error())
			}
			n, err := strconv.Atoi(strings.Trim(fmt.Sprint(rp.Max), `"`))
			if err != nil || n < 1 || n > 1000 {
				return nil, invalid(k, fmt.Sprintf("maxReceiveCount %v is not in 1..1000", rp.Max))
			}
			if _, ok := q.byARN[rp.Target]; !ok {
				return nil, invalid(k, fmt.Sprintf("dead-letter queue %q does not exist", rp.Target))
			}
			mq.dlqARN, mq.maxReceives = rp.Target, n
		case "MessageRetentionPeriod", "ReceiveMessageWaitTimeSeconds", "MaximumMessageSize":
		default:
			return nil, invalid(k, "not supported by memqueue")
		}
	}
	q.byURL[mq.url] = mq
	q.byARN[mq.arn] = mq
	return mq, nil
}

// DeleteQueue deletes a queue and its messages.
func (q *Queue) DeleteQueue(ctx context.Context, url string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("deleting queue %s: %w", url, err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	mq, ok := q.byURL[url]
	if !ok {
		return fmt.Errorf("deleting queue %s: %w", url, sas.ErrNotFound)
	}
	delete(q.byURL, url)
	delete(q.byARN, mq.arn)
	return nil
}

// QueueARN returns a queue's ARN, for redrive policies.
func (q *Queue) QueueARN(url string) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	mq, ok := q.byURL[url]
	if !ok {
		return "", fmt.Errorf("reading the ARN of %s: %w", url, sas.ErrNotFound)
	}
	return mq.arn, nil
}

// Stats counts a queue's messages at the clock's now. Unlike SQS's
// approximate numbers, these are exact: tests may assert on them.
type Stats struct {
	Visible  int // can be received now
	InFlight int // received and hidden until their visibility ends
	Delayed  int // never received, hidden until their delay ends
}

// Stats returns a queue's counts.
func (q *Queue) Stats(url string) (Stats, error) {
	now := q.opts.Clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	mq, ok := q.byURL[url]
	if !ok {
		return Stats{}, fmt.Errorf("reading stats of %s: %w", url, sas.ErrNotFound)
	}
	var s Stats
	for _, m := range mq.msgs {
		switch {
		case !now.Before(m.visibleAt):
			s.Visible++
		case m.receives > 0:
			s.InFlight++
		default:
			s.Delayed++
		}
	}
	return s, nil
}

// lookup finds a queue, or reports ErrNotFound. Callers hold q.mu.
func (q *Queue) lookup(url string) (*queue, error) {
	mq, ok := q.byURL[url]
	if !ok {
		return nil, fmt.Errorf("no such queue: %w", sas.ErrNotFound)
	}
	return mq, nil
}

// begin runs the checks every call starts with.
func (q *Queue) begin(ctx context.Context, op Op, url string) error {
	if url == "" {
		return &sas.ValidationError{Field: "QueueURL", Reason: "empty"}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if q.opts.Fault != nil {
		if err := q.opts.Fault(op, url); err != nil {
			return err
		}
	}
	return nil
}

func (q *Queue) newID() string {
	q.nextID++
	return fmt.Sprintf("%08x-%s", q.nextID, sas.RandomID(8))
}

// Send sends messages; a Delay of 0 leaves the queue's delay in force.
func (q *Queue) Send(ctx context.Context, p sas.SendParams) (sas.SendResult, error) {
	var res sas.SendResult
	if err := q.begin(ctx, OpSend, p.QueueURL); err != nil {
		return res, fmt.Errorf("sending to %s: %w", p.QueueURL, err)
	}
	valid, failed, err := sqslimits.CheckSend(p.Messages)
	if err != nil {
		return res, fmt.Errorf("sending to %s: %w", p.QueueURL, err)
	}
	res.Failed = failed
	if len(valid) == 0 {
		return res, nil
	}
	now := q.opts.Clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	mq, err := q.lookup(p.QueueURL)
	if err != nil {
		return sas.SendResult{Requests: 1}, fmt.Errorf("sending to %s: %w", p.QueueURL, err)
	}
	res.Requests = len(sqslimits.Chunks(valid)) // as the SQS adapter: one SendMessage, or one request a batch
	for _, m := range valid {
		if q.opts.SendFault != nil {
			if f := q.opts.SendFault(p.QueueURL, m); f != nil {
				f.ID = m.ID
				res.Failed = append(res.Failed, *f)
				continue
			}
		}
		delay := mq.delay
		if m.Delay > 0 {
			delay = time.Duration(sqslimits.Seconds(m.Delay)) * time.Second
		}
		mq.msgs = append(mq.msgs, &message{id: q.newID(), body: m.Body, sentAt: now, visibleAt: now.Add(delay)})
	}
	return res, nil
}

// Receive receives up to p.Max visible messages (0 means 1). Long polling
// returns at once: in memory, waiting would only wait for the clock, which
// the test moves.
func (q *Queue) Receive(ctx context.Context, p sas.ReceiveParams) ([]sas.InboundMessage, error) {
	if err := q.begin(ctx, OpReceive, p.QueueURL); err != nil {
		return nil, fmt.Errorf("receiving from %s: %w", p.QueueURL, err)
	}
	r, err := sqslimits.CheckReceive(p)
	if err != nil {
		return nil, fmt.Errorf("receiving from %s: %w", p.QueueURL, err)
	}
	n := int(r.Max)
	now := q.opts.Clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	mq, err := q.lookup(p.QueueURL)
	if err != nil {
		return nil, fmt.Errorf("receiving from %s: %w", p.QueueURL, err)
	}
	vis := time.Duration(r.VisibilitySeconds) * time.Second
	if vis == 0 {
		vis = mq.visibility
	}
	var out []sas.InboundMessage
	kept := mq.msgs[:0:0]
	for _, m := range mq.msgs {
		switch {
		case len(out) == n || now.Before(m.visibleAt):
		case mq.dlqARN != "" && m.receives >= mq.maxReceives && q.byARN[mq.dlqARN] != nil:
			// Received maxReceiveCount times and still here: to the
			// dead-letter queue, keeping its id, body and count, as SQS does.
			dlq := q.byARN[mq.dlqARN]
			m.receipt, m.visibleAt = "", now
			dlq.msgs = append(dlq.msgs, m)
			continue
		default:
			m.receives++
			m.receipt = newReceipt(mq.name, m.id, m.receives)
			m.visibleAt = now.Add(vis)
			out = append(out, sas.InboundMessage{
				MessageID: m.id, Receipt: m.receipt, Body: m.body, ReceiveCount: m.receives, SentAt: m.sentAt,
			})
		}
		kept = append(kept, m)
	}
	mq.msgs = kept
	return out, nil
}

// Delete deletes messages by receipt. A receipt this queue did not issue is
// a failed entry; one for a message since received again, deleted, or moved
// to the dead-letter queue is accepted and does nothing.
func (q *Queue) Delete(ctx context.Context, p sas.DeleteParams) (sas.DeleteResult, error) {
	var res sas.DeleteResult
	if err := q.begin(ctx, OpDelete, p.QueueURL); err != nil {
		return res, fmt.Errorf("deleting from %s: %w", p.QueueURL, err)
	}
	receipts, failed := sqslimits.CheckReceipts(p.Receipts)
	res.Failed = failed
	if len(receipts) == 0 {
		return res, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	mq, err := q.lookup(p.QueueURL)
	if err != nil {
		return sas.DeleteResult{Requests: 1}, fmt.Errorf("deleting from %s: %w", p.QueueURL, err)
	}
	res.Requests = len(sqslimits.ReceiptChunks(receipts))
	for _, r := range receipts {
		id, ok := parseReceipt(mq.name, r)
		if !ok {
			res.Failed = append(res.Failed, sas.SendFailure{
				ID: r, Code: sqslimits.CodeInvalidReceipt, SenderFault: true,
				Message: fmt.Sprintf("the input receipt handle %q is not a valid receipt handle", r),
			})
			continue
		}
		for i, m := range mq.msgs {
			if m.id == id && m.receipt == r {
				mq.msgs = append(mq.msgs[:i:i], mq.msgs[i+1:]...)
				break
			}
		}
	}
	return res, nil
}

// ChangeVisibility hides the message for p.Timeout from now; 0 shows it at
// once. A receipt for a message since received again, or gone, is
// sas.ErrLostRace. The latest receipt of a message whose visibility already
// ran out changes nothing and is no error (what SQS answers).
func (q *Queue) ChangeVisibility(ctx context.Context, p sas.ChangeVisibilityParams) error {
	if err := q.begin(ctx, OpChangeVisibility, p.QueueURL); err != nil {
		return fmt.Errorf("changing visibility in %s: %w", p.QueueURL, err)
	}
	if p.Receipt == "" {
		return fmt.Errorf("changing visibility in %s: %w", p.QueueURL, &sas.ValidationError{Field: "Receipt", Reason: "empty"})
	}
	timeoutSeconds, err := sqslimits.CheckSeconds("Timeout", p.Timeout, sqslimits.MaxVisibility)
	if err != nil {
		return fmt.Errorf("changing visibility in %s: %w", p.QueueURL, err)
	}
	now := q.opts.Clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	mq, err := q.lookup(p.QueueURL)
	if err != nil {
		return fmt.Errorf("changing visibility in %s: %w", p.QueueURL, err)
	}
	id, ok := parseReceipt(mq.name, p.Receipt)
	if !ok {
		return fmt.Errorf("changing visibility in %s: %w", p.QueueURL,
			&sas.ValidationError{Field: "Receipt", Reason: fmt.Sprintf("%q is not a valid receipt handle", p.Receipt)})
	}
	for _, m := range mq.msgs {
		if m.id != id {
			continue
		}
		if m.receipt != p.Receipt {
			break
		}
		if !now.Before(m.visibleAt) {
			return nil
		}
		m.visibleAt = now.Add(time.Duration(timeoutSeconds) * time.Second)
		return nil
	}
	return fmt.Errorf("changing visibility in %s: message %s was received again or is gone: %w", p.QueueURL, id, sas.ErrLostRace)
}

// Receipts carry the queue name, the message id and the receive number, so a
// receipt can be told apart as foreign (invalid) or stale (superseded).
const receiptPrefix = "mq1."

func newReceipt(queueName, msgID string, n int) string {
	return receiptPrefix + base64.RawURLEncoding.EncodeToString([]byte(queueName)) + "." + msgID + "." + strconv.Itoa(n)
}

func parseReceipt(queueName, r string) (msgID string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(r, receiptPrefix), ".")
	if !strings.HasPrefix(r, receiptPrefix) || len(parts) != 3 {
		return "", false
	}
	name, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || string(name) != queueName || parts[1] == "" {
		return "", false
	}
	if _, err := strconv.Atoi(parts[2]); err != nil {
		return "", false
	}
	return parts[1], true
}

// Depth is Stats as a sas.DepthReader (exact, where SQS's is approximate).
func (q *Queue) Depth(_ context.Context, url string) (sas.QueueDepth, error) {
	s, err := q.Stats(url)
	return sas.QueueDepth{Visible: s.Visible, InFlight: s.InFlight, Delayed: s.Delayed}, err
}
