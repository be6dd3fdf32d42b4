package alerts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/sas-go/sas/internal/sas"
)

var (
	_ sas.Alerter = (*Log)(nil)
	_ sas.Alerter = (*Multi)(nil)
	_ sas.Alerter = (*Recorder)(nil)
)

// Log writes alerts to a structured log at error level. It never fails, which
// is why deployments keep it alongside the remote alerters: when SNS and
// EventBridge are both unreachable, the alert is still in the logs.
type Log struct {
	logger *slog.Logger
}

// NewLog returns a log alerter; a nil logger means slog.Default().
func NewLog(logger *slog.Logger) *Log {
	if logger == nil {
		logger = slog.Default()
	}
	return &Log{logger: logger}
}

// Alert logs one alert.
func (l *Log) Alert(ctx context.Context, a sas.Alert) error {
	b := NewBody(a)
	l.logger.LogAttrs(ctx, slog.LevelError, "operator alert: "+b.Summary,
		slog.String("alert", DetailType),
		slog.String("order", b.OrderID),
		slog.Int("step", b.Step),
		slog.String("stepName", b.StepName),
		slog.String("state", string(b.State)),
		slog.String("reason", b.Reason),
		slog.Int("attempts", b.Attempts),
		slog.Int("failures", b.Failures),
		slog.Time("time", b.Time),
		slog.String("source", b.Source),
		slog.String("inspect", b.Inspect),
		slog.String("alertId", b.ID),
	)
	return nil
}

// Multi fans an alert out to several alerters. One failing (or hanging until
// the context ends) does not keep the alert from the others; the failures
// come back joined.
type Multi struct {
	alerters []sas.Alerter
}

// NewMulti returns a fan-out over the non-nil alerters given.
func NewMulti(alerters ...sas.Alerter) *Multi {
	m := &Multi{}
	for _, a := range alerters {
		if a != nil {
			m.alerters = append(m.alerters, a)
		}
	}
	return m
}

// Alert sends the alert to every alerter at once.
func (m *Multi) Alert(ctx context.Context, a sas.Alert) error {
	errs := make([]error, len(m.alerters))
	var wg sync.WaitGroup
	for i, al := range m.alerters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := al.Alert(ctx, a); err != nil {
				errs[i] = fmt.Errorf("alerter %d of %d (%T): %w", i+1, len(m.alerters), al, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...) // nil when every one succeeded
}

// Recorder keeps alerts in memory, for tests and the local runtime. It is
// safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	alerts []sas.Alert
	fail   func(sas.Alert) error
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{} }

// FailWith makes Alert return f's error (and record nothing) whenever f
// returns one; nil restores normal recording.
func (r *Recorder) FailWith(f func(sas.Alert) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = f
}

// Alert records the alert.
func (r *Recorder) Alert(_ context.Context, a sas.Alert) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(a); err != nil {
			return fmt.Errorf("recording alert for order %s step %d: %w", a.OrderID, a.Step, err)
		}
	}
	r.alerts = append(r.alerts, a)
	return nil
}

// Alerts returns a copy of the recorded alerts, oldest first.
func (r *Recorder) Alerts() []sas.Alert {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sas.Alert(nil), r.alerts...)
}

// Reset forgets the recorded alerts.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.alerts = nil
}
