package sastest

import (
	"context"

	"github.com/sas-go/sas/agent"
	"github.com/sas-go/sas/internal/sas"
)

// StatusCancelled: the order was cancelled while it ran (Env.CancelWhen):
// no step that had not started started, the steps in flight settled, and
// whatever took effect was undone; no operator was alerted.
const StatusCancelled Status = "cancelled"

// CancelWhen cancels the order orderID mid-run, as its submitter would:
// when the agent is about to run the step called step (forward, its first
// run), the kit sends the order's cancel to the intake queue, and the run
// goes on. That step is in flight then, and so may be others, in
// branches that run at once: each is let to settle (its Func runs and its
// outcome counts), no step that had not started starts, and what took
// effect is undone, newest first. Run returns StatusCancelled.
// Call it before Run; a step that no workflow has fails the test.
func (e *Env) CancelWhen(orderID, step string) {
	e.t.Helper()
	e.checkStep("CancelWhen", step, false)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cancels == nil {
		e.cancels = map[attemptKey]bool{}
	}
	e.cancels[attemptKey{order: orderID, step: step}] = true
}

// FailOrder is Fail aimed at one order: the step called step of the order
// orderID returns err at the given attempt (from 1); other orders run it
// as their Fail or their agent says. Clear removes it.
func (e *Env) FailOrder(orderID, step string, attempt int, err error) {
	e.t.Helper()
	e.inject("FailOrder", step, false, attempt, err)
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.faults, fault{step: step, attempt: attempt}) // inject's: aimed instead
	if e.aimed == nil {
		e.aimed = map[aimedFault]error{}
	}
	e.aimed[aimedFault{order: orderID, fault: fault{step: step, attempt: attempt}}] = err
}

// Clear removes every failure injected into the step called step (Fail,
// FailUndo, FailOrder; every attempt, every order): the orders run after
// it run the step's agent again.
func (e *Env) Clear(step string) {
	e.t.Helper()
	e.checkStep("Clear", step, false)
	e.mu.Lock()
	defer e.mu.Unlock()
	for f := range e.faults {
		if f.step == step {
			delete(e.faults, f)
		}
	}
	for f := range e.aimed {
		if f.step == step {
			delete(e.aimed, f)
		}
	}
}

// aimedFault is a fault of one order's step.
type aimedFault struct {
	order string
	fault
}

// checkStep fails the test for a step no workflow has.
func (e *Env) checkStep(fn, step string, undo bool) {
	e.t.Helper()
	for _, w := range e.defs {
		for _, s := range w.Steps {
			if s.Name == step {
				return
			}
		}
	}
	e.inject(fn, step, undo, 0, nil) // fails the test, naming the steps there are
}

// injected is the failure injected for the n-th attempt of a request, if
// any: the order's own first (FailOrder), then every order's (Fail,
// FailUndo). Called with e.mu held.
func (e *Env) injected(req agent.Request, n int) (error, bool) {
	f := fault{step: req.Step, undo: req.Undo, attempt: n}
	if err, ok := e.aimed[aimedFault{order: req.OrderID, fault: f}]; ok {
		return err, true
	}
	if el := elementOf(req); el > 0 {
		at := f
		at.element = el
		if err, ok := e.faults[at]; ok {
			return err, true // FailElement's
		}
	}
	err, ok := e.faults[f]
	return err, ok
}

// cancelBefore sends the order's cancel when its step is about to run and
// CancelWhen asked for it (once). Called without e.mu.
func (e *Env) cancelBefore(ctx context.Context, req agent.Request) {
	if req.Undo {
		return
	}
	k := attemptKey{order: req.OrderID, step: req.Step}
	e.mu.Lock()
	due := e.cancels[k]
	delete(e.cancels, k)
	e.mu.Unlock()
	if !due {
		return
	}
	body := sas.Encode(sas.Cancel{V: sas.MessageVersion, Kind: sas.KindCancel, OrderID: req.OrderID, Reason: "cancelled by the test (sastest.CancelWhen)"})
	if _, err := e.queue.Send(ctx, sas.SendParams{QueueURL: e.intakeURL, Messages: []sas.OutboundMessage{{ID: "0", Body: body}}}); err != nil {
		e.t.Errorf("sastest: sending the cancel of order %s: %v", req.OrderID, err)
	}
}
