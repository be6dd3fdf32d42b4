package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// Sequence numbers of status messages: slot·seqStride + attempt, where the
// slot says what happened to which step (see the package comment). They are
// pure functions of the event, so a redelivery re-posts the same number.
const (
	seqStride  = 1000
	maxAttempt = seqStride - 1
)

func seq(slot, attempt int) int64 {
	attempt = max(0, min(attempt, maxAttempt))
	return int64(slot)*seqStride + int64(attempt)
}

// SeqRejected is the sequence number of a rejection: no order was created.
const SeqRejected int64 = 0

// SeqReceived is the sequence number of "received".
func SeqReceived() int64 { return seq(1, 0) }

// SeqFailed is the sequence number of a forward step's failure.
func SeqFailed(step, attempt int) int64 { return seq(2+2*step, attempt) }

// SeqStepDone is the sequence number of "step-done".
func SeqStepDone(step, attempt int) int64 { return seq(3+2*step, attempt) }

// SeqWaiting is the sequence number of a callback step's "waiting" at an
// attempt (its token): after the step before it was done and after any
// failure of an earlier attempt (a resubmit claims attempt+2 at least),
// before its own failure or completion at that attempt.
func SeqWaiting(step, attempt int) int64 { return seq(2+2*step, attempt-1) }

// SeqStepSkipped is the sequence number of "step-skipped": the slot of the
// step's "step-done" at attempt 0, which no run of the step has (attempts
// start at 1, and a skipped step never runs).
func SeqStepSkipped(step int) int64 { return seq(3+2*step, 0) }

// SeqProcessed is the sequence number of "processed" for an order of n steps.
func SeqProcessed(n int) int64 { return seq(2*n+2, 0) }

// SeqUndoFailed is the sequence number of a failed undo of a step; undos run
// newest first, so an older step's number is higher.
func SeqUndoFailed(n, step, attempt int) int64 { return seq(4*n+1-2*step, attempt) }

// SeqCompensated is the sequence number of "compensated".
func SeqCompensated(n int) int64 { return seq(4*n+3, 0) }

// post adds a status for the order's replyTo to u, if it has one the
// deployment (still) allows. It is best effort: a caller's queue that is
// gone or refuses it is logged and skipped by the outbox; other failures
// fail the message, whose redelivery posts the same status again.
func (s *Service) post(ctx context.Context, u *outbox.Unit, o sas.Order, st sas.Status, now time.Time) {
	if o.ReplyTo == "" {
		return
	}
	if !s.cfg.ReplyToAllowed(o.ReplyTo) {
		s.log.WarnContext(ctx, "status not posted: replyTo is no longer allowed", "order", o.OrderID, "replyTo", o.ReplyTo, "status", st.Status)
		return
	}
	st.V, st.Kind, st.At = sas.MessageVersion, sas.KindStatus, now
	st.Reason = sas.BoundReason(st.Reason) // an agent's or a submitter's words, cut (docs/trust.md)
	if st.OrderID == "" {
		st.OrderID = o.OrderID
	}
	st.Trace = sas.ChildTrace(o.Trace, fmt.Sprintf("%s %s %d", sas.KindStatus, st.Status, st.Sequence))
	u.Send(outbox.Message{
		QueueURL: o.ReplyTo, Body: sas.Encode(st), BestEffort: true,
		What: fmt.Sprintf("status %s (seq %d) of order %s", st.Status, st.Sequence, st.OrderID),
	})
}

// postNow posts a status at once rather than with the message's other
// effects: for a status that must be out before a write that would stop a
// redelivery from posting it again (a step's failure, before its undo is
// claimed). A failure to send fails the message.
func (s *Service) postNow(ctx context.Context, o sas.Order, st sas.Status, now time.Time) error {
	var b outbox.Batch
	s.post(ctx, b.Unit(0), o, st, now)
	for _, f := range b.Flush(ctx, s.sink()) {
		return fmt.Errorf("posting %s of order %s: %w", st.Status, o.OrderID, f.Err)
	}
	return nil
}
