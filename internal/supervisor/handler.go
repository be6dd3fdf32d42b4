package supervisor

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
)

// Handler is the Lambda handler for the EventBridge schedule that runs the
// supervisor (docs/pattern.md §3).
type Handler struct {
	sup *Supervisor
}

// NewHandler returns the handler of a supervisor.
func NewHandler(s *Supervisor) *Handler { return &Handler{sup: s} }

// Handle runs one sweep. The schedule's event carries nothing the sweep
// needs; its id goes to the log to tie the run to the invocation. An error
// fails the invocation, so the function's error metric and alarm see sweeps
// that could not do their work; the schedule's retry just sweeps again,
// which is harmless.
func (h *Handler) Handle(ctx context.Context, ev events.CloudWatchEvent) (Report, error) {
	h.sup.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "supervisor triggered",
		slog.String("eventId", ev.ID), slog.Time("eventTime", ev.Time), slog.String("detailType", ev.DetailType))
	return h.sup.RunOnce(ctx)
}
