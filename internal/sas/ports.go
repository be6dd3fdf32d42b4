package sas

import (
	"context"
	"fmt"
	"time"
)

// Clock is the only thing that reads the time.
type Clock interface{ Now() time.Time }

// SystemClock reads the wall clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now().UTC() }

// StateStore is the durable state store (docs/pattern.md §2, §4). Every method that
// moves a step is one conditional write; a write that finds the record not as
// the caller saw it returns an error that errors.Is ErrLostRace.
type StateStore interface {
	// Submit writes the order and all its state records atomically. The same
	// order again is a no-op (Created false, the stored view returned); the
	// same id with other content is ErrOrderConflict.
	Submit(ctx context.Context, p SubmitParams) (SubmitResult, error)
	Claim(ctx context.Context, p ClaimParams) (StepRecord, error)
	// Complete finishes a step and, with p.Next, claims the following one in
	// the same atomic write, settling the steps in p.Skip with it. The
	// returned slice holds the completed record, then with p.Next the
	// claimed one, then the skipped ones in p.Skip's order.
	Complete(ctx context.Context, p CompleteParams) ([]StepRecord, error)
	Fail(ctx context.Context, p FailParams) (StepRecord, error)
	// FindDue returns records in the given state whose DueAt is at or before
	// p.Now, from the sparse index: the work grows with what is due, never
	// with the table.
	FindDue(ctx context.Context, p FindDueParams) (FindDueResult, error)
	Rescue(ctx context.Context, p RescueParams) (StepRecord, error)
	GiveUp(ctx context.Context, p GiveUpParams) (StepRecord, error)
	// Wait extends a due, held lease without counting a failure (sas.Wait).
	Wait(ctx context.Context, p WaitParams) (StepRecord, error)
	// Start records the pick-up of a held attempt's request (sas.Start).
	Start(ctx context.Context, p StartParams) (StepRecord, error)
	// Heartbeat moves a waiting callback step's deadline on (sas.Heartbeat).
	Heartbeat(ctx context.Context, p HeartbeatParams) (StepRecord, error)
	Resubmit(ctx context.Context, p ResubmitParams) (StepRecord, error)
	// NoteEffect sets UndoOwed on a forward step that is not Processed
	// (see sas.NoteEffect); a step already noted is returned unchanged.
	NoteEffect(ctx context.Context, p NoteEffectParams) (StepRecord, error)
	// GetStep reads one step record (a consistent read).
	GetStep(ctx context.Context, k StepKey) (StepRecord, error)
	GetOrder(ctx context.Context, orderID string) (OrderView, error)
	ListByState(ctx context.Context, p ListByStateParams) (ListByStateResult, error)

	OwedStore       // a give-up's owed effects (owed.go)
	DefinitionStore // the workflow definitions orders run on (versions.go)
	CancelStore     // an order's cancellation (cancel.go)
	ScheduleStore   // the schedules' runs (schedule.go)
}

// SubmitParams creates an order. PickupBy is when a scheduler must have
// claimed the first step; Claim, when set, creates the first step already
// claimed by Claim.Owner until Claim.CompleteBy (its Key/Attempt/Now are
// filled in by the store).
type SubmitParams struct {
	Order    Order
	Now      time.Time
	PickupBy time.Time
	Claim    *ClaimParams
	// Skip are the first steps, settled at submission without running
	// (their conditions: skip.go); Claim then takes the step after them.
	Skip []Skip
	// Run, for a schedule's run, records it in the schedule's state in
	// the same write (schedule.go).
	Run *RunClaim
}

// SubmitResult reports whether this call created the order.
type SubmitResult struct {
	Created bool
	View    OrderView
}

// FindDueParams asks for up to Limit due records per index shard.
type FindDueParams struct {
	State ProcessState // Processing, Pending or Compensating
	Now   time.Time
	Limit int // 0: DefaultPageLimit
}

// DefaultPageLimit is the Limit of FindDueParams and ListByStateParams
// when none is given.
const DefaultPageLimit = 100

// WithDefaults returns p with the default Limit filled in, or a
// *ValidationError for a state whose records are never due. Stores check
// their parameters with it.
func (p FindDueParams) WithDefaults() (FindDueParams, error) {
	switch p.State {
	case Pending, Processing, Compensating:
	default:
		return p, &ValidationError{Field: "state", Reason: fmt.Sprintf("%s records are never due", p.State)}
	}
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	return p, nil
}

// ReadStats is what a query cost: requests sent and items the store read.
type ReadStats struct {
	Requests  int
	ItemsRead int
}

// FindDueResult holds due records as the index projects them, oldest
// deadline first: no History, FailedBy, Refused, UndoOwed or Generation (a
// caller that needs them reads the record). ListByState's records too.
type FindDueResult struct {
	Records []StepRecord
	Stats   ReadStats
}

