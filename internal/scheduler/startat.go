package scheduler

import (
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// Starting later (docs/intake.md, "Starting later"; docs/protocol.md,
// "Wait steps"). An intake with a startAt ahead of its arrival stores the
// order at once with its first step to run unclaimed (Pending at attempt
// 0, no failure counted), its pick-up deadline the start time: in the
// deadline index, and nothing polls. At the start time the supervisor's
// sweep sends the scheduler a retry for it, as for a wait step's due
// time, and the retry's claim starts the order; a start within SQS's 15
// minutes gets the scheduler's own delayed retry. A retry that comes
// before the start time claims nothing (notYet): an order never starts
// early, whoever asks.

// startLater adds the retry that starts an order's step at startAt, when
// that is within SQS's delay; the sweep starts it otherwise.
func (s *Service) startLater(u *outbox.Unit, o order, step int, startAt, now time.Time) {
	left := startAt.Sub(now)
	if left > maxDelay || s.cfg.ControlQueueURL == "" {
		return
	}
	u.Send(outbox.Message{
		QueueURL: s.cfg.ControlQueueURL, Delay: (left + time.Second - 1) / time.Second * time.Second,
		What: fmt.Sprintf("the start of order %s at %s", o.id(), startAt.Format(time.RFC3339)),
		Body: sas.Encode(sas.Retry{V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: o.id(), Step: step, Attempt: 0,
			Reason: "the order's start time", Trace: o.ord.Trace}),
	})
}

// notYet reports whether rec is a step that starts an order later and
// whose start time has not come: unclaimed at attempt 0 with no failure
// counted, its pick-up deadline ahead.
func notYet(rec sas.StepRecord, now time.Time) bool {
	return rec.ProcessState == sas.Pending && rec.LockedBy == "" && rec.Attempt == 0 && rec.FailureCount == 0 &&
		now.Before(rec.DueAt)
}
