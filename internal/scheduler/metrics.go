package scheduler

import (
	"context"
	"log/slog"
	"time"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/msgctx"
	"github.com/sas-go/sas/internal/sas"
)

// The scheduler's metrics (internal/metrics, docs/observability.md): one
// EMF line per event it records, counted once per handled message, so a
// redelivered message that repeats an event's effects may count it again.

// emitStep publishes events of one step of o (its undo when undo is set)
// under {Workflow, Step, Agent} and {}.
func (s *Service) emitStep(ctx context.Context, o order, step int, undo bool, now time.Time, names ...string) {
	var stepName, agent string
	if step >= 0 && step < len(o.wf.Steps) {
		stepName, agent = o.wf.Steps[step].Name, o.wf.Steps[step].Agent
	}
	sets, dims := metrics.Step(o.ord.Workflow, metrics.StepName(stepName, undo), agent, []string{})
	s.emit(ctx, metrics.Line{Time: now, Dimensions: sets, Dims: dims,
		Properties: map[string]any{"order": o.id(), "step": step}}, names)
}

// emitOrder publishes an event of an order under {Workflow} and {}.
func (s *Service) emitOrder(ctx context.Context, name, orderID, workflow string, now time.Time) {
	s.emit(ctx, metrics.Line{Time: now, Dimensions: [][]string{{metrics.DimWorkflow}, {}},
		Dims: map[string]string{metrics.DimWorkflow: workflow}, Properties: map[string]any{"order": orderID}}, []string{name})
}

func (s *Service) emit(ctx context.Context, l metrics.Line, names []string) {
	for _, n := range names {
		l.Metrics = append(l.Metrics, metrics.Metric{Name: n, Unit: metrics.Catalog[n], Value: 1})
	}
	if t := sas.TraceID(msgctx.Trace(ctx)); t != "" {
		l.Properties["traceId"] = t
	}
	if id := msgctx.MessageID(ctx); id != "" {
		l.Properties["messageId"] = id
	}
	if err := s.metrics.Emit(l); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "metrics line not written", slog.String("err", err.Error()))
	}
}
