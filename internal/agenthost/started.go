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
