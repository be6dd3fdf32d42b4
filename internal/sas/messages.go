package sas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sizing"
)

// MessageVersion is the version of every message this build writes and the
// only one it accepts. A message without "v" is taken as version 1.
const MessageVersion = 1

// Kind tells the scheduler's queue messages apart.
type Kind string

const (
	KindIntake       Kind = "intake"        // an application's order (intake queue)
	KindAgentRequest Kind = "agent.request" // scheduler → agent
	KindAgentReply   Kind = "agent.reply"   // agent → scheduler
	KindRetry        Kind = "retry"         // supervisor → scheduler: claim and dispatch again
	KindStatus       Kind = "status"        // scheduler → the submitter's replyTo queue
	KindCompensate   Kind = "compensate"    // supervisor or operator → scheduler: undo the order
)

// Header is what every message carries; decode it first to route.
type Header struct {
	V       int    `json:"v"`
	Kind    Kind   `json:"kind,omitempty"`
	OrderID string `json:"orderId"`
}

// Intake is an application's order request (docs/pattern.md §6).
type Intake struct {
	V        int             `json:"v,omitempty"`
	Kind     Kind            `json:"kind,omitempty"`
	OrderID  string          `json:"orderId"`
	Workflow string          `json:"workflow"`
	Payload  json.RawMessage `json:"payload,omitempty"`
	ReplyTo  string          `json:"replyTo,omitempty"`
	Priority int             `json:"priority,omitempty"`
	// Trace is the submitter's trace context (a W3C traceparent), if it
	// has one: the order's work joins that trace. Without it (or with one
	// that is not valid) the scheduler starts a trace for the order.
	Trace string `json:"trace,omitempty"`
	// StartAt, when set and later than its arrival, is when the order's
	// first step starts (RFC 3339), at most MaxWait ahead: the order is
	// stored at once, its first step unclaimed until then, and it starts
	// never earlier (docs/intake.md, "Starting later"). A time already
	// past starts it at once. Not part of the order's content: a
	// redelivered intake with another startAt is the same order.
	StartAt *time.Time `json:"startAt,omitempty"`
	// Schedule and ScheduledAt make the order a run of a schedule of the
	// deployment, scheduled for that time (RFC 3339): the order id is
	// then RunOrderID's, given or left out (schedule.go,
	// docs/schedules.md).
	Schedule    string `json:"schedule,omitempty"`
	ScheduledAt string `json:"scheduledAt,omitempty"`
}

