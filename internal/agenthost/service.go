// Package agenthost is the runtime that hosts the Agent of the Scheduler Agent Supervisor pattern
// (docs/pattern.md §2, docs/protocol.md "Agent"): it takes agent.request messages from
// its queue, runs each through the named agent's Runner, and answers the
// scheduler with an agent.reply.
//
// The agent's deadline for a request is its own (Deadline): the step's
// TimeoutMs counted from when it starts the request, so a request that waited
// in the queue past its CompleteBy is run, not dropped; a request without
// TimeoutMs (from an older scheduler) has CompleteBy as its deadline.
//
// Outcomes, per request (docs/protocol.md, "Agent"):
//
//	Run succeeded                      → agent.reply {outcome: done, result if small}
//	Run failed with ErrPermanent       → agent.reply {outcome: failed, reason}
//	no TimeoutMs, CompleteBy passed    → no call, nothing sent, acknowledged
//	  on arrival                          (nothing can serve it)
//	no outcome (deadline reached,      → nothing sent, left for redelivery with a
//	  tries exhausted, breaker open,      short visibility backoff: the next run
//	  invocation ending)                  repeats the call under the same key;
//	                                      the third such delivery is acknowledged
//	                                      and the supervisor takes over
//	no outcome, *RedeliveryError       → the same, the backoff being its Delay
//	the outcome came after the deadline → nothing sent, left for redelivery the
//	                                      same way (the next run gets the stored
//	                                      answer under the same key)
//	malformed message                  → logged, acknowledged
//
// The agent's function may poll two queues, its own and its priority lane
// (Config.RequestQueueURL, Config.PriorityQueueURL): a request's visibility
// is changed on the queue it came from.
//
// A reply echoes the request's orderId, step, attempt and lockedBy, which
// fence the scheduler's write: a late or duplicate reply loses cleanly there.
// It also echoes, verbatim and unread, the order fields the request carries
// (workflow, replyTo, payload, compensation, stepName): with them the
// scheduler advances the order without reading it (sas.AgentReply).
//
// The Runners come from the public SDK (package agent), which adapts a
// team's step functions to Runner. How the built-in HTTP agent
// (agent.HTTP, internal/builtinagent) knows what to call: a newer
// scheduler's request carries the step's action ("action": "POST
// /payments", or the undo's for a compensation); for a request without one
// (an older scheduler) the agent's Routes map the step name to the step's
// Action and Undo, taken at start-up from the same workflow registry the
// scheduler runs (RoutesFromRegistry over internal/registry), so a bad
// action fails the cold start, not an order. Routing is by step name alone:
// such a request carries no workflow name either, so a step name must mean
// the same call in every workflow that gives it to the same agent;
// RoutesFromRegistry refuses a registry where it does not.
package agenthost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/httpcall"
	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/msgctx"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqslimits"
)

