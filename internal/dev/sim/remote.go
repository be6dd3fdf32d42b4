package sim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
)

// remote is the model of the remote services the agents call: idempotent
// by key (a key's effect is made once however often it is asked for), an
// undo commutes with its do (an undo that arrives first makes the later do
// a no-op), and, when so configured, a refusal is stored under its key and
// replayed. What it did is what the checks hold the system to.
type remote struct {
	w       *World
	effects map[string]*effect // by the do's key
	refused map[string]string  // stored refusals, by key
	calls   int
}

type effect struct {
	order  string
	step   int
	key    string
	done   bool // the do took effect
	undone bool // the undo ran (before or after the do)
}

func newRemote(w *World) *remote {
	return &remote{w: w, effects: map[string]*effect{}, refused: map[string]string{}}
}

// call is every agent's step and undo: the agent SDK runs it with the
// request the scheduler sent.
func (r *remote) call(ctx context.Context, service string, req agent.Request) (any, error) {
	verb := "do"
	if req.Undo {
		verb = "undo"
	}
	c := stop(ctx, opRemote, "%s %s %s (%s)", service, verb, req.IdempotencyKey, req.Action)
	r.calls++
	r.w.checkAction(req)
	r.w.checkResults(req)
	if req.Undo {
		r.w.checkSettledBeforeUndo(req)
	}
	r.w.checkCalledCondition(req)
	r.w.checkFanOutCall(req) // fanout.go
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	doKey := strings.TrimSuffix(req.IdempotencyKey, ":undo")
	e := r.effects[doKey]
	if e == nil {
		e = &effect{order: req.OrderID, step: req.StepIndex, key: doKey}
		r.effects[doKey] = e
	}
	if req.Undo {
		switch {
		case c.fault == faultTransient:
			return nil, errors.New("the service is unavailable (injected)")
		case c.fault == faultPermanent && !e.undone:
			return nil, agent.Permanent(errors.New("the undo is refused (injected)"))
		}
		if !e.undone {
			r.w.tracef("  remote: %s undone", doKey)
		}
		e.undone = r.w.cfg.Sabotage != SabotageSkipUndo
		if c.fault == faultLost {
			return nil, errors.New("the answer was lost (injected)")
		}
		return map[string]string{"undone": doKey}, nil
	}
	if reason, ok := r.refused[doKey]; ok {
		return nil, r.refusal(reason)
	}
	switch {
	case c.fault == faultTransient:
		return nil, errors.New("the service is unavailable (injected)")
	case c.fault == faultPermanent && !e.done && !e.undone:
		// Idempotent by key: a key whose effect exists answers with it.
		reason := r.refusalReason()
		if r.w.cfg.StoreRefusals {
			r.refused[doKey] = reason + ", stored"
		}
		return nil, r.refusal(reason)
	}
	if !e.undone && !e.done {
		e.done = true
		r.w.tracef("  remote: %s done", doKey)
	}
	if e.done && !e.undone {
		r.learnToken(req) // agenttoken.go
	}
	if c.fault == faultLost {
		return nil, errors.New("the answer was lost (injected)")
	}
	if isElement(req) {
		return elementResult(doKey, req.Item), nil
	}
	return resultOf(req, doKey), nil
}

// live returns the effects of an order that exist and were not undone,
// by step, in key order.
func (r *remote) live(order string) map[int][]string {
	out := map[int][]string{}
	for _, e := range r.effects {
		if e.order == order && e.done && !e.undone {
			out[e.step] = append(out[e.step], e.key)
		}
	}
	for _, ks := range out {
		sort.Strings(ks)
	}
	return out
}

// checkAction holds every call to the definition its order was submitted
// with: the action (or undo) of that version's step.
func (w *World) checkAction(req agent.Request) {
	o, err := w.view(req.OrderID)
	if err != nil {
		w.violate("unknown order", "a call for order %s, which the store does not hold", req.OrderID)
		return
	}
	w.checkPayload(req.OrderID, req.Payload, o.Order.Payload)
	def, ok := w.defs[o.Order.Version]
	if !ok {
		w.violate("unknown version", "order %s runs on version %q, which was never deployed", req.OrderID, o.Order.Version)
		return
	}
	if req.StepIndex >= len(def.Steps) {
		w.violate("wrong definition", "order %s (version %.8s, %d steps) called for step %d", req.OrderID, o.Order.Version, len(def.Steps), req.StepIndex)
		return
	}
	want := def.Steps[req.StepIndex].Action
	if req.Undo {
		want = def.Steps[req.StepIndex].Undo
	}
	if req.Action != want || req.Step != def.Steps[req.StepIndex].Name {
		w.violate("wrong definition", "order %s step %d (%s) called %q; its version %.8s says %s %q",
			req.OrderID, req.StepIndex, req.Step, req.Action, o.Order.Version, def.Steps[req.StepIndex].Name, want)
	}
}

// tripWorkflow is the workflow every run starts with: the reference order
// (reserve, charge, ship) over two agents, every step but the last undoable.
func tripWorkflow() sas.Workflow {
	return sas.Workflow{Name: "trip", Steps: []sas.StepDef{
		{Name: "reserve", Agent: "stock", Action: "reserve", Undo: "release", Timeout: stepTimeout},
		{Name: "charge", Agent: "pay", Action: "charge", Undo: "refund", Timeout: stepTimeout},
		{Name: "ship", Agent: "stock", Action: "ship", Timeout: stepTimeout},
	}}
}

// Variants of the workflow a mid-run deploy brings.
const (
	VariantAddStep    = "add-step"
	VariantRemoveStep = "remove-step"
	VariantLimits     = "limits"
	VariantActions    = "actions"
)

// Variants lists them, for seeds to choose from.
var Variants = []string{VariantAddStep, VariantRemoveStep, VariantLimits, VariantActions}

func variant(w sas.Workflow, v string) sas.Workflow {
	steps := append([]sas.StepDef(nil), w.Steps...)
	switch v {
	case VariantAddStep:
		steps = append(steps, sas.StepDef{Name: "notify", Agent: "pay", Action: "notify", Timeout: stepTimeout})
	case VariantRemoveStep:
		steps = steps[:len(steps)-1]
	case VariantLimits:
		steps[1].Timeout, steps[1].WaitLimit, steps[1].MaxFailures = 2*stepTimeout, 30*time.Second, 2
		steps[0].UndoRetry = sas.RetryPolicy{MaxAttempts: 3} // tighter than the deployment's undo policy
		steps[0].TotalLimit = 2 * time.Minute
	case VariantActions:
		steps[1].Action, steps[1].Undo = "charge-v2", "refund-v2"
	default:
		panic(fmt.Sprintf("sim: no variant %q", v))
	}
	return sas.Workflow{Name: w.Name, Steps: steps}
}
