package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// Callback steps (docs/protocol.md, "Callback steps"): a step with no agent
// that the outside world completes. Its claim is its wait: the lease runs to
// its heartbeat or timeout, its deadline sits in the deadline index, and
// nothing polls. The scheduler hands out the step's token when it would send
// an agent its request (await), and takes a completion with that token as it
// takes an agent's reply (completion): the same fenced write, so a step
// completes at most once.

// Token is the completion token of a claimed callback step's attempt, as
// the scheduler signing with signer hands it out: the test kit answers a
// waiting step with it. The same record always gives the same token, so a
// re-sent waiting status (a redelivered message) carries the token already
// handed out.
func Token(signer *sas.Signer, r sas.StepRecord) string { return signer.MintToken(tokenOf(r)) }

func tokenOf(r sas.StepRecord) sas.Token {
	return sas.Token{OrderID: r.OrderID, Step: r.Step, Attempt: r.Attempt, Generation: r.Generation, Holder: r.LockedBy, IssuedAt: r.ClaimedAt()}
}

// await hands out the token of a claimed callback step: in a waiting status
// to the submitter and in an alert-like notification for people. Both are
// named by the attempt, so a re-send is the same event.
func (s *Service) await(ctx context.Context, u *outbox.Unit, o order, def sas.StepDef, r sas.StepRecord) {
	t := tokenOf(r)
	tok := s.signer.MintToken(t)
	deadline := t.IssuedAt.Add(def.Callback.Timeout)
	s.post(ctx, u, o.ord, sas.Status{Status: sas.StatusWaiting, Step: def.Name, Sequence: SeqWaiting(r.Step, r.Attempt), Token: tok}, s.cfg.Clock.Now())
	// The token first: a reason is cut to a bound, and the token must
	// reach people whole.
	a := alertFor(o, r, fmt.Sprintf("%s/waiting/%d", r.Key(), r.Attempt),
		fmt.Sprintf("token %s: step %s waits for a completion until %s (sasctl complete --token ...)",
			tok, def.Name, deadline.UTC().Format(time.RFC3339)), s.cfg.Clock.Now())
	u.Alert(a)
	s.log.InfoContext(ctx, "step waits for a completion", "order", o.id(), "step", r.Step, "stepName", def.Name,
		"attempt", r.Attempt, "deadline", deadline, "leaseUntil", r.CompleteBy)
}

// completion takes a completion from outside (intake or control queue):
// its token checked, the step read, and then, for the waiting attempt the
// token names while its deadline runs, the outcome applied as an agent's
// reply would be. Anything else (a late completion, a repeat, a
// heartbeat for a step no longer waiting) changes nothing and is logged;
// a token that does not check out is dropped with its reason.
func (s *Service) completion(ctx context.Context, u *outbox.Unit, from Origin, body []byte) error {
	var m sas.Completion
	if err := json.Unmarshal(body, &m); err != nil {
		return drop(err, "malformed completion")
	}
	if err := m.Check(); err != nil {
		return drop(err, "completion")
	}
	t, err := s.completionToken(ctx, from, m)
	if err != nil {
		return err
	}
	o, err := s.load(ctx, t.OrderID)
	if err != nil {
		return err
	}
	rec, ok := o.step(t.Step)
	if !ok || !o.wf.Steps[t.Step].Outside() {
		return drop(nil, "completion for order %s step %d: not a callback step", t.OrderID, t.Step)
	}
	if m.Step != nil && rec.Attempt == t.Attempt {
		t.IssuedAt = rec.ClaimedAt() // what the token would say: a heartbeat's bound
	}
	def := o.wf.Steps[t.Step]
	now := s.cfg.Clock.Now()
	who := actor(from)
	if m.Actor != "" {
		who += " (says " + sas.BoundReason(m.Actor) + ")"
	}
	log := s.log.With("order", t.OrderID, "step", t.Step, "attempt", t.Attempt, "outcome", m.Outcome, "actor", who)
	waiting := rec.ProcessState == sas.Processing && rec.LockedBy == t.Holder && rec.Attempt == t.Attempt &&
		rec.Generation == t.Generation && now.Before(rec.CompleteBy)
	if m.Outcome == sas.OutcomeHeartbeat {
		return s.heartbeat(ctx, log, def, rec, t, waiting, now)
	}
	again := rec.Attempt == t.Attempt && rec.Generation == t.Generation &&
		((rec.ProcessState == sas.Processed && m.Outcome == sas.OutcomeDone) ||
			(rec.ProcessState == sas.Error && m.Outcome == sas.OutcomeFailed && rec.FailedBy == t.Holder))
	// An agent-token step's completion may have claimed the step's own
	// undo (its agent may have started the work): a failure's, a success
	// on a cancelled step's, or one whose successor failed by its
	// condition. Its redelivery sends that undo again, as an agent's
	// reply's does (reply.go's refused), in case its first delivery
	// stopped before the send (agenttoken.go).
	again = again || (def.AgentToken() && redelivered(ctx) &&
		rec.ProcessState == sas.Compensating && rec.Attempt == t.Attempt+1 && rec.Generation == t.Generation)
	if !waiting && !again {
		log.WarnContext(ctx, "late completion: the step no longer waits for it; nothing changes",
			"state", rec.ProcessState, "currentAttempt", rec.Attempt, "deadline", rec.CompleteBy)
		return nil
	}
	reason := m.Reason
	if m.Outcome == sas.OutcomeFailed {
		if reason == "" {
			reason = "failed from outside without a reason"
		}
		reason = sas.BoundReason(reason + " (by " + who + ")")
	}
	if m.Outcome == sas.OutcomeFailed {
		o.steps = nil // its effects read the order after the write, as any failure's
	}
	log.InfoContext(ctx, "completion of a waiting step", "again", again)
	ctx = context.WithValue(ctx, completerKey{}, who) // the history entry says who
	return s.applyReply(ctx, u, o, sas.AgentReply{
		V: sas.MessageVersion, Kind: sas.KindAgentReply, OrderID: t.OrderID, Step: t.Step, Attempt: t.Attempt,
		LockedBy: t.Holder, Outcome: m.Outcome, Result: m.Result, Reason: reason, Rejected: m.Rejected,
		Workflow: o.ord.Workflow, Version: o.ord.Version, Payload: o.ord.Payload, ReplyTo: o.ord.ReplyTo,
		Priority: o.ord.Priority, StepName: def.Name, Generation: t.Generation, Trace: o.ord.Trace,
	})
}