// Runner runs one attempt of one step for one agent. It returns the result
// to report, an error wrapping ErrPermanent for a failure to report, or any
// other error for "no outcome" (the Service then sends nothing and leaves the
// request for redelivery; a *RedeliveryError in the chain says after how
// long). The context's deadline is the agent's for the
// request (Deadline), or the invocation's end less the reply reserve if that
// comes first.
type Runner interface {
	Run(ctx context.Context, req sas.AgentRequest) (result json.RawMessage, err error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, req sas.AgentRequest) (json.RawMessage, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, req sas.AgentRequest) (json.RawMessage, error) {
	return f(ctx, req)
}

// Defaults for zero Config fields.
const (
	// DefaultConcurrency matches the event source's batch size, so a whole
	// batch runs at once and no request waits behind another's deadline.
	DefaultConcurrency = 10
	// DefaultReplyReserve is kept back from the invocation's own deadline
	// (the Lambda timeout), so a call still running then is cut off in time
	// for the others' replies to be sent and the batch to be answered.
	DefaultReplyReserve = 2 * time.Second
	// DefaultReplyLinger is how long a ready reply waits for others of its
	// invocation to share its SendMessageBatch (SQS bills a batch of up to
	// ten small messages as one request). It is short so that a slow or
	// hanging call never holds back the replies of the fast ones, whose
	// deadlines run meanwhile.
	DefaultReplyLinger = 50 * time.Millisecond
	// DefaultMaxDeliveries: a request that ends without an outcome this
	// many deliveries in a row is acknowledged, and the supervisor takes
	// over. Keep it below the queue's maxReceiveCount (5 in infra/), so the
	// DLQ holds only messages nothing can serve.
	DefaultMaxDeliveries = 3
	// DefaultMaxReceives is the agent queues' maxReceiveCount in the CDK
	// construct.
	DefaultMaxReceives = 5
)

// Config configures a Service.
type Config struct {
	// Queue sends the replies. Required.
	Queue sas.Queue
	// ReplyQueueURL is the scheduler's queue (SAS_SCHEDULER_QUEUE_URL). Required.
	ReplyQueueURL string
	// RequestQueueURL is the agent's own request queue (SAS_AGENT_QUEUE_URL).
	// Optional: when set, a request left for redelivery without an outcome
	// has its visibility shortened to a backoff (RedeliveryBackoff), so it
	// comes back in seconds rather than after the queue's visibility timeout.
	RequestQueueURL string
	// PriorityQueueURL is the agent's priority lane
	// (SAS_AGENT_PRIORITY_QUEUE_URL), a second queue the same function
	// polls. Optional. A message's visibility is changed on the queue it
	// came from (see queueOf), so both lanes get the backoff.
	PriorityQueueURL string
	// Agents maps an agent name (AgentRequest.Agent) to its Runner. At least one.
	Agents map[string]Runner
	// Clock is the only source of "now". Default sas.SystemClock.
	Clock sas.Clock
	// Logger receives one line per request. Default slog.Default().
	Logger *slog.Logger
	// Concurrency bounds the requests of one batch run at once. Default 10.
	Concurrency int
	// ReplyReserve: see DefaultReplyReserve. Default 2s.
	ReplyReserve time.Duration
	// ReplyLinger: see DefaultReplyLinger. Default 50ms. A ready reply waits
	// only while another request of its batch still runs: when the last one
	// ends, or ten replies are ready, they are sent at once.
	ReplyLinger time.Duration
	// MaxDeliveries: see DefaultMaxDeliveries. Default 3.
	MaxDeliveries int
	// MaxReceives is the request queues' maxReceiveCount (default
	// DefaultMaxReceives, the construct's): a request whose hand-back to the
	// scheduler fails on that receive, the last before the dead-letter
	// queue, is dropped rather than dead-lettered (requeue).
	MaxReceives int
	// Metrics receives one CloudWatch Embedded Metric Format line per
	// request run (internal/metrics): its queue wait, execution time and
	// outcome. nil publishes none.
	Metrics io.Writer
}

// Service hosts named agents. It is safe for concurrent use.
type Service struct {
	queue    sas.Queue
	replyURL string
	// requestURLs are the agent's own queues: its queue and its priority
	// lane, those that are set.
	requestURLs []string
	agents      map[string]Runner
	clock       sas.Clock
	log         *slog.Logger
	concurrency int
	reserve     time.Duration
	linger      time.Duration
	// maxDeliveries, maxReceives: see Config.
	maxDeliveries, maxReceives int
	metrics                    *metrics.Emitter
}

// New checks cfg and returns a Service.
func New(cfg Config) (*Service, error) {
	invalid := func(field, reason string) (*Service, error) {
		return nil, fmt.Errorf("configuring agent service: %w", &sas.ValidationError{Field: field, Reason: reason})
	}
	switch {
	case cfg.Queue == nil:
		return invalid("Queue", "required")
	case cfg.ReplyQueueURL == "":
		return invalid("ReplyQueueURL", "required (SAS_SCHEDULER_QUEUE_URL)")
	case len(cfg.Agents) == 0:
		return invalid("Agents", "at least one agent")
	case cfg.Concurrency < 0:
		return invalid("Concurrency", "must not be negative")
	case cfg.ReplyReserve < 0:
		return invalid("ReplyReserve", "must not be negative")
	case cfg.MaxDeliveries < 0:
		return invalid("MaxDeliveries", "must not be negative")
	case cfg.ReplyLinger < 0:
		return invalid("ReplyLinger", "must not be negative")
	}
	for name, r := range cfg.Agents {
		if name == "" || r == nil {
			return invalid("Agents", fmt.Sprintf("agent %q: a name and a runner", name))
		}
	}
	s := &Service{
		queue: cfg.Queue, replyURL: cfg.ReplyQueueURL, agents: cfg.Agents,
		clock: cfg.Clock, log: cfg.Logger, concurrency: cfg.Concurrency, reserve: cfg.ReplyReserve,
		linger: cfg.ReplyLinger, maxDeliveries: cfg.MaxDeliveries, maxReceives: cfg.MaxReceives,
		metrics: metrics.NewEmitter(cfg.Metrics),
	}
	for _, u := range []string{cfg.RequestQueueURL, cfg.PriorityQueueURL} {
		if u != "" && !slices.Contains(s.requestURLs, u) {
			s.requestURLs = append(s.requestURLs, u)
		}
	}
	if s.clock == nil {
		s.clock = sas.SystemClock{}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.concurrency == 0 {
		s.concurrency = DefaultConcurrency
	}
	if s.reserve == 0 {
		s.reserve = DefaultReplyReserve
	}
	if s.linger == 0 {
		s.linger = DefaultReplyLinger
	}
	if s.maxReceives <= 0 {
		s.maxReceives = DefaultMaxReceives
	}
	if s.maxDeliveries == 0 {
		s.maxDeliveries = DefaultMaxDeliveries
	}
	return s, nil
}

// Handle is the typed Lambda handler for the agent request queue. It never
// fails the whole batch: a malformed message is logged and acknowledged
// alone; a message whose reply could not be sent, or whose request ended
// without an outcome, is listed in BatchItemFailures so SQS redelivers it
// (the remote call is idempotent by key, so repeating it is safe). The list
// is empty, never nil, when all went well: some pollers redeliver forever on
// a null list (docs/pattern.md §7).
//
// Replies are sent batched (see collect): one SendMessageBatch for the
// replies that are ready together, instead of one SendMessage each.
func (s *Service) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	failed := make([]fate, len(ev.Records))
	groups, late := s.parse(ev.Records)
	for _, i := range late {
		// Received more often than MaxDeliveries (instances that died or
		// hung with it, a duplicate): handed back unrun, so that a good
		// request is renewed rather than dead-lettered (docs/protocol.md,
		// "Dead letters").
		failed[i] = redeliverSoon
	}

	// Requests with the same idempotency key (a duplicate delivery in one
	// batch) run one after the other, so the second finds the first's stored
	// answer instead of colliding with it in flight. Distinct keys run
	// concurrently, bounded: the work is waiting on remote services.
	results := make(chan result, len(ev.Records))
	sem := make(chan struct{}, s.concurrency)
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for _, m := range g {
				out, f := s.handleOne(ctx, m)
				results <- result{index: m.index, out: out, fate: f}
			}
		}()
	}
	go func() { wg.Wait(); close(results) }()
	s.collect(ctx, results, failed)

	s.requeue(ctx, ev.Records, failed)
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	var waits []wait
	for i, f := range failed {
		if f == acknowledged {
			continue
		}
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		if d, ok := f.backoff(ev.Records[i]); ok {
			waits = append(waits, wait{msg: ev.Records[i], d: d})
		}
	}
	s.backOff(ctx, waits)
	return resp, nil
}