// ListByStateParams pages through the records in one state. Processed and
// Compensated records are not indexed (the index holds only what is in flight
// or needs an operator); asking for them is ErrInvalid.
type ListByStateParams struct {
	State  ProcessState
	Limit  int    // per index shard; 0: DefaultPageLimit
	Cursor string // from the previous page; "" for the first
}

// WithDefaults returns p with the default Limit filled in, or a
// *ValidationError for a state that is not indexed (see Listable). Stores
// check their parameters with it.
func (p ListByStateParams) WithDefaults() (ListByStateParams, error) {
	if !Listable(p.State) {
		return p, &ValidationError{Field: "state", Reason: fmt.Sprintf("%s records are not indexed; list Pending, Processing, Error, Compensating or CompensationFailed", p.State)}
	}
	if p.Limit <= 0 {
		p.Limit = DefaultPageLimit
	}
	return p, nil
}

// ListByStateResult is one page, oldest first.
type ListByStateResult struct {
	Records    []StepRecord
	NextCursor string // "" when there is no more
	Stats      ReadStats
}

// Listable reports whether ListByState can list a state.
func Listable(s ProcessState) bool {
	switch s {
	case Pending, Processing, Error, Compensating, CompensationFailed:
		return true
	}
	return false
}

// Queue is a message queue (SQS). Bodies are this package's JSON envelopes.
type Queue interface {
	// Send sends messages, batching where it pays. Entries that failed are
	// reported in the result; err is for a failure of the whole call.
	Send(ctx context.Context, p SendParams) (SendResult, error)
	Receive(ctx context.Context, p ReceiveParams) ([]InboundMessage, error)
	// Delete deletes messages by receipt handle, batching where it pays.
	Delete(ctx context.Context, p DeleteParams) (DeleteResult, error)
	ChangeVisibility(ctx context.Context, p ChangeVisibilityParams) error
}

// DepthReader reads how many messages a queue holds (SQS's approximate
// counts). The supervisor reads it to tell a step whose request may still
// be waiting from one whose agent died (docs/protocol.md, "Waiting is not
// executing").
type DepthReader interface {
	Depth(ctx context.Context, queueURL string) (QueueDepth, error)
}

// QueueDepth is a queue's message counts.
type QueueDepth struct {
	Visible  int // waiting to be received
	InFlight int // received, not yet deleted
	Delayed  int // sent with a delay that has not ended
}

// Total is every message the queue holds.
func (d QueueDepth) Total() int { return d.Visible + d.InFlight + d.Delayed }

// Backlog is what the queue holds that may be waiting its turn: visible and
// in-flight messages. A delayed one is a next attempt waiting out its retry
// interval (docs/protocol.md, "A failure is not a wait"), or a retry.
func (d QueueDepth) Backlog() int { return d.Visible + d.InFlight }

// OutboundMessage is one message to send. ID identifies it within one Send.
type OutboundMessage struct {
	ID    string
	Body  string
	Delay time.Duration // at most 15 minutes (SQS)
}

type SendParams struct {
	QueueURL string
	Messages []OutboundMessage
}

// SendFailure is one message that was not sent.
type SendFailure struct {
	ID          string
	Code        string
	Message     string
	SenderFault bool // retrying the same message will not help
}

type SendResult struct {
	Failed   []SendFailure
	Requests int // SQS requests the send took
}

type ReceiveParams struct {
	QueueURL   string
	Max        int           // 1..10
	Wait       time.Duration // long polling, at most 20s
	Visibility time.Duration // 0: the queue's default
}

// InboundMessage is a received message. ReceiveCount comes from the emulator
// or SQS and is not trustworthy on every emulator (docs/pattern.md §7): informational.
type InboundMessage struct {
	MessageID    string
	Receipt      string
	Body         string
	ReceiveCount int
	SentAt       time.Time
	// SenderID is SQS's SenderId: who sent it (a role's unique id and
	// session, an account, or an emulator's word); "" when unknown. A
	// message moved to a dead-letter queue keeps its original sender's.
	SenderID string
}

type DeleteParams struct {
	QueueURL string
	Receipts []string
}

type DeleteResult struct {
	Failed   []SendFailure // ID is the receipt handle
	Requests int
}

type ChangeVisibilityParams struct {
	QueueURL string
	Receipt  string
	Timeout  time.Duration
}

// CreateQueueParams describes a queue that tests, the local runs and the
// dev server create (the deployed queues come from the construct). The SQS
// adapter and the in-memory queue both take it; each says which attributes
// it knows.
type CreateQueueParams struct {
	Name string
	// Attributes are SQS queue attributes by their API names, e.g.
	// "VisibilityTimeout": "30".
	Attributes map[string]string
	// MaxReceiveCount > 0 also creates a dead-letter queue, named Name with
	// "-dlq" (before any ".fifo"), and a redrive policy that moves a message
	// there once it has been received this many times without being deleted.
	MaxReceiveCount int
}

// CreatedQueue is what CreateQueue made.
type CreatedQueue struct {
	URL    string
	DLQURL string // "" without a dead-letter queue
}