// AgentRequest asks an agent to run one attempt of one step.
//
// Workflow and ReplyTo (with Payload and Compensation) describe the order the
// step belongs to. The agent does not need them to make its call; it echoes
// them in its AgentReply so that the scheduler can advance the order without
// reading it (see AgentReply). They are optional on the wire: a request from
// an older scheduler omits them.
type AgentRequest struct {
	V              int             `json:"v"`
	Kind           Kind            `json:"kind"`
	OrderID        string          `json:"orderId"`
	Step           int             `json:"step"`
	StepName       string          `json:"stepName"`
	Agent          string          `json:"agent"`
	Attempt        int             `json:"attempt"`
	LockedBy       string          `json:"lockedBy"`
	CompleteBy     time.Time       `json:"completeBy"`
	IdempotencyKey string          `json:"idempotencyKey"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Compensation   bool            `json:"compensation,omitempty"`
	Workflow       string          `json:"workflow,omitempty"` // the order's workflow, echoed in the reply
	ReplyTo        string          `json:"replyTo,omitempty"`  // the submitter's status queue, echoed in the reply
	// TimeoutMs is the step's execution limit for one attempt, in
	// milliseconds: the agent gives itself this long from the moment it
	// starts the request, however long the request waited in its queue
	// (docs/protocol.md, "Agent"). 0 (a request from an older scheduler):
	// CompleteBy is the agent's deadline.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Action is what this request asks of the agent: the step's Action, or
	// its Undo when Compensation is set, taken from the definition the
	// order runs on (its Version). An agent that serves steps by name may
	// ignore it; the built-in HTTP agent calls it. Empty from an older
	// scheduler: the agent then finds the call by StepName.
	Action string `json:"action,omitempty"`
	// Priority is the order's priority (0–9, higher first), echoed in the
	// reply so that the next step goes to the same lane
	// (docs/agents.md, "Priority lanes").
	Priority int `json:"priority,omitempty"`
	// Tries is how many times the agent may try the call within this
	// attempt (the step's retry.attempts); 0: the agent's default.
	Tries int `json:"tries,omitempty"`
	// TransientOutcome says the scheduler takes a transient outcome
	// (OutcomeTransient): an agent that ran the request and could not get an
	// answer replies so instead of leaving the request for redelivery.
	// Absent (an older scheduler): the agent keeps the older behaviour.
	TransientOutcome bool `json:"transientOutcome,omitempty"`
	// StartedOutcome says the scheduler takes a started report
	// (OutcomeStarted): an agent that picks the request up later than
	// CompleteBy less TimeoutMs, or on a redelivery, reports the pick-up
	// before it runs the request. Absent (an older scheduler): the agent
	// reports nothing.
	StartedOutcome bool `json:"startedOutcome,omitempty"`
	// NonRetryable names the errors (agent.Named in the SDK; "Timeout",
	// "CircuitOpen" for the agent's own) that end the step at once as a
	// permanent failure: the step's retry policy's non-retryable errors.
	NonRetryable []string `json:"nonRetryable,omitempty"`
	// Version identifies the workflow definition the order runs on
	// (docs/workflows.md, "Versions"), echoed in the reply.
	Version string `json:"version,omitempty"`
	// Generation is the step's generation (part of IdempotencyKey), echoed
	// in the reply: a success under an older generation than the step's is
	// an effect beside the step's own (docs/protocol.md, "Idempotency keys").
	Generation int `json:"generation,omitempty"`
	// PriorKeys, on an undo of a step an operator resubmitted, are the undo
	// keys of its earlier generations: the agent undoes each before
	// IdempotencyKey, since an effect under an older key may exist.
	PriorKeys []string `json:"priorKeys,omitempty"`
	// Results are the results of the steps this step follows, by step
	// name (and, on an undo, its own step's): what they returned, as
	// recorded on their records (docs/protocol.md, "Results"). Absent when
	// none returned anything, and from an older scheduler. Not echoed in
	// the reply, and so not signed.
	Results Results `json:"results,omitempty"`
	// Item, on a request for an element of a fan-out (Step an ElementStep
	// key), is that element of the step's list, as JSON (fanout.go);
	// absent on every other request. Not echoed in the reply: the reply's
	// step names the element.
	Item json.RawMessage `json:"item,omitempty"`
	// Token, on the request of an agent-token step (StepDef.AgentToken),
	// is the step's completion token: the agent hands it to the outside
	// world, whose completion with it completes the step (docs/protocol.md,
	// "Agent-issued tokens"). Not echoed, and so not signed.
	Token string `json:"token,omitempty"`
	// Trace is the order's trace context, a W3C traceparent (trace.go):
	// optional, absent in a message from a build before traces.
	Trace string `json:"trace,omitempty"`
	// Sig is the scheduler's signature over the fields the reply echoes
	// (Signer, docs/trust.md). The agent echoes it in its reply unread.
	// Optional on the wire: a request from an older scheduler has none.
	Sig string `json:"sig,omitempty"`
}

// HighPriority is the lowest priority that goes to an agent's priority lane
// when the agent has one (docs/agents.md, "Priority lanes").
const HighPriority = 5

// Outcome is what an agent reports.
type Outcome string

const (
	OutcomeDone   Outcome = "done"
	OutcomeFailed Outcome = "failed" // permanent: retrying cannot help
	// OutcomeTransient: the agent ran the request and it failed in a way a
	// later attempt may not (every try failed transiently, its breaker
	// refused them, or the step's timeout passed). The scheduler counts a
	// failure of the attempt and tries again after the step's retry
	// policy's interval, or gives the step up after its last attempt
	// (docs/protocol.md, "A failure is not a wait"). Only sent for a
	// request with TransientOutcome.
	OutcomeTransient Outcome = "transient"
	// OutcomeStarted is not an outcome but a report: the agent picked the
	// request up too late to finish by its CompleteBy (it waited in the
	// queue), or on a redelivery, and runs it now. The scheduler records
	// the pick-up and moves the attempt's deadline to now plus the step's
	// timeout (docs/protocol.md, "Deadlines start at pick-up"). The
	// request's message is not acknowledged by it: the attempt's outcome
	// follows in another reply. Only sent for a request with
	// StartedOutcome.
	OutcomeStarted Outcome = "started"
)

// Error names an agent reports for its own transient outcomes, which a
// retry policy's non-retryable errors may list.
const (
	ErrorTimeout     = "Timeout"     // the step's timeout passed before an answer
	ErrorCircuitOpen = "CircuitOpen" // an open circuit breaker refused the tries
)

// AgentReply is an agent's answer for one attempt.
//
// OrderID, Step, Attempt and LockedBy are the fence: the scheduler's write is
// conditional on the step's state, holder and attempt, so a late, duplicate or
// stale reply loses cleanly there.
//
// Workflow, ReplyTo, Payload, Compensation and StepName are echoed verbatim
// from the request so that the scheduler needs no read of the order on the hot
// path: with them it knows the next step (from its workflow registry), what to
// send it, where to post statuses and whether the reply ends an undo. They are
// routing hints, never trusted for fencing: every write the scheduler makes on
// a reply is still conditional on (state, lockedBy, attempt), and a write that
// loses sends the scheduler back to reading the order. A reply without them
// (from an older agent) is handled by reading the order, as before.
type AgentReply struct {
	V            int             `json:"v"`
	Kind         Kind            `json:"kind"`
	OrderID      string          `json:"orderId"`
	Step         int             `json:"step"`
	Attempt      int             `json:"attempt"`
	LockedBy     string          `json:"lockedBy"`
	Outcome      Outcome         `json:"outcome"`
	Result       json.RawMessage `json:"result,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	Agent        string          `json:"agent,omitempty"`
	Workflow     string          `json:"workflow,omitempty"`
	ReplyTo      string          `json:"replyTo,omitempty"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	Compensation bool            `json:"compensation,omitempty"`
	StepName     string          `json:"stepName,omitempty"`
	Priority     int             `json:"priority,omitempty"`
	Version      string          `json:"version,omitempty"`
	Generation   int             `json:"generation,omitempty"`
	// ErrorType names the error of a transient outcome (an agent.Named
	// error's name, ErrorTimeout, ErrorCircuitOpen), for the record and the
	// logs. Optional.
	ErrorType string `json:"errorType,omitempty"`
	// RetryAfterMs, on a transient outcome, is the wait the remote service
	// asked for (Retry-After): the next attempt waits at least that long.
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
	// Rejected, on a failed outcome of a forward step, says the failure is
	// a business rejection (agent.Reject): the order is compensated and
	// ends Rejected, and no operator is alerted. Absent from an older
	// agent; an older scheduler reads the reply as any failure.
	Rejected bool `json:"rejected,omitempty"`
	// QueuedMs and RanMs are what the agent measured of this run: from when
	// the request was sent (SQS's SentTimestamp) to the start of the run,
	// and the run itself. Informational only (the scheduler records them
	// for the console, timing.go): not signed, never read by a decision.
	// Absent from an older agent, and QueuedMs when the delivery did not
	// say when it was sent; a value that is not a non-negative integer
	// reads as absent.
	QueuedMs Millis `json:"queuedMs,omitzero"`
	RanMs    Millis `json:"ranMs,omitzero"`
	// Trace is the order's trace context, a W3C traceparent (trace.go):
	// optional, absent in a message from a build before traces.
	Trace string `json:"trace,omitempty"`
	// Sig is the request's signature, echoed unread. With it the scheduler
	// believes the echo; without it (an older agent), or with one that does
	// not match, the echo is never used (docs/trust.md).
	Sig string `json:"sig,omitempty"`
}

// Retry is the supervisor handing a step back to the schedulers.
type Retry struct {
	V       int    `json:"v"`
	Kind    Kind   `json:"kind"`
	OrderID string `json:"orderId"`
	Step    int    `json:"step"`
	Attempt int    `json:"attempt"` // the attempt a claim must see
	Reason  string `json:"reason,omitempty"`
	// Requeue marks a retry from an agent that gave up on a request without
	// an outcome after its last delivery: Attempt is the attempt of that
	// request, and the scheduler sends the request again if that attempt is
	// still the step's current, held one, whatever its deadline
	// (docs/protocol.md, "Deadlines start at pick-up"). The request is then
	// back in the queue, where the supervisor sees it.
	Requeue bool `json:"requeue,omitempty"`
	// Trace is the order's trace context, a W3C traceparent (trace.go):
	// optional, absent in a message from a build before traces.
	Trace string `json:"trace,omitempty"`
	// Sig is the signature of the request a requeue hands back, echoed
	// unread: the scheduler takes a requeue only with it (docs/trust.md).
	Sig string `json:"sig,omitempty"`
}

// Compensate asks the scheduler to undo an order's completed steps, newest
// first (the supervisor gave up on a step, or an operator asked).
type Compensate struct {
	V       int    `json:"v"`
	Kind    Kind   `json:"kind"`
	OrderID string `json:"orderId"`
	Reason  string `json:"reason,omitempty"`
	// Actor is who the sender says it is. Only logged beside the actor the
	// scheduler records, which it takes from who sent the message
	// (docs/trust.md).
	Actor string `json:"actor,omitempty"`
	// Trace is the order's trace context, a W3C traceparent (trace.go):
	// optional, absent in a message from a build before traces.
	Trace string `json:"trace,omitempty"`
	// GivenUp names the give-up a supervisor's compensate is owed for.
	// Such a compensate is automatic: it undoes only while the order still
	// calls for it (docs/protocol.md, "A resubmit against a compensation"),
	// so a redelivery after the step was resubmitted and completed undoes
	// nothing. Absent (an operator's, or an older supervisor's): explicit.
	GivenUp *GivenUp `json:"givenUp,omitempty"`
}

// GivenUp is the step and attempt a give-up left in Error.
type GivenUp struct {
	Step    int `json:"step"`
	Attempt int `json:"attempt"`
}

// Status values posted to a submitter's replyTo queue.
const (
	StatusReceived = "received"
	// StatusRejected: the intake message was refused (no step), or, with
	// the step that refused it, the order was rejected as a business
	// outcome and what took effect is undone.
	StatusRejected    = "rejected"
	StatusStepDone    = "step-done"
	StatusProcessed   = "processed"
	StatusFailed      = "failed"
	StatusCompensated = "compensated"
	// StatusStepSkipped: a step's condition was false, so it was not run
	// (docs/workflows.md, "Choices"); the reason names the condition.
	StatusStepSkipped = "step-skipped"
)

// Status tells the submitter how its order is doing (docs/pattern.md §6, §4.9).
type Status struct {
	V        int       `json:"v"`
	Kind     Kind      `json:"kind"`
	OrderID  string    `json:"orderId"`
	Status   string    `json:"status"`
	Step     string    `json:"step,omitempty"`
	Sequence int64     `json:"seq"`
	At       time.Time `json:"at"`
	Reason   string    `json:"reason,omitempty"`
	// MessageID is the SQS message id of the intake message a rejection is
	// about, so that a caller can match a rejection whose orderId could not
	// be read to what it sent.
	MessageID string `json:"messageId,omitempty"`
	// Results, on a processed status, are what the order's steps returned,
	// by step name (docs/intake.md, "Statuses").
	Results Results `json:"results,omitempty"`
	// Trace is the order's trace context, a W3C traceparent (trace.go):
	// optional, absent in a message from a build before traces.
	Trace string `json:"trace,omitempty"`
	// Token, on a waiting status, is the completion token of the callback
	// step that waits (callback.go): whoever holds it may complete, fail or
	// heartbeat that step.
	Token string `json:"token,omitempty"`
}

// IdempotencyKey is the stable key an agent sends the remote service for one
// order step: the same on every retry, redelivery and attempt of the step,
// "<order>:<step>", with ":g<generation>" after an operator resubmitted a
// refused step (a new generation, so a stored refusal is not replayed) and
// ":undo" for its undo (docs/protocol.md, "Idempotency keys").
//
// An element of a fan-out (step an ElementStep key) has its step's key and
// ":i<index>": "<order>:<step>:i<index>", then its generation and ":undo"
// as a step's.
func IdempotencyKey(orderID string, step, generation int, compensation bool) string {
	k := fmt.Sprintf("%s:%d", orderID, step)
	if IsElement(step) {
		s, i := ElementOf(step)
		k = fmt.Sprintf("%s:%d:i%d", orderID, s, i)
	}
	if generation > 0 {
		k += fmt.Sprintf(":g%d", generation)
	}
	if compensation {
		k += ":undo"
	}
	return k
}

var orderIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// ValidOrderID reports whether id is a legal order id (docs/pattern.md §6).
func ValidOrderID(id string) bool { return orderIDPattern.MatchString(id) }

// Intake limits. Every later message about an order carries at most these
// from the submitter, so their sum with the pipeline's own fields bounds the
// size of every message (internal/sqslimits checks the sum; docs/protocol.md,
// "Sizes").
const (
	// MaxPayloadBytes bounds the payload as it appears in the intake message.
	// Messages carry it compacted and unescaped, never larger.
	MaxPayloadBytes = sizing.MaxPayloadBytes
	// MaxReplyToBytes bounds the replyTo URL, which the allow-list may match
	// by prefix. An SQS queue URL is under 200 bytes.
	MaxReplyToBytes = 1 << 10
)

// IntakeRules are what ParseIntake checks beyond the shape of the message.
type IntakeRules struct {
	Workflows      func(name string) bool // registered workflow names
	ReplyToAllowed func(url string) bool  // queues the deployment allows
	MaxPayload     int                    // bytes; default and ceiling MaxPayloadBytes
}

// ParseIntake decodes and validates an intake message. On error it returns
// what it could read (so a rejection can still be told to a valid replyTo)
// and a *ValidationError whose reason an operator can read.
func ParseIntake(body []byte, rules IntakeRules) (Intake, error) {
	var in Intake
	if rules.MaxPayload <= 0 || rules.MaxPayload > MaxPayloadBytes {
		rules.MaxPayload = MaxPayloadBytes // more would not fit the messages that carry it
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		// Salvage the routing fields for the rejection notice, and name the
		// field the problem is in.
		loose, fieldAt := salvage(body)
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se) && fieldAt(se.Offset) != "":
			return loose, &ValidationError{Field: fieldAt(se.Offset), Reason: jsonReason(err)}
		case errors.As(err, &te) && te.Field != "":
			return loose, &ValidationError{Field: te.Field, Reason: jsonReason(err)}
		}
		return loose, &ValidationError{Reason: "malformed intake message: " + jsonReason(err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return in, &ValidationError{Reason: "malformed intake message: trailing data after the JSON object"}
	}
	switch {
	case in.V != 0 && in.V != MessageVersion:
		return in, &ValidationError{Field: "v", Reason: fmt.Sprintf("unsupported message version %d (this deployment reads %d)", in.V, MessageVersion)}
	case in.Kind != "" && in.Kind != KindIntake:
		return in, &ValidationError{Field: "kind", Reason: fmt.Sprintf("%q is not an intake message", in.Kind)}
	}
	if err := in.checkRun(); err != nil {
		return in, err
	}
	switch {
	case in.OrderID == "":
		return in, &ValidationError{Field: "orderId", Reason: "required"}
	case !ValidOrderID(in.OrderID):
		return in, &ValidationError{Field: "orderId", Reason: "must be 1-128 characters of A-Z a-z 0-9 . _ : -"}
	case in.Workflow == "":
		return in, &ValidationError{Field: "workflow", Reason: "required"}
	case rules.Workflows != nil && !rules.Workflows(in.Workflow):
		return in, &ValidationError{Field: "workflow", Reason: fmt.Sprintf("%q is not a registered workflow", in.Workflow)}
	case len(in.ReplyTo) > MaxReplyToBytes:
		n := len(in.ReplyTo)
		in.ReplyTo = "" // nobody to tell: a queue URL is never that long
		return in, &ValidationError{Field: "replyTo", Reason: fmt.Sprintf("%d bytes: must be at most %d bytes", n, MaxReplyToBytes)}
	case strings.HasPrefix(in.ReplyTo, "arn:") && !in.replyToFromARN():
		bad := in.ReplyTo
		in.ReplyTo = ""
		return in, &ValidationError{Field: "replyTo", Reason: fmt.Sprintf("%q is not an SQS queue ARN (arn:<partition>:sqs:<region>:<account>:<name>): give the queue's ARN or its URL", bad)}
	case in.ReplyTo != "" && (rules.ReplyToAllowed == nil || !rules.ReplyToAllowed(in.ReplyTo)):
		bad := in.ReplyTo
		in.ReplyTo = "" // never post to a queue the deployment does not allow
		return in, &ValidationError{Field: "replyTo", Reason: fmt.Sprintf("%q is not a queue this deployment may reply to", bad)}
	case in.Priority < 0 || in.Priority > 9:
		return in, &ValidationError{Field: "priority", Reason: "must be between 0 and 9"}
	}
	if len(in.Payload) > 0 {
		if len(in.Payload) > rules.MaxPayload {
			return in, &ValidationError{Field: "payload", Reason: fmt.Sprintf("%d bytes, over the %d-byte limit", len(in.Payload), rules.MaxPayload)}
		}
		trimmed := bytes.TrimSpace(in.Payload)
		if bytes.Equal(trimmed, []byte("null")) {
			in.Payload = nil
		} else if len(trimmed) == 0 || trimmed[0] != '{' {
			return in, &ValidationError{Field: "payload", Reason: "must be a JSON object"}
		}
	}
	in.V, in.Kind = MessageVersion, KindIntake
	return in, nil
}

// replyToFromARN replaces a replyTo given as a queue's ARN, the form the
// deployment's allow-list is written in (docs/deploy.md), with the queue's
// URL, which the allow-list is checked against and statuses are sent to.
func (in *Intake) replyToFromARN() bool {
	url, ok := QueueURLFromARN(in.ReplyTo)
	if ok {
		in.ReplyTo = url
	}
	return ok
}

// ReplyQueueURL is replyTo as statuses are sent to it: a queue's ARN
// becomes its URL (QueueURLFromARN); anything else is kept as it is.
func ReplyQueueURL(replyTo string) string {
	if url, ok := QueueURLFromARN(replyTo); ok {
		return url
	}
	return replyTo
}

// MaxNesting is how deep JSON may nest in a message: Go's decoder refuses
// anything deeper, and so does this deployment.
const MaxNesting = 10000

// salvage reads the top-level string fields of a body that does not decode
// (nested too deeply, a wrong type elsewhere), for the rejection notice, and
// returns which top-level field a byte offset falls in. It walks tokens,
// which have no nesting limit, so a payload too deep to decode still yields
// its message's orderId and replyTo.
func salvage(body []byte) (Intake, func(int64) string) {
	type span struct {
		key        string
		start, end int64
	}
	var in Intake
	var spans []span
	fieldAt := func(off int64) string {
		for _, s := range spans {
			if off > s.start && off <= s.end {
				return s.key
			}
		}
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return in, fieldAt
	}
	for dec.More() {
		kt, err := dec.Token()
		key, ok := kt.(string)
		if err != nil || !ok {
			break
		}
		start := dec.InputOffset()
		t, err := dec.Token()
		for depth := 0; err == nil; {
			if d, ok := t.(json.Delim); ok {
				if d == '{' || d == '[' {
					depth++
				} else {
					depth--
				}
			} else if s, ok := t.(string); ok && depth == 0 {
				switch key {
				case "orderId":
					in.OrderID = s
				case "workflow":
					in.Workflow = s
				case "replyTo":
					in.ReplyTo = s
				}
			}
			if depth == 0 {
				break
			}
			t, err = dec.Token()
		}
		if err != nil {
			spans = append(spans, span{key, start, int64(len(body))})
			break
		}
		spans = append(spans, span{key, start, dec.InputOffset()})
	}
	return in, fieldAt
}

func jsonReason(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se) && strings.Contains(se.Error(), "exceeded max depth"):
		return fmt.Sprintf("nested deeper than %d levels, the most this deployment reads (at byte %d)", MaxNesting, se.Offset)
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON at byte %d", se.Offset)
	case errors.As(err, &te) && te.Field == "":
		// The body itself is not an object (an array, a string, a number):
		// the generic message below would read `field "" must be
		// sas.Intake`, naming a Go type instead of the problem.
		return fmt.Sprintf("the message must be a JSON object, not %s", te.Value)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type, te.Value)
	case errors.Is(err, io.EOF):
		return "empty body"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON: truncated"
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	return err.Error()
}

// DecodeHeader reads the routing fields of any message.
func DecodeHeader(body []byte) (Header, error) {
	var h Header
	if err := json.Unmarshal(body, &h); err != nil {
		return h, &ValidationError{Reason: "malformed message: " + jsonReason(err)}
	}
	if h.V == 0 {
		h.V = MessageVersion
	}
	if h.V != MessageVersion {
		return h, &ValidationError{Field: "v", Reason: fmt.Sprintf("unsupported message version %d", h.V)}
	}
	return h, nil
}

// Encode marshals a message. The message types here cannot fail to encode.
func Encode(m any) string {
	b, err := Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("encoding %T: %v", m, err)) // a programming error, not input
	}
	return string(b)
}

// Marshal is json.Marshal without HTML escaping: '<', '>' and '&' stay one
// byte each instead of six, so a payload accepted at intake keeps its size in
// every message and request body that carries it (docs/protocol.md, "Sizes").
// Raw JSON (payloads, results) is only compacted, never re-escaped.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil // Encoder ends every value with a newline
}
