package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/outbox"
	"github.com/sas-go/sas/internal/sas"
)

// Results that flow (docs/protocol.md, "Results"). A step's result is
// recorded on its own record by the completion that its done reply makes,
// and every request carries the results of the steps before its step (an
// undo's, its own step's too). A request is built from the records the
// handler read, so on the reply's hot path:
//   - a first step's done reply reads nothing: its successor needs only its
//     result, and a one-step order's processed status only that;
//   - a later step's done reply reads the order once, before its write,
//     which also checks the bound per order before anything is written.
//
// Every other sender of a request (a retry, a compensation, a re-send)
// either read the order already or reads it here.

// resultsFor is what the request of step (its undo with undo) carries. It
// reads the order into o when o holds neither the records nor the results
// it needs.
func (s *Service) resultsFor(ctx context.Context, o *order, step int, undo bool) (sas.Results, error) {
	if o.wf.Graph() {
		// A step of a graph sees its ancestors' results (an undo its own
		// too; the processed status, step n, every step's).
		if o.steps == nil {
			if err := s.read(ctx, o); err != nil {
				return nil, fmt.Errorf("reading the results for step %d: %w", step, err)
			}
		}
		if step >= o.n() {
			return sas.ResultsBefore(o.steps, step), nil
		}
		which := o.wf.Ancestors(step)
		if undo {
			which = append(which, step)
		}
		return sas.ResultsOf(o.steps, which), nil
	}
	end := step
	if undo {
		end = step + 1
	}
	switch {
	case end == 0:
		return nil, nil
	case o.steps != nil:
		return sas.ResultsBefore(o.steps, end), nil
	case end <= o.knownEnd:
		return o.known, nil
	}
	if err := s.read(ctx, o); err != nil {
		return nil, fmt.Errorf("reading the results before step %d: %w", step, err)
	}
	return sas.ResultsBefore(o.steps, end), nil
}

// put replaces the record of r's step among o's records, if read: a write
// made after the read returned it.
func (o *order) put(r sas.StepRecord) {
	for i := range o.steps {
		if o.steps[i].Step == r.Step {
			o.steps[i] = r
		}
	}
	if r.Step == 0 && o.steps == nil && r.ProcessState != sas.Pending && r.ProcessState != sas.Processing {
		// A first step that completed: all its successor needs.
		o.known, o.knownEnd = sas.ResultsBefore([]sas.StepRecord{r}, 1), 1
	}
}

// boundResult compacts a forward step's done reply's result and checks it
// against the bounds per step and per order, reading the order for a step
// after the first (what its successor's request, or the processed status,
// carries anyway). It returns the reason the step fails with when the
// result is over either bound ("" when within): its effect happened, so the
// step fails and is undone with its order (sas.ErrorResultTooLarge).
func (s *Service) boundResult(ctx context.Context, o *order, rep *sas.AgentReply) (string, error) {
	res, err := sas.CompactResult(rep.Result)
	if err != nil {
		return fmt.Sprintf("%s: step %s: %v", sas.ErrorResultTooLarge, rep.StepName, err), nil
	}
	rep.Result = res
	if why := sas.ResultTooLarge(rep.StepName, len(res)); why != "" {
		return why, nil
	}
	if rep.Step == 0 {
		return "", nil // within the bound per step, which is below the bound per order
	}
	if o.steps == nil { // read already for a completion from outside (callback.go)
		if err := s.read(ctx, o); err != nil {
			return "", err
		}
	}
	end := rep.Step
	if o.wf.Graph() {
		end = o.n() // every result recorded so far, whatever its branch
	}
	all := sas.ResultsBefore(o.steps, end)
	if len(res) > 0 {
		if all == nil {
			all = sas.Results{}
		}
		all[rep.StepName] = res
	}
	return sas.OrderResultsTooLarge(rep.StepName, all.Size()), nil
}

// ending is the status that ends an order whose compensation finished (or
// that had nothing to undo): rejected, naming the step and its reason, when
// its failure was a business rejection (sas.Rejected); else compensated.
func ending(o order) sas.Status {
	if end, ok := cancelEnding(o); ok {
		return end
	}
	if o.view().State() == sas.Rejected {
		for _, r := range o.steps {
			if r.Rejected {
				return sas.Status{Status: sas.StatusRejected, Step: o.wf.Steps[r.Step].Name, Reason: r.LastError, Sequence: SeqCompensated(o.n())}
			}
		}
	}
	return sas.Status{Status: sas.StatusCompensated, Sequence: SeqCompensated(o.n())}
}

// rejectedAlone posts the end of an order rejected by step r when there is
// nothing to undo (no step up to r has an Undo): it ends at once.
func (s *Service) rejectedAlone(ctx context.Context, u *outbox.Unit, o order, r sas.StepRecord, now time.Time) {
	s.log.InfoContext(ctx, "order rejected; nothing to undo", "order", o.id(), "step", r.Step, "reason", r.LastError)
	s.emitOrder(ctx, metrics.OrdersRejected, o.id(), o.ord.Workflow, now)
	s.post(ctx, u, o.ord, sas.Status{Status: sas.StatusRejected, Step: o.wf.Steps[r.Step].Name, Reason: r.LastError, Sequence: SeqCompensated(o.n())}, now)
}