// requeue hands back the requests that ended without an outcome on their
// last delivery (MaxDeliveries): for each, a retry{requeue} goes to the
// scheduler, which sends the request again if its attempt is still current
// (a fresh message, its delivery count from 1), and the old message is
// acknowledged. The request thus stays in the agent queue, where the
// supervisor sees it, instead of vanishing or piling up in the DLQ
// (docs/protocol.md, "Waiting is not executing"). A retry that could not be
// sent leaves its message for redelivery, as before.
func (s *Service) requeue(ctx context.Context, records []events.SQSMessage, failed []fate) {
	var msgs []outbox.Message
	var idx []int
	for i, f := range failed {
		delay, noOutcome := f.backoff(records[i])
		if !noOutcome || receives(records[i]) < s.maxDeliveries {
			continue
		}
		req, err := DecodeRequest([]byte(records[i].Body))
		if err != nil {
			continue // cannot happen: it was run
		}
		reason := fmt.Sprintf("no outcome after %d deliveries", receives(records[i]))
		msgs = append(msgs, outbox.Message{
			QueueURL: s.replyURL, Delay: min(delay, sqslimits.MaxDelay),
			What: fmt.Sprintf("requeue of %s step %d attempt %d", req.OrderID, req.Step, req.Attempt),
			Body: sas.Encode(sas.Retry{V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: req.OrderID, Step: req.Step,
				Attempt: req.Attempt, Reason: reason, Requeue: true, Sig: req.Sig,
				Trace: sas.ChildTrace(req.Trace, fmt.Sprintf("%s requeue %s %d", sas.KindRetry, req.IdempotencyKey, req.Attempt))}),
		})
		idx = append(idx, i)
	}
	if len(msgs) == 0 {
		return
	}
	errs := outbox.Send(ctx, s.queue, s.replyURL, msgs)
	for k, i := range idx {
		if errs[k] != nil {
			if receives(records[i]) >= s.maxReceives {
				// Its next receive would dead-letter it. Dropped instead:
				// the request is then nowhere, and the supervisor re-drives
				// the step once its deadline passes (a failure counted),
				// as for a request whose agent died. The dead-letter queue
				// is for what nothing can serve (docs/protocol.md, "Dead
				// letters").
				s.log.Error("agent: could not hand a request back on its last receive before the dead-letter queue; dropped, the supervisor re-drives the step",
					"messageId", records[i].MessageId, "receives", receives(records[i]), "err", errs[k].Error())
				failed[i] = acknowledged
				continue
			}
			s.log.Error("agent: could not hand a request back to the scheduler; left for redelivery",
				"messageId", records[i].MessageId, "err", errs[k].Error())
			continue
		}
		s.log.Warn("agent: no outcome after the last delivery; handed back to the scheduler to send again",
			"messageId", records[i].MessageId, "deliveries", receives(records[i]))
		failed[i] = acknowledged
	}
}

// fate is what becomes of a request's message. Compare with the values
// below; redeliverAfter makes the one that carries a delay.
type fate struct {
	kind fateKind
	// delay is the redelivery a runner asked for (a *RedeliveryError),
	// bounded to what SQS accepts; for redeliverAsked only.
	delay time.Duration
}

type fateKind int

const (
	ackd fateKind = iota
	visibilityTimeout
	soon
	circuitRest
	asked
)

