package sas

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Steps the outside world completes (docs/protocol.md, "Callback steps").
// A callback step without an agent: when it is claimed the scheduler sends
// no request, it hands out a token instead (in a waiting status to the
// submitter and an alert-like notification for people), and the step waits,
// its lease's deadline in the deadline index, until a completion with that
// token arrives or the supervisor gives it up at its timeout. A callback
// step with an agent (AgentToken) sends its agent the token in the request
// instead, and waits the same way.

// MaxCallbackTimeout is the longest a callback step may wait for its
// completion (a year, as Lambda durable functions allow).
const MaxCallbackTimeout = 365 * 24 * time.Hour

// Callback makes a step wait for a completion from outside (StepDef.Callback).
type Callback struct {
	// Timeout is how long the step waits for its completion, from its
	// claim: past it the supervisor gives the step up (Error, alert, the
	// order compensated). At most MaxCallbackTimeout.
	Timeout time.Duration
	// Heartbeat, when set, is how long the step may go without a
	// completion or a heartbeat: a missed heartbeat gives it up as the
	// timeout does. Zero: no heartbeat is required.
	Heartbeat time.Duration
}

// Lease is how long a claim of the step holds it before the supervisor
// looks: the heartbeat interval when one is required, else the timeout.
func (c Callback) Lease() time.Duration {
	if c.Heartbeat > 0 && c.Heartbeat < c.Timeout {
		return c.Heartbeat
	}
	return c.Timeout
}

func (c Callback) check() error {
	switch {
	case c.Timeout <= 0 || c.Timeout > MaxCallbackTimeout:
		return fmt.Errorf("callback timeout %s: want more than 0 and at most %s", c.Timeout, MaxCallbackTimeout)
	case c.Heartbeat < 0 || c.Heartbeat > c.Timeout:
		return fmt.Errorf("callback heartbeat %s: want 0 (none) or at most the timeout %s", c.Heartbeat, c.Timeout)
	}
	return nil
}

// checkCallback holds a callback step to its shape: a name and a timeout
// within MaxCallbackTimeout. Without an agent it has no action or undo
// (nothing runs it, so nothing undoes it). With one (an agent-issued token:
// AgentToken) the agent's call must fit in the wait.
func (s StepDef) checkCallback() error {
	switch {
	case s.Name == "":
		return errors.New("a callback step needs a name")
	case s.Agent == "" && (s.Action != "" || s.Undo != ""):
		return errors.New("a callback step without an agent has no action or undo: nothing would run them")
	case s.Agent != "" && s.Callback != nil && s.Timeout > s.Callback.Timeout:
		return fmt.Errorf("the agent's call (timeout %s) must fit in the callback's wait (%s), which counts from the step's start", s.Timeout, s.Callback.Timeout)
	}
	return s.Callback.check()
}

// Outside reports whether the step is completed from outside: a callback
// step, with or without an agent.
func (s StepDef) Outside() bool { return s.Callback != nil }

// AgentToken reports whether the step is a callback step whose agent
// starts the work and hands its token on (Step Functions'
// .waitForTaskToken with a task; docs/protocol.md, "Agent-issued
// tokens"): its request carries the token, the agent's done answer does
// not complete it, a completion does.
func (s StepDef) AgentToken() bool { return s.Callback != nil && s.Agent != "" }

// ErrBadToken is a completion token that does not decode or whose
// signature does not match: guessed, forged, or cut.
var ErrBadToken = errors.New("completion token not valid")

// tokenPurpose labels a token's MAC (Signer.SignBytes): no other signed
// thing shares it.
const tokenPurpose = "callback token"

// Token is what a completion token binds: one attempt of one step of one
// order, at the step's generation, held by Holder since IssuedAt. It
// completes that attempt and no other (docs/trust.md, "Completion tokens").
type Token struct {
	OrderID    string    `json:"o"`
	Step       int       `json:"s"`
	Attempt    int       `json:"a"`
	Generation int       `json:"g,omitempty"`
	Holder     string    `json:"h"`
	IssuedAt   time.Time `json:"t"`
}

// MintToken returns the token of t: its fields, base64url JSON, a "~" and
// the signer's MAC of them (the current key's, "v2.<key id>.<mac>"). The
// same fields always give the same token with the same key, so a re-sent
// waiting status carries the same token.
func (s *Signer) MintToken(t Token) string {
	t.IssuedAt = t.IssuedAt.UTC().Truncate(time.Millisecond)
	b, _ := json.Marshal(t) // strings, numbers and a time: cannot fail
	return base64.RawURLEncoding.EncodeToString(b) + "~" + s.SignBytes(tokenPurpose, b)
}