// completionToken is what a completion names: the step its token binds, once
// the token checks out, or, for an operator's completion (Completion.Step),
// the attempt it names, believed from the control queue alone, whose policy
// admits the operators and the supervisor (docs/trust.md, "Completion
// tokens"). Either way the attempt named must be the one waiting, so a
// named completion is held to the same fence as a token.
func (s *Service) completionToken(ctx context.Context, from Origin, m sas.Completion) (sas.Token, error) {
	if m.Step != nil {
		if from.Source != FromControl {
			s.log.WarnContext(ctx, "completion refused: it names its step without a token, which only the control queue may", "sender", from.SenderID, "source", from.Source)
			return sas.Token{}, drop(nil, "completion from %s names its step without a token: only the control queue's senders (operators) may", from.Source)
		}
		return m.Step.Token(), nil
	}
	t, err := s.signer.OpenToken(m.Token)
	if err != nil {
		s.log.WarnContext(ctx, "completion refused: its token does not check out", "sender", from.SenderID, "err", err)
		return sas.Token{}, drop(err, "completion from %s", from.Source)
	}
	return t, nil
}

// heartbeat moves a waiting step's deadline on by its heartbeat interval,
// never past its timeout (from the claim the token names).
func (s *Service) heartbeat(ctx context.Context, log *slog.Logger, def sas.StepDef, rec sas.StepRecord, t sas.Token, waiting bool, now time.Time) error {
	if !waiting {
		log.WarnContext(ctx, "late heartbeat: the step no longer waits; nothing changes", "state", rec.ProcessState, "currentAttempt", rec.Attempt)
		return nil
	}
	if def.Callback.Heartbeat <= 0 {
		log.InfoContext(ctx, "heartbeat for a step that needs none: nothing changes")
		return nil
	}
	until := now.Add(def.Callback.Heartbeat)
	if end := t.IssuedAt.Add(def.Callback.Timeout); end.Before(until) {
		until = end
	}
	if !until.After(rec.CompleteBy) {
		return nil // no later than the deadline it has
	}
	_, err := s.cfg.Store.Heartbeat(ctx, sas.HeartbeatParams{Key: rec.Key(), Owner: t.Holder, Attempt: t.Attempt, Now: now, Until: until})
	if err != nil {
		if errors.Is(err, sas.ErrLostRace) {
			log.WarnContext(ctx, "heartbeat lost the race: the step was completed or given up meanwhile, or a later heartbeat moved its deadline further")
			return nil
		}
		return fmt.Errorf("heartbeat of step %s: %w", rec.Key(), err)
	}
	log.InfoContext(ctx, "heartbeat: the step's deadline moves on", "until", until)
	return nil
}

type completerKey struct{}

// completerOf is who completed a callback step from outside, as the
// completion's history entry records it ("" for an agent's reply).
func completerOf(ctx context.Context) string {
	who, _ := ctx.Value(completerKey{}).(string)
	return who
}