var (
	// acknowledged: deleted when the invocation returns (replied, or
	// nothing can ever serve it).
	acknowledged = fate{kind: ackd}
	// redeliver: left for redelivery after the queue's visibility timeout
	// (a reply that could not be sent, a panic).
	redeliver = fate{kind: visibilityTimeout}
	// redeliverSoon: no outcome; left for redelivery after a short backoff
	// (RedeliveryBackoff) when the request queue is known.
	redeliverSoon = fate{kind: soon}
	// redeliverLater: no outcome because the endpoint's circuit is open;
	// left for redelivery after CircuitOpenBackoff, the time a breaker
	// rests by default.
	redeliverLater = fate{kind: circuitRest}
)

// redeliverAfter: no outcome, and the runner asked for the request to come
// back after d (a *RedeliveryError: the service said "retry after d"),
// bounded to SQS's longest visibility timeout.
func redeliverAfter(d time.Duration) fate {
	return fate{kind: asked, delay: min(max(d, 0), sqslimits.MaxVisibility)}
}

// backoff is how long a message left without an outcome stays invisible;
// ok is false for the other fates (acknowledged, or left to the queue's
// visibility timeout).
func (f fate) backoff(msg events.SQSMessage) (d time.Duration, ok bool) {
	switch f.kind {
	case soon:
		return RedeliveryBackoff(msg), true
	case circuitRest:
		return CircuitOpenBackoff, true
	case asked:
		// Never sooner than the usual backoff: "ask again at once" from a
		// service must not spin the request through its deliveries.
		return max(f.delay, RedeliveryBackoff(msg)), true
	}
	return 0, false
}

// MaxRedeliveryBackoff caps RedeliveryBackoff.
const MaxRedeliveryBackoff = 30 * time.Second

// CircuitOpenBackoff is how long a request its endpoint's open circuit
// refused stays invisible: the breaker's default open period.
const CircuitOpenBackoff = httpcall.DefaultOpenFor

// RedeliveryBackoff is how long a request left without an outcome stays
// invisible before its next delivery: 2^(receives-1) seconds, at most
// MaxRedeliveryBackoff, where receives is the message's
// ApproximateReceiveCount (1 when absent or unreadable). The delivery count
// is SQS's; the MaxDeliveries-th delivery without an outcome is acknowledged
// and the supervisor takes over (docs/protocol.md, "Agent").
func RedeliveryBackoff(msg events.SQSMessage) time.Duration {
	n := receives(msg)
	if n > 6 { // 2^5 s already passes the cap
		return MaxRedeliveryBackoff
	}
	return min(time.Duration(1<<(n-1))*time.Second, MaxRedeliveryBackoff)
}

