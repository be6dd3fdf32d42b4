package sim

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Callback steps (issue 28 §1 and §7; docs/protocol.md, "Callback steps";
// docs/simulation.md, "Invariants"). In a quarter of the seeds
// (Config.callbacking) the trip has a step no agent runs, "approve", which
// the outside world completes with the token its waiting status handed out.
// The outside world (outside) answers at random times: real completions
// (done, failed, rejected), heartbeats, duplicates of what it sent before,
// late ones (for a step no longer waiting), ones sent as the step's
// deadline nears (racing the supervisor's give-up), forged tokens (a MAC
// altered, another key's, a guess) and tokens lifted from one order's step
// and rewritten to name another order's. Three rules hold the system to
// them, beside every other:
//   - "completed twice": a callback step completes at most once: a write
//     that completes it (Complete or Fail by a scheduler) is made only of
//     the attempt that waits, and of a step still waiting;
//   - "token misused": a scheduler's write that completes, fails or
//     heartbeats a callback step comes from a message carrying a token
//     the scheduler minted for exactly that step's waiting attempt (its
//     order, step, attempt, generation and holder): a forged token moves
//     nothing, and a token moves no other order's step;
//   - "given up reversed": a step given up at its deadline stays given
//     up (no completion takes effect after it), and its order is
//     compensated (ends Compensated, or CompensationFailed, which is
//     alerted), unless an operator resubmitted the step since.

// Planted bugs of these rules (TestChecksCatchPlantedBugs).
const (
	// SabotageCompleteTwice: the store's write completing a callback step
	// is not fenced on its state once another completion took effect: a
	// duplicate completion that read the step waiting completes it again.
	SabotageCompleteTwice = "complete-twice"
	// SabotageTokenAnyOrder: the token check ignores the order id: a token
	// lifted from one order's waiting step, its order id rewritten to
	// another's, completes the step it now names (the world re-signs it on
	// delivery, as a check that left the order id out of the MAC would
	// accept it).
	SabotageTokenAnyOrder = "token-any-order"
	// SabotageCompleteGivenUp: the store's write completing a callback step
	// is not fenced on its state once the supervisor gave it up: a
	// completion that read the step waiting lands after the give-up.
	SabotageCompleteGivenUp = "complete-given-up"
)

// callbacking reports whether this run's workflow has a callback step: when
// the configuration says so, in the seeds of its planted bugs, and in a
// quarter of the seeds besides (drawn from the seed apart from ForSeed's
// draws and the other shapes').
func (c Config) callbacking() bool {
	switch {
	case c.Callbacks, c.Sabotage == SabotageCompleteTwice, c.Sabotage == SabotageTokenAnyOrder, c.Sabotage == SabotageCompleteGivenUp,
		c.Sabotage == SabotageAgentCompletes, c.Sabotage == SabotageNamedFromIntake: // agenttoken.go
		return true
	}
	return splitmix(uint64(c.Seed)^0xcb28)%4 == 0
}

// The callback step's wait: its timeout, and in half the callback seeds a
// heartbeat interval too, short enough that a seed's run sees timeouts,
// missed heartbeats and completions racing them.
const (
	callbackTimeout   = 90 * time.Second
	callbackHeartbeat = 30 * time.Second
)

// approveStep is the callback step a callback seed's trip gets.
func approveStep(seed int64) sas.StepDef {
	cb := &sas.Callback{Timeout: callbackTimeout}
	if splitmix(uint64(seed)^0x7ea)%2 == 0 {
		cb.Heartbeat = callbackHeartbeat
	}
	return sas.StepDef{Name: "approve", Callback: cb}
}

// withCallback gives the trip its callback step: in a straight line between
// charge and ship (its completion claims ship), in a graph a branch of its
// own after reserve, beside charge and hold (a leaf: the order is processed
// once it and ship are; the steps keep their indices, so every other rule's
// reading of them holds, and a deploy that removes the last step removes
// it).
func withCallback(w sas.Workflow, seed int64) sas.Workflow {
	approve := approveStep(seed)
	steps := append([]sas.StepDef(nil), w.Steps...)
	if steps[1].After != nil {
		approve.After = []int{0}
		return sas.Workflow{Name: w.Name, Steps: append(steps, approve)}
	}
	steps = append(steps[:2], append([]sas.StepDef{approve}, steps[2:]...)...)
	return sas.Workflow{Name: w.Name, Steps: steps}
}

// callbacks is what the outside world knows and did, and what the rules
// remember.
type callbacks struct {
	signer *sas.Signer
	// tokens are the tokens handed out in waiting statuses, in the order
	// they were first seen; seen dedupes them.
	tokens []string
	seen   map[string]bool
	// sent are the completions the outside world sent, for duplicates.
	sent []string
	// spliced: tokens the outside world rewrote to name another order
	// (SabotageTokenAnyOrder re-signs these on delivery).
	spliced map[string]bool
	// answered: the tokens the outside world considered in the calm.
	answered map[string]bool
	// completed counts the completions that took effect, by attempt.
	completed map[callbackAttempt]int
	// givenUp are the callback attempts the supervisor gave up.
	givenUp []callbackAttempt
}

type callbackAttempt struct {
	key        sas.StepKey
	attempt    int
	generation int
}

func (w *World) cbs() *callbacks {
	if w.cb == nil {
		s, err := sas.NewSigner(signingKey)
		if err != nil {
			panic(err)
		}
		w.cb = &callbacks{signer: s, seen: map[string]bool{}, spliced: map[string]bool{}, answered: map[string]bool{},
			completed: map[callbackAttempt]int{}}
	}
	return w.cb
}

// isCallback reports whether k is a callback step of its order's version.
func (w *World) isCallback(k sas.StepKey) bool {
	if !w.cfg.callbacking() {
		return false
	}
	v, err := w.view(k.OrderID)
	if err != nil {
		return false
	}
	def, ok := w.defs[v.Order.Version]
	return ok && k.Step < len(def.Steps) && def.Steps[k.Step].Outside()
}

// sentWaiting notes a waiting status that went out: the outside world now
// holds its token, and the claim that owed it is discharged (the token goes
// out where an agent request would have gone).
func (w *World) sentWaiting(ctx context.Context, q *queue, m *message) {
	if q != w.status || !w.cfg.callbacking() {
		return
	}
	var s sas.Status
	if json.Unmarshal([]byte(m.body), &s) != nil || s.Status != sas.StatusWaiting || s.Token == "" {
		return
	}
	c := w.cbs()
	if !c.seen[s.Token] {
		c.seen[s.Token] = true
		c.tokens = append(c.tokens, s.Token)
	}
	tok, err := sas.PeekToken(s.Token)
	if err != nil {
		return
	}
	k := sas.StepKey{OrderID: tok.OrderID, Step: tok.Step}
	w.requested[reportedAttempt{k, tok.Attempt}] = w.nextMsg
	t := taskOf(ctx)
	if t == nil {
		return
	}
	keep := t.owes[:0]
	for _, o := range t.owes {
		if !(o.kind == owesRequest && o.key == k && o.attempt == tok.Attempt) {
			keep = append(keep, o)
		}
	}
	t.owes = keep
}

// waiting reports whether the step tok names waits for that token now.
func (w *World) waiting(tok sas.Token) bool {
	r, err := w.mem.GetStep(context.Background(), sas.StepKey{OrderID: tok.OrderID, Step: tok.Step})
	return err == nil && r.ProcessState == sas.Processing && r.Attempt == tok.Attempt && r.Generation == tok.Generation &&
		r.LockedBy == tok.Holder && w.clock.Now().Before(r.CompleteBy)
}

// outside is one act of the outside world, drawn from the seed.
func (w *World) outside() {
	c := w.cbs()
	if len(c.tokens) == 0 {
		return
	}
	// Mostly a token whose step waits; else any (a late answer).
	var live []string
	for _, s := range c.tokens {
		if t, err := sas.PeekToken(s); err == nil && w.waiting(t) {
			live = append(live, s)
		}
	}
	tokStr := c.tokens[w.rng.IntN(len(c.tokens))]
	if len(live) > 0 && w.rng.IntN(4) > 0 {
		tokStr = live[w.rng.IntN(len(live))]
	}
	tok, _ := sas.PeekToken(tokStr)
	name := fmt.Sprintf("%s/%d a%d", tok.OrderID, tok.Step, tok.Attempt)
	if !w.waiting(tok) {
		name += " (no longer waiting)"
	}
	switch x := w.rng.IntN(20); {
	case x < 7:
		w.answer(sas.Completion{Token: tokStr, Outcome: sas.OutcomeDone, Result: json.RawMessage(`{"approvedBy":"sim"}`)}, "completes "+name)
	case x < 9:
		rejected := w.rng.IntN(2) == 0
		w.answer(sas.Completion{Token: tokStr, Outcome: sas.OutcomeFailed, Reason: "declined", Rejected: rejected},
			fmt.Sprintf("fails %s (rejected: %v)", name, rejected))
	case x < 11:
		w.answer(sas.Completion{Token: tokStr, Outcome: sas.OutcomeHeartbeat}, "heartbeats "+name)
	case x < 13 && len(c.sent) > 0:
		body := c.sent[w.rng.IntN(len(c.sent))]
		w.putCompletion(body, "sends again what it sent")
	case x < 14:
		// Racing the timeout: the answer goes out as the step's deadline
		// comes, so its handling and the supervisor's give-up meet.
		r, err := w.mem.GetStep(context.Background(), sas.StepKey{OrderID: tok.OrderID, Step: tok.Step})
		w.answer(sas.Completion{Token: tokStr, Outcome: sas.OutcomeDone, Result: json.RawMessage(`{"approvedBy":"sim","racing":true}`)},
			"completes "+name+" as its deadline nears")
		if err == nil && r.CompleteBy.After(w.clock.Now()) {
			w.clock.Set(r.CompleteBy.Add(-time.Duration(w.rng.IntN(3000)) * time.Millisecond))
		}
	case x < 17:
		w.answer(sas.Completion{Token: w.forgeToken(tok, tokStr), Outcome: sas.OutcomeDone, Result: json.RawMessage(`{"approvedBy":"forger"}`)},
			"sends a forged token for "+name)
	default:
		other := w.orders[w.rng.IntN(len(w.orders))]
		if other == tok.OrderID {
			return
		}
		spliced := splice(tokStr, other)
		c.spliced[spliced] = true
		w.answer(sas.Completion{Token: spliced, Outcome: sas.OutcomeDone, Result: json.RawMessage(`{"approvedBy":"thief"}`)},
			fmt.Sprintf("sends %s's token rewritten to name %s", name, other))
	}
}

// outsideCalm is the outside world once the run is calm: each token whose
// step still waits is answered once, done mostly, failed now and then, or
// left to its timeout. It reports whether it sent anything.
func (w *World) outsideCalm() bool {
	if !w.cfg.callbacking() || w.cb == nil {
		return false
	}
	c := w.cb
	for _, s := range c.tokens {
		if c.answered[s] {
			continue
		}
		t, err := sas.PeekToken(s)
		if err != nil || !w.waiting(t) {
			continue
		}
		c.answered[s] = true
		name := fmt.Sprintf("%s/%d a%d", t.OrderID, t.Step, t.Attempt)
		switch w.rng.IntN(8) {
		case 0, 1, 2, 3, 4:
			w.answer(sas.Completion{Token: s, Outcome: sas.OutcomeDone, Result: json.RawMessage(`{"approvedBy":"sim"}`)}, "completes "+name)
		case 5:
			w.answer(sas.Completion{Token: s, Outcome: sas.OutcomeFailed, Reason: "declined"}, "fails "+name)
		default:
			continue // left to its timeout
		}
		return true
	}
	return false
}

// answer puts a completion on the intake queue, as package completion
// does.
func (w *World) answer(m sas.Completion, what string) {
	m.V, m.Kind, m.Actor = sas.MessageVersion, sas.KindComplete, "person:sim"
	body := sas.Encode(m)
	w.cbs().sent = append(w.cbs().sent, body)
	w.putCompletion(body, what)
}

func (w *World) putCompletion(body, what string) {
	w.nextMsg++
	m := &message{id: fmt.Sprintf("m%d", w.nextMsg), body: body, sentAt: w.clock.Now(), visibleAt: w.clock.Now(), sender: "outside"}
	w.intake.msgs = append(w.intake.msgs, m)
	w.tracef("outside: %s (%s to intake)", what, m.id)
}

// forgeToken is a token for the step tok names that its holder did not get
// from the scheduler: its MAC altered, made with another key, or guessed.
func (w *World) forgeToken(tok sas.Token, s string) string {
	switch w.rng.IntN(3) {
	case 0:
		b := []byte(s)
		i := len(b) - 1 - w.rng.IntN(8)
		b[i] = "AB"[w.rng.IntN(2)]
		if string(b) == s {
			b[i] = 'C'
		}
		return string(b)
	case 1:
		other, err := sas.NewSigner([]byte("not-the-deployment-key-0123456789abcdef-0123456789"))
		if err != nil {
			panic(err)
		}
		return other.MintToken(tok)
	default:
		body, _, _ := strings.Cut(s, "~")
		return body + "~v2.guess.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	}
}

// splice rewrites the order id a token names, keeping its MAC: a token
// lifted from one order's step, aimed at another's.
func splice(s, order string) string {
	body, mac, _ := strings.Cut(s, "~")
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return s
	}
	var t sas.Token
	if json.Unmarshal(b, &t) != nil {
		return s
	}
	t.OrderID = order
	t.IssuedAt = t.IssuedAt.UTC().Truncate(time.Millisecond)
	nb, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(nb) + "~" + mac
}

// delivered is the body a delivery hands the consumer: the message's own,
// but under SabotageTokenAnyOrder a completion whose token was rewritten to
// name another order, re-signed as a check that ignores the order id would
// take it.
func (w *World) delivered(m *message) string {
	if w.cfg.Sabotage != SabotageTokenAnyOrder || m.sender != "outside" {
		return w.rekeyed(m.body, m.receives) // fanout.go
	}
	var c sas.Completion
	if json.Unmarshal([]byte(m.body), &c) != nil || !w.cbs().spliced[c.Token] {
		return m.body
	}
	t, err := sas.PeekToken(c.Token)
	if err != nil {
		return m.body
	}
	c.Token = w.cbs().signer.MintToken(t)
	return sas.Encode(c)
}

// tokenPattern finds tokens in a message body (a completion, its renewed
// copy, or a redrive holding it).
var tokenPattern = regexp.MustCompile(`[A-Za-z0-9_-]+~v[0-9][A-Za-z0-9_.-]*`)

// carriesToken reports whether a message the task received carries a token
// the scheduler minted for attempt a of the step (holder its holder).
func (w *World) carriesToken(t *task, a callbackAttempt, holder string) bool {
	for _, x := range t.received {
		for _, s := range tokenPattern.FindAllString(x.m.body, -1) {
			tok, err := w.cbs().signer.OpenToken(s)
			if err == nil && tok.OrderID == a.key.OrderID && tok.Step == a.key.Step && tok.Attempt == a.attempt &&
				tok.Generation == a.generation && tok.Holder == holder {
				return true
			}
		}
	}
	return false
}

// checkCallbackWrite holds a committed write's change to a callback step
// to the rules above. first: the record is the write's own step (not one
// it claims or skips).
func (w *World) checkCallbackWrite(ctx context.Context, name string, first bool, b, a sas.StepRecord) {
	switch {
	case !w.cfg.callbacking() || !first:
		return
	case name != "GiveUp" && name != "Complete" && name != "Fail" && name != "Heartbeat":
		return
	case !w.isCallback(a.Key()):
		return
	}
	if b.ProcessState == sas.Compensating {
		return // the undo of an agent-token step: its agent's (agenttoken.go)
	}
	at := callbackAttempt{key: b.Key(), attempt: b.Attempt, generation: b.Generation}
	switch name {
	case "GiveUp":
		if b.ProcessState == sas.Processing && a.ProcessState == sas.Error {
			w.cbs().givenUp = append(w.cbs().givenUp, at)
		}
		return
	case "Heartbeat":
		if t := taskOf(ctx); t != nil && !w.carriesToken(t, at, b.LockedBy) && !w.namedBy(t, at, b.LockedBy) {
			w.violate("token misused", "%s moved %v attempt %d's deadline, and no message it received carries that attempt's token or is an operator's naming it", t.name, at.key, at.attempt)
		}
		return
	}
	switch b.ProcessState {
	case sas.Processing:
	case sas.Error:
		w.violate("given up reversed", "%s moved %v from Error (%s) to %s at attempt %d: a completion took effect after the step was given up",
			name, at.key, b.LastError, a.ProcessState, a.Attempt)
		return
	default:
		w.violate("completed twice", "%s completed %v again at attempt %d: it was %s already", name, at.key, a.Attempt, b.ProcessState)
		return
	}
	how := "a completion"
	if w.isAgentToken(at.key) {
		how += " (a step whose agent handed out its token)"
	}
	w.tracef("  callback %v attempt %d: %s by %s", at.key, at.attempt, a.ProcessState, how)
	c := w.cbs()
	if c.completed[at]++; c.completed[at] > 1 {
		w.violate("completed twice", "%s completed %v attempt %d a second time", name, at.key, at.attempt)
	}
	if name == "Fail" && b.Cancelled {
		// A cancel ends a marked step's wait itself, with no token
		// (docs/protocol.md, "Cancellation"): nothing else would.
		return
	}
	if t := taskOf(ctx); t != nil && !w.carriesToken(t, at, b.LockedBy) && !w.namedBy(t, at, b.LockedBy) &&
		!(name == "Fail" && w.agentFailed(t, at, b.LockedBy)) {
		w.violate("token misused", "%s (%s) completed %v attempt %d (%s), and no message it received carries that attempt's token, is an operator's naming it, or its agent's failure",
			name, t.name, at.key, at.attempt, a.ProcessState)
	}
}

// checkGivenUp is "given up reversed" once settled: an order whose callback
// step was given up at its deadline, and not resubmitted since, is
// compensated.
func (w *World) checkGivenUp(v sas.OrderView) {
	if w.cb == nil || w.poisoned[v.Order.OrderID] {
		return
	}
	for _, g := range w.cb.givenUp {
		if g.key.OrderID != v.Order.OrderID || g.key.Step >= len(v.Steps) {
			continue
		}
		r := v.Steps[g.key.Step]
		if r.Attempt != g.attempt || r.Generation != g.generation {
			continue // resubmitted since: the operator's word
		}
		state := v.State()
		if state == sas.CompensationFailed {
			continue // an undo gave up: alerted, the operator's
		}
		def := w.defs[v.Order.Version]
		var standing []int
		for step, keys := range w.remote.live(v.Order.OrderID) {
			if len(keys) > 0 && step < len(def.Steps) && def.Steps[step].Undo != "" {
				standing = append(standing, step)
			}
		}
		if state == sas.Processed || len(standing) > 0 {
			slices.Sort(standing)
			w.violate("given up reversed", "order %s's step %d was given up at its deadline (attempt %d) and the order ended %s with the effects of steps %v standing (%s)",
				v.Order.OrderID, g.key.Step, g.attempt, state, standing, steps(v))
		}
	}
}

// unfencedCompletion is SabotageCompleteTwice and SabotageCompleteGivenUp:
// a completion of a callback step whose fenced write lost (err) is forced
// onto the record when it lost to another completion (Processed) or to the
// give-up (Error) of the same attempt. fail is the Fail, else complete the
// Complete.
func (s *store) unfencedCompletion(key sas.StepKey, owner string, attempt int, err error,
	complete *sas.CompleteParams, fail *sas.FailParams) ([]sas.StepRecord, bool) {
	w := s.w
	if !errors.Is(err, sas.ErrLostRace) || (w.cfg.Sabotage != SabotageCompleteTwice && w.cfg.Sabotage != SabotageCompleteGivenUp) ||
		!w.isCallback(key) {
		return nil, false
	}
	cur, gerr := s.mem.GetStep(context.Background(), key)
	if gerr != nil || cur.Attempt != attempt {
		return nil, false
	}
	switch {
	case w.cfg.Sabotage == SabotageCompleteTwice && cur.ProcessState == sas.Processed:
	case w.cfg.Sabotage == SabotageCompleteGivenUp && cur.ProcessState == sas.Error && !cur.Rejected:
	default:
		return nil, false
	}
	doctored := cur
	doctored.ProcessState, doctored.LockedBy = sas.Processing, owner
	var done sas.StepRecord
	var terr error
	if complete != nil {
		p := *complete
		p.Next, p.More, p.Skip, p.Siblings = nil, nil, nil, nil
		done, terr = sas.Complete(doctored, p)
	} else {
		done, terr = sas.Fail(doctored, *fail)
	}
	if terr != nil {
		return nil, false
	}
	w.tracef("  sabotaged: the completion of %v attempt %d is forced over its %s record", key, attempt, cur.ProcessState)
	s.mem.Force(done)
	out := []sas.StepRecord{done}
	if complete != nil {
		for _, n := range complete.Claims() {
			r, _ := s.mem.GetStep(context.Background(), n.Key)
			out = append(out, r)
		}
	}
	return out, true
}
