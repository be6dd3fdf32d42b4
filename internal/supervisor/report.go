package supervisor

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/sas-go/sas/internal/metrics"
	"github.com/sas-go/sas/internal/sas"
)

// Stop says why a run ended.
type Stop string

const (
	StopDrained  Stop = "drained"  // nothing due was left that this run had not looked at
	StopBudget   Stop = "budget"   // the time budget ran out; the next run continues
	StopCanceled Stop = "canceled" // the context ended
)

// StateCounts are one state's share of a run.
type StateCounts struct {
	Due       int `json:"due"`
	Waited    int `json:"waited"`
	Rescued   int `json:"rescued"`
	GaveUp    int `json:"gaveUp"`
	LostRaces int `json:"lostRaces"`
	Errors    int `json:"errors"`
}

// Report is what one RunOnce did (docs/pattern.md §5: the age of the oldest stuck
// step, rescues, failures).
type Report struct {
	Actor   string        `json:"actor"`
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"-"` // by the Clock
	Stopped Stop          `json:"stopped"`
	// Pages counts FindDue queries, the empty ones that end a state included.
	Pages int `json:"pages"`
	// DueFound counts the due records the run decided on (each once).
	DueFound int `json:"dueFound"`
	// Waited counts held steps past their deadline whose lease was moved to
	// their request's delivery horizon without a failure, no pick-up being
	// reported (docs/protocol.md, "Deadlines start at pick-up"); Backlog is
	// what the queues held then, for the record only (-1 or 0 when not read).
	Waited  int `json:"waited"`
	Backlog int `json:"backlog"`
	Rescued int `json:"rescued"`
	// NothingRan counts, of Rescued, the re-drives of steps of which no
	// attempt ran: a step handed back that no scheduler claimed by its
	// pick-up deadline, a request lost before its pick-up. They count no
	// failure (docs/protocol.md, "A step never claimed has not failed");
	// the rest of Rescued are attempts that ran and went quiet.
	NothingRan int `json:"nothingRan"`
	// Fired counts wait steps found due, whose end the run asked of the
	// scheduler (docs/protocol.md, "Wait steps").
	Fired int `json:"fired,omitempty"`
	// Held counts due steps left alone because their agent is paused.
	Held   int `json:"held,omitempty"`
	GaveUp int `json:"gaveUp"`
	// LostRaces counts fenced writes that found the record changed since the
	// index showed it: another supervisor, a late reply, a claim. Normal.
	LostRaces int `json:"lostRaces"`
	// Errors counts everything that went wrong, including the two below.
	Errors int `json:"errors"`
	// SendFailures: retry or compensate messages not sent. A rescued step
	// stays Pending with a pick-up deadline, so a later sweep re-drives it.
	SendFailures int `json:"sendFailures"`
	// AlertFailures: alerts the Alerter reported as not delivered.
	AlertFailures int `json:"alertFailures"`

	// Owed effects of give-ups (docs/decisions.md, "A give-up's effects are
	// owed until sent"): Redriven counts give-ups whose effects a run found
	// still owed and sent again; Settled those whose effects all went out
	// and were cleared; Owed those left owed (a send or alert failed, or the
	// settle write did), for a later run.
	Redriven int `json:"redriven"`
	Settled  int `json:"settled"`
	Owed     int `json:"owed"`
	// Awaiting counts give-ups whose alert and compensate request went out
	// this run: the request stays owed until the compensation it asks for
	// starts (the scheduler settles it), and is sent again at
	// Config.CompensateRecheck if it has not.
	Awaiting int `json:"awaiting"`
	// OwedOldestAge is how long ago the oldest give-up among those the
	// run left owed was made (its UpdatedAt, which stays while it owes);
	// zero when the run left nothing owed.
	OwedOldestAge time.Duration `json:"-"`
	// OldestStuckAge is now minus the oldest DueAt among the due records the
	// run saw; zero when nothing was due.
	OldestStuckAge time.Duration                    `json:"-"`
	ByState        map[sas.ProcessState]StateCounts `json:"byState"`
	Reads          sas.ReadStats                    `json:"reads"`
}

// MarshalJSON writes durations as seconds, for people reading the Lambda
// result or the log.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report // no methods: no recursion
	return json.Marshal(struct {
		plain
		ElapsedSeconds        float64 `json:"elapsedSeconds"`
		OldestStuckAgeSeconds float64 `json:"oldestStuckAgeSeconds"`
		OwedOldestAgeSeconds  float64 `json:"owedOldestAgeSeconds"`
	}{plain(r), r.Elapsed.Seconds(), r.OldestStuckAge.Seconds(), r.OwedOldestAge.Seconds()})
}

func (r *Report) count(state sas.ProcessState, f func(*StateCounts)) {
	c := r.ByState[state]
	f(&c)
	r.ByState[state] = c
}

func (r *Report) observeDue(now, dueAt time.Time) {
	if age := now.Sub(dueAt); age > r.OldestStuckAge {
		r.OldestStuckAge = age
	}
}

// log writes the report as one structured line.
func (r Report) log(ctx context.Context, logger *slog.Logger) {
	level := slog.LevelInfo
	if r.Errors > 0 {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("actor", r.Actor),
		slog.String("stopped", string(r.Stopped)),
		slog.Float64("elapsedSeconds", r.Elapsed.Seconds()),
		slog.Int("pages", r.Pages),
		slog.Int("dueFound", r.DueFound),
		slog.Int("waited", r.Waited),
		slog.Int("backlog", r.Backlog),
		slog.Int("rescued", r.Rescued),
		slog.Int("nothingRan", r.NothingRan),
		slog.Int("gaveUp", r.GaveUp),
		slog.Int("lostRaces", r.LostRaces),
		slog.Int("errors", r.Errors),
		slog.Int("sendFailures", r.SendFailures),
		slog.Int("alertFailures", r.AlertFailures),
		slog.Float64("oldestStuckAgeSeconds", r.OldestStuckAge.Seconds()),
		slog.Int("owed", r.Owed),
		slog.Int("awaiting", r.Awaiting),
		slog.Float64("owedOldestAgeSeconds", r.OwedOldestAge.Seconds()),
		slog.Int("readRequests", r.Reads.Requests),
		slog.Int("itemsRead", r.Reads.ItemsRead),
	}
	for _, s := range sweptStates {
		c := r.ByState[s]
		attrs = append(attrs, slog.Group(string(s),
			slog.Int("due", c.Due), slog.Int("waited", c.Waited), slog.Int("rescued", c.Rescued), slog.Int("gaveUp", c.GaveUp),
			slog.Int("lostRaces", c.LostRaces), slog.Int("errors", c.Errors)))
	}
	logger.LogAttrs(ctx, level, "supervisor sweep", attrs...)
}

// The metrics are published as CloudWatch Embedded Metric Format by the
// encoder every actor shares (internal/metrics, which says why EMF). The
// metrics have no dimensions (an empty dimension set), which is what the
// OldestStuckStep and OwedTooLong alarms in infra/ read; the line's other
// members (actor, counts) are log properties, not metrics.

// emf renders the report as one EMF line, newline included.
func (r Report) emf() []byte {
	n := func(name string, v float64) metrics.Metric {
		return metrics.Metric{Name: name, Unit: metrics.Catalog[name], Value: v}
	}
	return metrics.Encode(metrics.Line{
		Time: r.Started,
		// Zero is published too: an alarm then sees "nothing stuck" rather
		// than missing data.
		Metrics: []metrics.Metric{
			n(metrics.OldestStuckStepAge, r.OldestStuckAge.Seconds()),
			n(metrics.Rescues, float64(r.Rescued)),
			n(metrics.Waits, float64(r.Waited)),
			n(metrics.GiveUps, float64(r.GaveUp)),
			n(metrics.LostRaces, float64(r.LostRaces)),
			// Held: due steps of paused agents left alone (docs/console.md).
			n(metrics.Held, float64(r.Held)),
			n(metrics.OwedEffects, float64(r.Owed)),
			n(metrics.OwedOldestAge, r.OwedOldestAge.Seconds()),
		},
		Properties: map[string]any{"actor": r.Actor, "stopped": r.Stopped, "dueFound": r.DueFound, "errors": r.Errors},
	})
}
