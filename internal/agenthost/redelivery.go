package agenthost

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqslimits"
)

// requeue hands back the requests that ended without an outcome on their
// last delivery (MaxDeliveries): for each, a retry{requeue} goes to the
// scheduler, which sends the request again if its attempt is still current
// (a fresh message, its delivery count from 1), and the old message is
// acknowledged. The request thus stays in the agent queue, where the
// supervisor sees it, instead of vanishing or piling up in the DLQ
// (docs/protocol.md, "Deadlines start at pick-up"). A retry that could not be
// sent leaves its message for redelivery, as before.
//
// The requests received more often than MaxDeliveries are handed back
// unrun, and first (handBackLate): requeue then sees their fate
// acknowledged and skips them.
func (s *Service) requeue(ctx context.Context, records []events.SQSMessage, failed []fate) {
	s.handBack(ctx, records, failed, nil)
}

// handBackLate hands back the requests at late (received more often than
// MaxDeliveries) before the batch runs anything, and deletes each handed
// back at once, as the scheduler retires a renewed message: a batch cut by
// its instance's death or its timeout while it runs the others would
// otherwise take their last receives with it, and the request would reach
// the dead-letter queue, where nothing re-sends it and no agent reports it
// (docs/protocol.md, "Dead letters").
func (s *Service) handBackLate(ctx context.Context, records []events.SQSMessage, failed []fate, late []int) {
	if len(late) > 0 {
		s.handBack(ctx, records, failed, late)
	}
}

// handBack hands back the requests of failed that ended without an outcome
// on their MaxDeliveries-th delivery or later; only those at only when it
// is not nil, each deleted at once once its hand-back is out.
func (s *Service) handBack(ctx context.Context, records []events.SQSMessage, failed []fate, only []int) {
	var msgs []outbox.Message
	var idx []int
	for i, f := range failed {
		if only != nil && !slices.Contains(only, i) {
			continue
		}
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
	var handedBack []events.SQSMessage
	for k, i := range idx {
		if errs[k] != nil {
			if receives(records[i]) >= s.maxReceives {
				// Its next receive would dead-letter it. Dropped instead:
				// the request is then nowhere, and the supervisor re-drives
				// the step once its deadline passes (a failure counted),
				// as for a request whose agent died: its redeliveries
				// reported its pick-up (had no report got through, at its
				// delivery horizon). The dead-letter queue
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
		if only != nil {
			handedBack = append(handedBack, records[i])
		}
	}
	s.retire(ctx, handedBack...)
}

// retire deletes the messages of requests handed back or answered at once,
// one Delete per queue (a DeleteMessageBatch for more than one). A delete
// that fails, or a message whose queue or receipt is not known, is left to
// the event source, which deletes it when the batch ends.
func (s *Service) retire(ctx context.Context, msgs ...events.SQSMessage) {
	byQueue := map[string][]string{}
	var urls []string
	for _, m := range msgs {
		url := s.queueOf(m)
		if url == "" || m.ReceiptHandle == "" {
			continue
		}
		if _, ok := byQueue[url]; !ok {
			urls = append(urls, url)
		}
		byQueue[url] = append(byQueue[url], m.ReceiptHandle)
	}
	for _, url := range urls {
		res, err := s.queue.Delete(ctx, sas.DeleteParams{QueueURL: url, Receipts: byQueue[url]})
		if err == nil && len(res.Failed) > 0 {
			err = fmt.Errorf("%d of %d: %s: %s", len(res.Failed), len(byQueue[url]), res.Failed[0].Code, res.Failed[0].Message)
		}
		if err != nil {
			s.log.Warn("agent: could not delete requests handed back or answered; the event source deletes them when the batch ends",
				"queue", url, "messages", len(byQueue[url]), "err", err.Error())
		}
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

// CircuitOpenBackoff is how long a request refused by an open breaker (an
// error of kind sas.ErrorCircuitOpen) stays invisible: the breakers' default
// open period (httpcall.DefaultOpenFor, agent.DefaultBreakerOpenFor; a test
// holds them equal).
const CircuitOpenBackoff = 10 * time.Second

// RedeliveryBackoff is how long a request left without an outcome stays
// invisible before its next delivery: 2^(receives-1) seconds, at most
// MaxRedeliveryBackoff, where receives is the message's
// ApproximateReceiveCount (1 when absent or unreadable). The delivery count
// is SQS's; the MaxDeliveries-th delivery without an outcome is handed back
// to the scheduler (requeue) and acknowledged (docs/protocol.md, "Agent").
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
