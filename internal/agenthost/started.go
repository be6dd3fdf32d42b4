package agenthost

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// lateStart reports whether the pick-up of req at start, on its
// receives-th delivery, is reported to the scheduler before the run
// (docs/protocol.md, "Deadlines start at pick-up"): the request asks for
// it (StartedOutcome), and the run cannot finish by the attempt's
// CompleteBy (it waited in the queue past the pick-up allowance), or this
// is a redelivery (an earlier delivery's run may have been cut short, and
// its pick-up may have gone unreported). An on-time first delivery
// reports nothing: the happy path costs no message.
func lateStart(req sas.AgentRequest, start time.Time, receives int) bool {
	if !req.StartedOutcome || req.TimeoutMs <= 0 {
		return false
	}
	return receives > 1 || Deadline(req, start).After(req.CompleteBy)
}

// reportStarts sends, in one Send (SQS batches of ten), the started
// reports of the requests of groups whose pick-up at now is late
// (lateStart), before the batch runs any, and marks each reported: a batch
// of ten late pick-ups costs one SendMessageBatch instead of ten
// SendMessage. A request that only becomes late within the batch (it ran
// after the others of its key) is reported on its own when it starts
// (process). Reports that cannot be sent are logged and their requests run
// all the same, as reportStart's.
func (s *Service) reportStarts(ctx context.Context, groups [][]inbound, now time.Time) {
	var msgs []outbox.Message
	var marks []*inbound
	for _, g := range groups {
		for k := range g {
			m := &g[k]
			if _, ok := s.agents[m.req.Agent]; !ok || !lateStart(m.req, now, m.receives) {
				continue
			}
			rep := replyTo(m.req)
			rep.Outcome = sas.OutcomeStarted
			msgs = append(msgs, outbox.Message{QueueURL: s.replyURL, Body: sas.Encode(rep),
				What: fmt.Sprintf("started report for %s step %d attempt %d", m.req.OrderID, m.req.Step, m.req.Attempt)})
			marks = append(marks, m)
		}
	}
	if len(msgs) == 0 {
		return
	}
	for i, err := range outbox.Send(ctx, s.queue, s.replyURL, msgs) {
		m := marks[i]
		m.reported = true // sent or not: a failed report is not tried again for this delivery
		if err != nil {
			s.log.Warn("agent: started report not sent; running the request all the same",
				"messageId", m.messageID, "order", m.req.OrderID, "err", err.Error())
			continue
		}
		s.log.Info("agent: late pick-up reported", "messageId", m.messageID, "order", m.req.OrderID,
			"step", m.req.Step, "attempt", m.req.Attempt, "completeBy", m.req.CompleteBy, "deadline", Deadline(m.req, now))
	}
}

// reportStart sends the started report for req, signed with the
// request's signature as every reply is. A report that cannot be sent is
// logged and the request run all the same: its outcome is what the
// scheduler waits for, and should this run be cut short, the request's
// redelivery reports again.
func (s *Service) reportStart(ctx context.Context, log *slog.Logger, req sas.AgentRequest, start time.Time) {
	rep := replyTo(req)
	rep.Outcome = sas.OutcomeStarted
	errs := outbox.Send(ctx, s.queue, s.replyURL, []outbox.Message{{
		QueueURL: s.replyURL, Body: sas.Encode(rep),
		What: fmt.Sprintf("started report for %s step %d attempt %d", req.OrderID, req.Step, req.Attempt),
	}})
	if err := errs[0]; err != nil {
		log.Warn("agent: started report not sent; running the request all the same", "err", err.Error())
		return
	}
	log.Info("agent: late pick-up reported", "completeBy", req.CompleteBy, "deadline", Deadline(req, start))
}