// MaxTokenBytes bounds a token: a longer one is refused unread.
const MaxTokenBytes = 1024

// OpenToken checks a token's MAC against every key the signer holds and
// returns what it binds; ErrBadToken when it is malformed or forged.
func (s *Signer) OpenToken(tok string) (Token, error) {
	if len(tok) > MaxTokenBytes {
		return Token{}, fmt.Errorf("%w: %d bytes, over %d", ErrBadToken, len(tok), MaxTokenBytes)
	}
	body, sig, ok := strings.Cut(tok, "~")
	if !ok {
		return Token{}, fmt.Errorf("%w: no signature", ErrBadToken)
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	if err := s.VerifyBytes(tokenPurpose, b, sig); err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	var t Token
	if err := json.Unmarshal(b, &t); err != nil || !ValidOrderID(t.OrderID) || t.Step < 0 || t.Attempt < 1 || t.Holder == "" {
		return Token{}, fmt.Errorf("%w: signed but incomplete", ErrBadToken)
	}
	return t, nil
}

// KindComplete is the outside world completing, failing or heartbeating a
// waiting step (intake or control queue).
const KindComplete Kind = "complete"

// Completion outcomes besides OutcomeDone and OutcomeFailed.
const (
	// OutcomeHeartbeat: the work goes on; the step's heartbeat deadline
	// moves on (never past its timeout).
	OutcomeHeartbeat Outcome = "heartbeat"
)

// Completion is a completion of a waiting step from outside: the token names
// the step, the outcome says what became of it. Result and Reason are as a
// reply's; Rejected, on a failure, makes it a business rejection (the
// order ends Rejected, nobody is paged) rather than a give-up.
type Completion struct {
	V    int  `json:"v"`
	Kind Kind `json:"kind"`
	// Token names the step, and is the completer's right to complete it.
	Token string `json:"token,omitempty"`
	// Step names the step instead, without a token: an operator's
	// completion (sasctl, the console's approvals), believed from the
	// control queue alone, whose policy admits the operators and the
	// supervisor (docs/trust.md, "Completion tokens").
	Step     *WaitingStep    `json:"step,omitempty"`
	Outcome  Outcome         `json:"outcome"`
	Result   json.RawMessage `json:"result,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Rejected bool            `json:"rejected,omitempty"`
	// Actor is who the sender says it is, recorded beside the queue's
	// word for the sender (docs/trust.md).
	Actor string `json:"actor,omitempty"`
	// Trace is the completer's trace context, if it has one (a W3C
	// traceparent): logged only; what the completion makes follows the
	// order's trace.
	Trace string `json:"trace,omitempty"`
}

// Check rejects a completion no step could take, with a readable reason.
func (c Completion) Check() error {
	switch {
	case c.Token == "" && c.Step == nil:
		return &ValidationError{Field: "token", Reason: "required: the token the waiting status handed out (or, from the control queue, the step)"}
	case c.Token != "" && c.Step != nil:
		return &ValidationError{Field: "step", Reason: "a completion names its step by its token or by step, not both"}
	case c.Step != nil && !c.Step.valid():
		return &ValidationError{Field: "step", Reason: "wants orderId, step, attempt (1 or more) and holder, the waiting attempt's lease"}
	case c.Outcome != OutcomeDone && c.Outcome != OutcomeFailed && c.Outcome != OutcomeHeartbeat:
		return &ValidationError{Field: "outcome", Reason: fmt.Sprintf("%q is none of %q, %q, %q", c.Outcome, OutcomeDone, OutcomeFailed, OutcomeHeartbeat)}
	case c.Outcome != OutcomeDone && len(c.Result) > 0:
		return &ValidationError{Field: "result", Reason: "only a done completion carries a result"}
	case len(c.Result) > 0 && !json.Valid(c.Result):
		return &ValidationError{Field: "result", Reason: "not JSON"}
	case len(c.Result) > MaxResultBytes:
		return &ValidationError{Field: "result", Reason: fmt.Sprintf("%d bytes, over %d", len(c.Result), MaxResultBytes)}
	case c.Rejected && c.Outcome != OutcomeFailed:
		return &ValidationError{Field: "rejected", Reason: "only a failure is a rejection"}
	}
	return nil
}

// WaitingStep names one waiting attempt of a callback step as the state
// store shows it (an operator's completion, Completion.Step): the fields a
// token binds, read from the step's record instead of signed. It completes
// that attempt and no other, as a token does.
type WaitingStep struct {
	OrderID    string `json:"orderId"`
	Step       int    `json:"step"`
	Attempt    int    `json:"attempt"`
	Generation int    `json:"generation,omitempty"`
	Holder     string `json:"holder"`
}

func (w WaitingStep) valid() bool {
	return ValidOrderID(w.OrderID) && w.Step >= 0 && w.Attempt >= 1 && w.Holder != "" && w.Generation >= 0
}

// WaitingStepOf names the waiting attempt a step's record shows.
func WaitingStepOf(r StepRecord) WaitingStep {
	return WaitingStep{OrderID: r.OrderID, Step: r.Step, Attempt: r.Attempt, Generation: r.Generation, Holder: r.LockedBy}
}

// Token is what w binds, as a token would (IssuedAt aside, which the
// step's record gives).
func (w WaitingStep) Token() Token {
	return Token{OrderID: w.OrderID, Step: w.Step, Attempt: w.Attempt, Generation: w.Generation, Holder: w.Holder}
}

// StatusWaiting: a callback step waits for its completion; the status
// carries its token.
const StatusWaiting = "waiting"

// HeartbeatParams moves a waiting step's deadline on: the holder's write,
// fenced on state, holder and attempt like a completion.
type HeartbeatParams struct {
	Key     StepKey
	Owner   string
	Attempt int
	Now     time.Time
	Until   time.Time // the new deadline: after Now
	// Seen, when set, fences the write on the deadline being Seen instead
	// of on Until being later: a wait step's arming (its due time, taken
	// from the order, may come before the claim's lease), written once
	// from the lease its holder read.
	Seen time.Time
}

// Check rejects parameters no record could take (ErrInvalid).
func (p HeartbeatParams) Check() error {
	if !p.Until.After(p.Now) {
		return &ValidationError{Field: "until", Reason: "the new deadline must be after now"}
	}
	return nil
}

// Heartbeat extends a held Processing step's lease to Until. No history
// entry: a long wait with many heartbeats does not grow the record. It
// moves the deadline only later: a heartbeat whose Until is not after the
// deadline the record has (the same heartbeat written again, or an older
// one whose write comes after a newer one's) loses the race, so a deadline
// never moves back (the simulator's "unfenced write": docs/simulation.md).
func Heartbeat(r StepRecord, p HeartbeatParams) (StepRecord, error) {
	if err := p.Check(); err != nil {
		return r, err
	}
	// Compared as stored: a store keeps times to the millisecond.
	// A record with no lease (a running fan-out step: its elements hold
	// the deadlines) compares false, as a missing attribute does.
	fenced := !r.CompleteBy.IsZero() && p.Until.Truncate(time.Millisecond).After(r.CompleteBy)
	if !p.Seen.IsZero() {
		fenced = r.CompleteBy.Equal(p.Seen.Truncate(time.Millisecond))
	}
	if !heldBy(r, Processing, p.Owner, p.Attempt) || !fenced {
		return r, race("heartbeat", r)
	}
	r.CompleteBy, r.DueAt, r.UpdatedAt = p.Until, p.Until, p.Now
	return r, nil
}

// PeekToken reads what a token says it binds without checking its MAC:
// for a tool that has no key and wants to say which step a token names
// (sasctl). Never a ground for a decision: only OpenToken is.
func PeekToken(tok string) (Token, error) {
	body, _, ok := strings.Cut(tok, "~")
	if !ok || len(tok) > MaxTokenBytes {
		return Token{}, fmt.Errorf("%w: not a token", ErrBadToken)
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	var t Token
	if err := json.Unmarshal(b, &t); err != nil || !ValidOrderID(t.OrderID) {
		return Token{}, fmt.Errorf("%w: not a token", ErrBadToken)
	}
	return t, nil
}

// ClaimedAt is when the record's current attempt was claimed (its
// history's entry of that claim): when a callback step began to wait.
// Zero when the history does not say.
func (r StepRecord) ClaimedAt() time.Time {
	for i := len(r.History) - 1; i >= 0; i-- {
		h := r.History[i]
		if h.Attempt == r.Attempt && h.To == Processing && h.From != Processing {
			return h.At
		}
	}
	return time.Time{}
}