// receives is a message's ApproximateReceiveCount, 1 when absent or
// unreadable.
func receives(msg events.SQSMessage) int {
	n, err := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// wait is a message left without an outcome and how long it is to stay
// invisible.
type wait struct {
	msg events.SQSMessage
	d   time.Duration
}

// backOff sets the visibility of the messages left without an outcome to
// their backoff, so they come back in seconds (or when the service asked)
// rather than after the queue's visibility timeout. The change goes to the
// queue each message came from (queueOf); a message whose queue is not
// known is left alone. A failure is only logged: the message then comes
// back after the queue's visibility timeout, which is slower but loses
// nothing.
func (s *Service) backOff(ctx context.Context, waits []wait) {
	if len(s.requestURLs) == 0 || len(waits) == 0 {
		return
	}
	var wg sync.WaitGroup
	for _, w := range waits {
		m := w.msg
		if m.ReceiptHandle == "" {
			s.log.Warn("agent: no receipt handle; the request comes back after the queue's visibility timeout", "messageId", m.MessageId)
			continue
		}
		url := s.queueOf(m)
		if url == "" {
			s.log.Warn("agent: the request's queue is none of this agent's; it comes back after the queue's visibility timeout",
				"messageId", m.MessageId, "eventSourceARN", m.EventSourceARN)
			continue
		}
		wg.Go(func() {
			err := s.queue.ChangeVisibility(ctx, sas.ChangeVisibilityParams{QueueURL: url, Receipt: m.ReceiptHandle, Timeout: w.d})
			if err != nil {
				s.log.Warn("agent: could not shorten the visibility of a request left for redelivery; it comes back after the queue's visibility timeout",
					"messageId", m.MessageId, "backoff", w.d.String(), "err", err.Error())
				return
			}
			s.log.Info("agent: request left for redelivery", "messageId", m.MessageId, "backoff", w.d.String())
		})
	}
	wg.Wait()
}

// queueOf is the URL of the agent's queue a message came from, "" when it
// cannot tell. An agent's function may poll two queues (its queue and its
// priority lane); a receipt handle is only good on its own queue. The event
// names the queue by ARN (arn:aws:sqs:region:account:name) and a queue URL
// ends in the same name (https://sqs.region.amazonaws.com/account/name), so
// the two are matched by name. An event without an ARN (a test, a poller
// that does not fill it) can only be from the one queue the agent knows
// when it knows one.
func (s *Service) queueOf(m events.SQSMessage) string {
	if m.EventSourceARN == "" {
		if len(s.requestURLs) == 1 {
			return s.requestURLs[0]
		}
		return ""
	}
	name := sas.QueueName(m.EventSourceARN)
	for _, u := range s.requestURLs {
		if sas.QueueName(u) == name {
			return u
		}
	}
	return ""
}

// maxReplyBatch is SQS's limit of entries per SendMessageBatch.
const maxReplyBatch = 10

// result is how one request of a batch ended.
type result struct {
	index int
	out   *outgoing // the reply to send; nil: nothing to send
	fate  fate      // of the message when out is nil; a sent reply acknowledges it
}

// outgoing is a reply ready to be sent.
type outgoing struct {
	index    int
	reply    sas.AgentReply
	req      sas.AgentRequest
	log      *slog.Logger
	start    time.Time
	deadline time.Time // the agent's, Deadline(req, start)
}

// collect takes the results of one invocation as they come and sends the
// replies in batches: a ready reply waits at most the linger for others.
// It returns when every request has ended and every reply was sent (or
// marked in failed).
func (s *Service) collect(ctx context.Context, results <-chan result, failed []fate) {
	var pending []outgoing
	var timer *time.Timer
	var linger <-chan time.Time
	flush := func() {
		if timer != nil {
			timer.Stop()
			timer, linger = nil, nil
		}
		s.sendReplies(ctx, pending, failed)
		pending = nil
	}
	for {
		select {
		case r, open := <-results:
			if !open {
				if len(pending) > 0 {
					flush()
				}
				return
			}
			switch {
			case r.out == nil:
				failed[r.index] = r.fate
			default:
				pending = append(pending, *r.out)
				if len(pending) == maxReplyBatch {
					flush()
				} else if timer == nil {
					timer = time.NewTimer(s.linger)
					linger = timer.C
				}
			}
		case <-linger:
			flush()
		}
	}
}

// sendReplies sends ready replies in one Send (a SendMessageBatch for more
// than one), holding back any whose deadline passed while it waited (their
// messages are left for redelivery, as for no outcome).
func (s *Service) sendReplies(ctx context.Context, pending []outgoing, failed []fate) {
	var batch []outgoing
	now := s.clock.Now()
	for _, o := range pending {
		if o.reply.Outcome != sas.OutcomeTransient && s.late(o.log, o.reply, o.deadline, now) {
			failed[o.index] = redeliverSoon
			continue
		}
		batch = append(batch, o)
	}
	if len(batch) == 0 {
		return
	}
	// The one place per-entry send failures are mapped back (internal/outbox):
	// the linger above decides when, outbox.Send how.
	msgs := make([]outbox.Message, len(batch))
	for i, o := range batch {
		msgs[i] = outbox.Message{QueueURL: s.replyURL, Body: sas.Encode(o.reply), What: fmt.Sprintf("agent.reply for %s step %d", o.reply.OrderID, o.reply.Step)}
	}
	errs := outbox.Send(ctx, s.queue, s.replyURL, msgs)
	for i, o := range batch {
		took := s.clock.Now().Sub(o.start).String()
		switch err := errs[i]; {
		case err != nil:
			o.log.Error("agent: reply not sent; message left for redelivery", "outcome", o.reply.Outcome, "err", err.Error())
			failed[o.index] = redeliver
		case o.reply.Outcome == sas.OutcomeFailed:
			o.log.Warn("agent: replied failed", "outcome", o.reply.Outcome, "reason", o.reply.Reason, "took", took)
		case o.reply.Outcome == sas.OutcomeTransient:
			o.log.Warn("agent: replied transient: the attempt failed", "outcome", o.reply.Outcome, "errorType", o.reply.ErrorType, "reason", o.reply.Reason, "took", took)
		default:
			o.log.Info("agent: replied done", "outcome", o.reply.Outcome, "took", took)
		}
	}
}

// late reports (and logs) an outcome that came at or after the agent's
// deadline for the request (Deadline). The pattern's agent stops at the
// deadline and says nothing (docs/pattern.md §2). The work is not lost: the
// message is left for redelivery, whose call sends the same key and gets the
// stored answer (docs/protocol.md, "Agent").
func (s *Service) late(log *slog.Logger, reply sas.AgentReply, deadline, now time.Time) bool {
	if now.Before(deadline) {
		return false
	}
	log.Warn("agent: outcome came after the deadline; no reply, left for redelivery",
		"outcome", reply.Outcome, "reason", reply.Reason, "deadline", deadline, "lateBy", now.Sub(deadline).String())
	return true
}

// inbound is one well-formed request of a batch.
type inbound struct {
	index     int
	messageID string
	req       sas.AgentRequest
	sentAt    time.Time // SQS's SentTimestamp; zero when the event has none
}

// parse decodes the batch, logs and drops malformed messages (acknowledged:
// a poison message is never retried), and groups the rest by idempotency key
// in batch order.
func (s *Service) parse(records []events.SQSMessage) (groups [][]inbound, late []int) {
	byKey := map[string]int{}
	for i, rec := range records {
		if receives(rec) > s.maxDeliveries {
			late = append(late, i)
			continue
		}
		req, err := DecodeRequest([]byte(rec.Body))
		if err != nil {
			attrs := []any{"messageId", rec.MessageId, "reason", err.Error()}
			if req.OrderID != "" {
				attrs = append(attrs, "orderId", req.OrderID) // whatever could be read, to find the order
			}
			s.log.Error("agent: malformed request acknowledged without a reply", attrs...)
			continue
		}
		m := inbound{index: i, messageID: rec.MessageId, req: req, sentAt: sentAt(rec)}
		if g, ok := byKey[req.IdempotencyKey]; ok {
			groups[g] = append(groups[g], m)
			continue
		}
		byKey[req.IdempotencyKey] = len(groups)
		groups = append(groups, []inbound{m})
	}
	return groups, late
}

// handleOne runs one request and returns the reply to send (nil: none) and,
// when there is none, what becomes of its message. A panic is contained to
// its message, which is redelivered (and dead-lettered if it keeps panicking).
func (s *Service) handleOne(ctx context.Context, m inbound) (out *outgoing, f fate) {
	log := s.log.With("messageId", m.messageID, "agent", m.req.Agent, "orderId", m.req.OrderID,
		"step", m.req.Step, "stepName", m.req.StepName, "attempt", m.req.Attempt,
		"compensation", m.req.Compensation, "idempotencyKey", m.req.IdempotencyKey)
	if t := sas.TraceID(m.req.Trace); t != "" {
		log = log.With(msgctx.TraceIDKey, t)
	}
	defer func() {
		if p := recover(); p != nil {
			log.Error("agent: panic while handling a request; message left for redelivery",
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			out, f = nil, redeliver
		}
	}()
	var ran run
	if out, f = s.process(ctx, log, m.req, &ran); out != nil {
		out.index = m.index
	}
	s.emit(log, m, ran, out)
	return out, f
}

// run is when a request's call started and how long it took; a zero start
// means the call was not made.
type run struct {
	start time.Time
	took  time.Duration
}

// sentAt is when a request was sent, from SQS's SentTimestamp attribute.
func sentAt(rec events.SQSMessage) time.Time {
	ms, err := strconv.ParseInt(rec.Attributes["SentTimestamp"], 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// emit publishes one request's metrics (internal/metrics,
// docs/observability.md): its wait in the queue, its execution time and
// its outcome, under {Workflow, Step, Agent} and {Agent}.
func (s *Service) emit(log *slog.Logger, m inbound, ran run, out *outgoing) {
	if ran.start.IsZero() {
		return // not run: nothing was measured
	}
	outcome := metrics.AgentNoOutcome
	if out != nil {
		switch out.reply.Outcome {
		case sas.OutcomeDone:
			outcome = metrics.AgentDone
		case sas.OutcomeFailed:
			outcome = metrics.AgentFailed
		case sas.OutcomeTransient:
			outcome = metrics.AgentTransient
		}
	}
	req := m.req
	sets, dims := metrics.Step(req.Workflow, metrics.StepName(req.StepName, req.Compensation), req.Agent, []string{metrics.DimAgent})
	ms := []metrics.Metric{
		{Name: metrics.ExecutionTime, Unit: metrics.Milliseconds, Value: float64(ran.took.Milliseconds())},
		{Name: outcome, Unit: metrics.Count, Value: 1},
	}
	if !m.sentAt.IsZero() {
		ms = append(ms, metrics.Metric{Name: metrics.QueueWait, Unit: metrics.Milliseconds, Value: float64(max(ran.start.Sub(m.sentAt), 0).Milliseconds())})
	}
	props := map[string]any{"orderId": req.OrderID, "step": req.Step, "attempt": req.Attempt, "messageId": m.messageID}
	if t := sas.TraceID(req.Trace); t != "" {
		props["traceId"] = t
	}
	if err := s.metrics.Emit(metrics.Line{Time: ran.start, Dimensions: sets, Dims: dims, Metrics: ms, Properties: props}); err != nil {
		log.Warn("agent: metrics line not written", "err", err.Error())
	}
}

// Deadline is when the agent stops working on req, which it started at
// start (docs/protocol.md, "Agent"): start plus the step's TimeoutMs, its
// execution limit, however long the request waited in the queue before; or,
// for a request without TimeoutMs (from an older scheduler), its CompleteBy.
func Deadline(req sas.AgentRequest, start time.Time) time.Time {
	if req.TimeoutMs > 0 {
		return start.Add(time.Duration(req.TimeoutMs) * time.Millisecond)
	}
	return req.CompleteBy
}

// process runs one request and returns the reply to send, or nil and what
// becomes of the message when nothing is to be sent.
func (s *Service) process(ctx context.Context, log *slog.Logger, req sas.AgentRequest, ran *run) (*outgoing, fate) {
	start := s.clock.Now()
	deadline := Deadline(req, start)
	if !start.Before(req.CompleteBy) {
		if req.TimeoutMs == 0 {
			// An older scheduler's request: its deadline has passed, and
			// nothing can ever serve it.
			log.Warn("agent: request expired on arrival; no call, no reply",
				"completeBy", req.CompleteBy, "lateBy", start.Sub(req.CompleteBy).String())
			return nil, acknowledged
		}
		// Waiting is not executing: the step's limit counts from now. The
		// reply stays fenced on attempt and holder at the scheduler.
		log.Info("agent: request waited past completeBy; running it on its own time limit",
			"completeBy", req.CompleteBy, "waitedPast", start.Sub(req.CompleteBy).String(), "deadline", deadline)
	}

	// The call stops at the agent's deadline, or earlier when the
	// invocation ends first (less the reserve for the replies). A runner
	// (the SDK's, package agent) takes its deadline from this context.
	callDeadline := deadline
	if dl, ok := ctx.Deadline(); ok && dl.Add(-s.reserve).Before(callDeadline) {
		callDeadline = dl.Add(-s.reserve)
	}
	callCtx, cancel := context.WithDeadline(ctx, callDeadline)
	defer cancel()
	var result json.RawMessage
	var err error
	ran.start = start
	if r, ok := s.agents[req.Agent]; ok {
		result, err = r.Run(callCtx, req)
		ran.took = s.clock.Now().Sub(start)
	} else {
		err = &PermanentError{Reason: fmt.Sprintf("no agent %q in this deployment (it hosts: %s)", req.Agent, s.agentNames())}
	}

	reply := replyTo(req)
	transient := false
	switch {
	case err == nil:
		reply.Outcome, reply.Result = sas.OutcomeDone, carriedResult(log, resultOf(result))
	case errors.Is(err, ErrPermanent):
		reply.Outcome, reply.Reason = sas.OutcomeFailed, reasonOf(err)
	case req.TransientOutcome && !s.hostEnded(ctx, callDeadline, deadline):
		// A failure is not a wait (docs/protocol.md): the request ran and
		// got no answer, so the attempt failed, and the scheduler hears so
		// now instead of meeting the request again and again in the queue.
		kind := ErrorTypeOf(err, callCtx)
		if slices.Contains(req.NonRetryable, kind) {
			reply.Outcome, reply.Reason = sas.OutcomeFailed, truncate(fmt.Sprintf("non-retryable error %s: %s", kind, err.Error()), maxReasonBytes)
			break
		}
		transient = true
		reply.Outcome, reply.Reason, reply.ErrorType = sas.OutcomeTransient, reasonOf(err), kind
		if re := (*RedeliveryError)(nil); errors.As(err, &re) {
			reply.RetryAfterMs = re.Delay.Milliseconds()
		}
		log.Warn("agent: attempt failed; reporting it", "errorType", kind, "err", err.Error(), "deadline", deadline)
	default:
		log.Warn("agent: no outcome; no reply, message left for redelivery",
			"why", whyNoOutcome(err), "err", err.Error(), "deadline", deadline, "completeBy", req.CompleteBy)
		if re := (*RedeliveryError)(nil); errors.As(err, &re) {
			// The service said when to ask again: the next delivery waits
			// for that rather than spinning through the deliveries.
			return nil, redeliverAfter(re.Delay)
		}
		if errors.Is(err, httpcall.ErrCircuitOpen) {
			// The endpoint is resting: coming back in a second would only
			// spin through the deliveries (and requeues) while it rests.
			return nil, redeliverLater
		}
		return nil, redeliverSoon
	}
	// A transient outcome is sent whenever it comes: it carries no
	// result to fetch again, and it is fenced on its attempt like any reply.
	if !transient && s.late(log, reply, deadline, s.clock.Now()) {
		return nil, redeliverSoon
	}
	// The sizes are bounded at intake so that this never happens (sqslimits);
	// should a request from elsewhere be that large, the result is the one
	// part of the reply the scheduler can do without.
	if n := len(sas.Encode(reply)); n > sqslimits.MaxBodyBytes && reply.Result != nil {
		log.Warn("agent: reply over the message limit; result left out", "replyBytes", n, "limit", sqslimits.MaxBodyBytes)
		reply.Result = nil
	}
	return &outgoing{reply: reply, req: req, log: log, start: start, deadline: deadline}, acknowledged
}

// carriedResult is the part of a service's result a done reply carries: the
// result compacted when it is at most sqslimits.MaxResultBytes, else nothing.
// The scheduler never reads it, and a reply too large to send would turn a
// success into a failure (docs/protocol.md, "Sizes"); the log keeps its size.
func carriedResult(log *slog.Logger, result json.RawMessage) json.RawMessage {
	if len(result) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, result); err == nil && buf.Len() <= sqslimits.MaxResultBytes {
		return buf.Bytes()
	}
	log.Info("agent: result left out of the reply", "resultBytes", len(result), "limit", sqslimits.MaxResultBytes)
	return nil
}

// resultOf makes a success body a valid reply result: empty is no result,
// JSON passes through, anything else is carried as a JSON string so the
// scheduler still sees what the service said.
func resultOf(body []byte) json.RawMessage {
	s := strings.TrimSpace(string(body))
	switch {
	case s == "":
		return nil
	case json.Valid([]byte(s)):
		return json.RawMessage(s)
	}
	b, _ := sas.Marshal(s) // a string always encodes
	return b
}

// replyTo starts the reply to req. Besides the fence (order, step, attempt,
// holder) it echoes the order's workflow, replyTo, payload, undo flag and step
// name verbatim, so the scheduler can advance the order without reading it.
// The agent never interprets them: they are the scheduler's routing hints, and
// a request from an older scheduler that lacks them gets a reply that lacks
// them too (the scheduler then reads the order).
func replyTo(req sas.AgentRequest) sas.AgentReply {
	return sas.AgentReply{
		// The request's trace, a span of its own: one order, one trace.
		Trace: sas.ChildTrace(req.Trace, fmt.Sprintf("%s %s %d", sas.KindAgentReply, req.IdempotencyKey, req.Attempt)),
		V:     sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: req.OrderID, Step: req.Step,
		Attempt: req.Attempt, LockedBy: req.LockedBy, Agent: req.Agent,
		Workflow: req.Workflow, ReplyTo: req.ReplyTo, Payload: req.Payload,
		Compensation: req.Compensation, StepName: req.StepName,
		Priority: req.Priority, Version: req.Version, Generation: req.Generation,
		Sig: req.Sig, // the scheduler's signature over the echo, unread (docs/trust.md)
	}
}

func (s *Service) agentNames() string {
	names := make([]string, 0, len(s.agents))
	for n := range s.agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// whyNoOutcome names the class of a no-outcome error for the log.
func whyNoOutcome(err error) string {
	var re *RedeliveryError
	switch {
	case errors.As(err, &re):
		return "retry after " + re.Delay.String()
	case errors.Is(err, httpcall.ErrCircuitOpen):
		return "circuit open"
	case errors.Is(err, httpcall.ErrDeadline):
		return "deadline reached"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "invocation ending"
	case errors.Is(err, httpcall.ErrTransient):
		return "retries exhausted"
	}
	return "error"
}

// DecodeRequest reads and checks an agent.request. A message that fails here
// can never be served: the caller logs the reason and drops it. What could be
// read is returned with the error, for the log.
//
// Unknown fields are allowed (a newer scheduler of the same message version
// may add some); the version must be this build's. A missing idempotency key
// is derived with sas.IdempotencyKey, the same as the scheduler's.
func DecodeRequest(body []byte) (sas.AgentRequest, error) {
	var req sas.AgentRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, &sas.ValidationError{Reason: "not an agent.request: " + jsonProblem(err)}
	}
	bad := func(field, reason string) (sas.AgentRequest, error) {
		return req, &sas.ValidationError{Field: field, Reason: reason}
	}
	switch {
	case req.V != 0 && req.V != sas.MessageVersion:
		return bad("v", fmt.Sprintf("unsupported message version %d (this agent reads %d)", req.V, sas.MessageVersion))
	case req.Kind != sas.KindAgentRequest:
		return bad("kind", fmt.Sprintf("%q is not %q", req.Kind, sas.KindAgentRequest))
	case !sas.ValidOrderID(req.OrderID):
		return bad("orderId", fmt.Sprintf("%q is not an order id", req.OrderID))
	case req.Step < 0:
		return bad("step", fmt.Sprintf("%d is negative", req.Step))
	case req.StepName == "":
		return bad("stepName", "required: it selects the step's action")
	case req.Agent == "":
		return bad("agent", "required")
	case req.Attempt < 1:
		return bad("attempt", fmt.Sprintf("%d: attempts count from 1", req.Attempt))
	case req.LockedBy == "":
		return bad("lockedBy", "required: the reply is fenced on it")
	case req.CompleteBy.IsZero():
		return bad("completeBy", "required: the agent must know when to stop")
	case req.TimeoutMs < 0 || req.TimeoutMs > maxTimeoutMs:
		return bad("timeoutMs", fmt.Sprintf("%d: want 0 (absent) or a positive number of milliseconds, at most %d", req.TimeoutMs, int64(maxTimeoutMs)))
	case !printableKey(req.IdempotencyKey):
		return bad("idempotencyKey", "must be printable ASCII without spaces, at most 255 characters")
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = sas.IdempotencyKey(req.OrderID, req.Step, 0, req.Compensation)
	}
	req.V = sas.MessageVersion
	return req, nil
}

// maxTimeoutMs bounds a request's TimeoutMs: a day is far beyond any step
// (SQS holds a message in flight for 12 hours at most), and keeps the
// deadline arithmetic clear of overflow.
const maxTimeoutMs = int64(24 * time.Hour / time.Millisecond)

// printableKey accepts what an Idempotency-Key header can carry as a plain
// token ("" is accepted: DecodeRequest derives one).
func printableKey(k string) bool {
	if len(k) > 255 {
		return false
	}
	for i := range len(k) {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// jsonProblem says what is wrong with a body in a line.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}

// hostEnded reports whether a run ended because its host did, not the step:
// the invocation's end (less the reply reserve) came before the step's
// deadline and has passed, or the invocation was cancelled (a poller
// shutting down). Such a request is left for redelivery, as before: its
// attempt did not fail, it was cut short.
func (s *Service) hostEnded(ctx context.Context, callDeadline, deadline time.Time) bool {
	if ctx.Err() != nil {
		return true
	}
	return callDeadline.Before(deadline) && !s.clock.Now().Before(callDeadline)
}
