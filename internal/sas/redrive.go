package sas

import "fmt"

// KindRedrive is an operator's redrive of a dead letter the scheduler
// reads (control queue only): the message, as it was, and the queue it came
// from (docs/protocol.md, "Redrives").
const KindRedrive Kind = "redrive"

// The queues a redrive may name: those the scheduler reads.
const (
	RedriveIntake    = "intake"
	RedriveScheduler = "scheduler"
	RedriveControl   = "control"
)

// MaxRedriveBytes bounds a redrive message: SQS's limit of 256 KiB. A dead
// letter too large to carry inside one is moved back as it is, and is then
// a new message, not a redelivery.
const MaxRedriveBytes = 256 << 10

// Redrive carries a dead letter back to the scheduler as a redelivery of
// itself. A dead letter sent back to its own queue arrives as a new message
// (SQS counts its receives from zero), which the scheduler takes for a
// duplicate: a duplicate re-sends nothing, so the held step whose request
// the dead letter should have sent would wait for its request's delivery
// horizon (docs/protocol.md, "Deadlines start at pick-up"). A redrive comes
// through the control queue, which only the supervisor and operators may
// send to, so the scheduler believes it is a redelivery, and handles Body
// as if it came from Queue, under that queue's rules.
type Redrive struct {
	V    int  `json:"v"`
	Kind Kind `json:"kind"`
	// Queue is the queue the dead letter was sent to: RedriveIntake,
	// RedriveScheduler or RedriveControl.
	Queue string `json:"queue"`
	// Body is the dead letter's body, unchanged.
	Body string `json:"body"`
	// MessageID and Sender are the dead letter's SQS message id and
	// SenderId, as its dead-letter queue kept them: who sent it first,
	// which the scheduler reads as it would the sender of the original
	// (the submitter of an intake, the actor of a compensate).
	MessageID string `json:"messageId,omitempty"`
	Sender    string `json:"sender,omitempty"`
	// Actor is who redrove it, as the operator's tool says.
	Actor string `json:"actor,omitempty"`
	// Trace is the redriving tool's trace context, if it has one: logged
	// only; the message inside carries its order's.
	Trace string `json:"trace,omitempty"`
}

// Check rejects a redrive the scheduler could not handle.
func (r Redrive) Check() error {
	switch {
	case r.Queue != RedriveIntake && r.Queue != RedriveScheduler && r.Queue != RedriveControl:
		return &ValidationError{Field: "queue", Reason: fmt.Sprintf("%q is none of %q, %q, %q", r.Queue, RedriveIntake, RedriveScheduler, RedriveControl)}
	case r.Body == "":
		return &ValidationError{Field: "body", Reason: "required: the dead letter's body"}
	}
	if h, err := DecodeHeader([]byte(r.Body)); err == nil && h.Kind == KindRedrive {
		return &ValidationError{Field: "body", Reason: "a redrive inside a redrive"}
	}
	return nil
}
