package scheduler

import (
	"cmp"
	"context"
	"encoding/json"

	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// redriven handles an operator's redrive of a dead letter (sas.Redrive,
// docs/protocol.md, "Redrives"): the dead letter's body, as if it came
// from its own queue again, and as a redelivery, so that the request of a
// step its first delivery claimed is sent again if no pick-up was reported
// (resend). The redrive is believed because of where it came from: the
// control queue, which only the supervisor and operators may send to. What
// it carries is not: the inner message is held to its own queue's rules (an
// intake is checked as any intake, a reply's echo under the scheduler's
// signature, a retry or compensate as from the control queue).
func (s *Service) redriven(ctx context.Context, u *outbox.Unit, from Origin, body []byte) error {
	if !accepts(from.Source, sas.KindRedrive, false) {
		return refuseSource(from, sas.KindRedrive)
	}
	var m sas.Redrive
	if err := json.Unmarshal(body, &m); err != nil {
		return drop(err, "malformed redrive message")
	}
	if err := m.Check(); err != nil {
		return drop(err, "redrive message")
	}
	// A dead letter may be a copy the scheduler renewed (renew.go): its
	// renewal fields come off as a delivery's would, and its first sender
	// is the one the scheduler signed, the copy's own being the scheduler.
	was, dead := s.renewals(m.Body)
	sender := m.Sender
	if was.sender != "" {
		sender = was.sender
	}
	// The dead letter's own id, which a rejection echoes to its sender.
	inner := Origin{Source: FromControl, SenderID: sender, MessageID: cmp.Or(m.MessageID, from.MessageID), Redelivered: true}
	switch m.Queue {
	case sas.RedriveIntake:
		inner.Source = FromIntake
	case sas.RedriveScheduler:
		inner.Source = FromAgents
	}
	if m.Queue == sas.RedriveControl && sender == "" {
		// A control message's sender is its authority (the actor of a
		// compensate): the redriving operator's, when the dead letter's
		// is not known.
		inner.SenderID = from.SenderID
	}
	s.log.InfoContext(ctx, "redriven dead letter", "queue", m.Queue, "deadLetter", m.MessageID,
		"sender", m.Sender, "redrivenBy", from.SenderID, "declaredActor", m.Actor)
	return s.handleMessage(ctx, u, inner, []byte(dead))
}
