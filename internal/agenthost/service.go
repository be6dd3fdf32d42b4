package agenthost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/msgctx"
	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sqsevent"
	"github.com/sas-go/sas/internal/sqslimits"
)

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
	s.handBackLate(ctx, ev.Records, failed, late)
	s.reportStarts(ctx, groups, s.clock.Now())

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
	s.collect(ctx, ev.Records, results, failed)

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

// inbound is one well-formed request of a batch.
type inbound struct {
	index     int
	messageID string
	req       sas.AgentRequest
	sentAt    time.Time // SQS's SentTimestamp; zero when the event has none
	receives  int       // SQS's ApproximateReceiveCount (1 when absent)
	reported  bool      // its started report went out with the batch's (reportStarts)
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
				attrs = append(attrs, "order", req.OrderID) // whatever could be read, to find the order
			}
			s.log.Error("agent: malformed request acknowledged without a reply", attrs...)
			continue
		}
		m := inbound{index: i, messageID: rec.MessageId, req: req, sentAt: sqsevent.SentAt(rec), receives: receives(rec)}
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
	log := s.log.With("messageId", m.messageID, "agent", m.req.Agent, "order", m.req.OrderID,
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
	if out, f = s.process(ctx, log, m, &ran); out != nil {
		out.index = m.index
		// What was measured goes to the scheduler too, for the order's
		// page (informational: sas.AgentReply.QueuedMs).
		out.reply.QueuedMs, out.reply.RanMs = ran.timing(m.sentAt)
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

// timing is what a run measured: its wait in the queue, from sentAt (SQS's
// SentTimestamp; unknown when zero) to the start, and its execution.
// Both unknown when the call was not made.
func (r run) timing(sentAt time.Time) (queued, ran sas.Millis) {
	if r.start.IsZero() {
		return sas.Millis{}, sas.Millis{}
	}
	if !sentAt.IsZero() {
		queued = sas.MillisOf(r.start.Sub(sentAt))
	}
	return queued, sas.MillisOf(r.took)
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
	queued, took := ran.timing(m.sentAt) // the same figures as the reply's
	tookMs, _ := took.Milliseconds()
	ms := []metrics.Metric{
		{Name: metrics.ExecutionTime, Unit: metrics.Milliseconds, Value: float64(tookMs)},
		{Name: outcome, Unit: metrics.Count, Value: 1},
	}
	if q, ok := queued.Milliseconds(); ok {
		ms = append(ms, metrics.Metric{Name: metrics.QueueWait, Unit: metrics.Milliseconds, Value: float64(q)})
	}
	l := metrics.Line{Time: ran.start, Dimensions: sets, Dims: dims, Metrics: ms,
		Properties: map[string]any{"order": req.OrderID, "step": req.Step, "attempt": req.Attempt, "messageId": m.messageID}}
	if t := sas.TraceID(req.Trace); t != "" {
		l.Properties["traceId"] = t
	}
	if err := s.metrics.Emit(l); err != nil {
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
func (s *Service) process(ctx context.Context, log *slog.Logger, m inbound, ran *run) (*outgoing, fate) {
	req := m.req
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
		if !m.reported && lateStart(req, start, m.receives) {
			s.reportStart(ctx, log, req, start)
		}
		result, err = r.Run(callCtx, req)
		ran.took = s.clock.Now().Sub(start)
	} else {
		err = &PermanentError{Reason: fmt.Sprintf("no agent %q in this deployment (it hosts: %s)", req.Agent, s.agentNames())}
	}

	reply := replyTo(req)
	transient := false
	switch {
	case err == nil:
		res, tooLarge := carriedResult(log, req.StepName, resultOf(result))
		reply.Outcome, reply.Result = sas.OutcomeDone, res
		if tooLarge != "" {
			// Never a silent drop: the step fails by name, and since its
			// effect happened the scheduler has it undone.
			reply.Outcome, reply.Reason, reply.ErrorType = sas.OutcomeFailed, truncate(tooLarge, maxReasonBytes), sas.ErrorResultTooLarge
		}
	case errors.Is(err, ErrPermanent):
		reply.Outcome, reply.Reason, reply.Rejected = sas.OutcomeFailed, reasonOf(err), rejectedOf(err) && !req.Compensation
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
		if ErrorTypeOf(err, nil) == sas.ErrorCircuitOpen {
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
	// The sizes are bounded at intake and per result so that this never
	// happens (sqslimits); should a request from elsewhere be that large,
	// the step fails by name rather than its reply never going out.
	if n := len(sas.Encode(reply)); n > sqslimits.MaxBodyBytes && reply.Result != nil {
		log.Warn("agent: reply over the message limit with its result; the step fails", "replyBytes", n, "limit", sqslimits.MaxBodyBytes)
		reply.Outcome, reply.Result, reply.ErrorType = sas.OutcomeFailed, nil, sas.ErrorResultTooLarge
		reply.Reason = fmt.Sprintf("%s: the reply of step %s with its result takes %d bytes, over the %d-byte message limit; its effect is undone",
			sas.ErrorResultTooLarge, req.StepName, n, sqslimits.MaxBodyBytes)
	}
	return &outgoing{reply: reply, req: req, log: log, start: start, deadline: deadline}, acknowledged
}

func (s *Service) agentNames() string {
	names := make([]string, 0, len(s.agents))
	for n := range s.agents {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// whyNoOutcome names the class of a no-outcome error for the log: by the
// kind the error names (ErrorTyper), never by which client raised it.
func whyNoOutcome(err error) string {
	var re *RedeliveryError
	var et ErrorTyper
	switch {
	case errors.As(err, &re):
		return "retry after " + re.Delay.String()
	case errors.As(err, &et) && et.ErrorType() == sas.ErrorCircuitOpen:
		return "circuit open"
	case errors.As(err, &et) && et.ErrorType() == sas.ErrorTimeout:
		return "deadline reached"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "invocation ending"
	case errors.As(err, &et) && et.ErrorType() != "":
		return et.ErrorType()
	}
	return "failed"
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
