// Package schedules runs a deployment's schedules where EventBridge
// Scheduler does not: the dev server's loop (docs/schedules.md, "Locally").
// A schedules file declares them as the CDK construct does; Next reads
// their EventBridge Scheduler expressions with github.com/robfig/cron/v3;
// Trigger is the intake EventBridge Scheduler sends for a run, so a run's
// order id is derived the same way (sas.RunOrderID) on both.
package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sas-go/sas/internal/sas"
)

// Schedule is one schedule, as infra/sascdk.Schedule declares it.
type Schedule struct {
	Name       string          `json:"name"`
	Expression string          `json:"expression"`
	TimeZone   string          `json:"timeZone,omitempty"`
	Workflow   string          `json:"workflow"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	Overlap    sas.Overlap     `json:"overlap,omitempty"`
	// FlexibleWindowMinutes is the construct's window: locally a run is
	// sent at its scheduled time.
	FlexibleWindowMinutes int `json:"flexibleWindowMinutes,omitempty"`

	spec cron.Schedule
}

// File is a schedules file: {"schedules": [...]}, or the bare list the
// stack's Schedules output holds.
type File struct {
	Schedules []Schedule `json:"schedules"`
}

// Load reads and checks a schedules file.
func Load(path string) ([]Schedule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading schedules: %w", err)
	}
	return Parse(path, b)
}

// Parse checks a schedules file's content (file names it in errors).
func Parse(file string, b []byte) ([]Schedule, error) {
	var f File
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if strings.HasPrefix(strings.TrimSpace(string(b)), "[") {
		err := dec.Decode(&f.Schedules)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	} else if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	seen := map[string]bool{}
	var errs []error
	for i := range f.Schedules {
		sc := &f.Schedules[i]
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: schedules[%d] %q: "+format, append([]any{file, i, sc.Name}, args...)...))
		}
		switch {
		case !sas.ValidScheduleName(sc.Name):
			bad("name must be 1-64 characters of A-Z a-z 0-9 _ -")
		case seen[sc.Name]:
			bad("another schedule has this name")
		}
		seen[sc.Name] = true
		if sc.Workflow == "" {
			bad("workflow: required")
		}
		if !sc.Overlap.Valid() {
			bad("overlap %q: want allow or skip", sc.Overlap)
		}
		spec, err := parseExpression(sc.Expression, sc.TimeZone)
		if err != nil {
			bad("%v", err)
		}
		sc.spec = spec
	}
	return f.Schedules, errors.Join(errs...)
}

// Configs are the schedules as the scheduler knows them (SAS_SCHEDULES):
// locally any sender may trigger them.
func Configs(ss []Schedule) map[string]sas.ScheduleConfig {
	if len(ss) == 0 {
		return nil
	}
	m := map[string]sas.ScheduleConfig{}
	for _, sc := range ss {
		m[sc.Name] = sas.ScheduleConfig{Overlap: sc.Overlap}
	}
	return m
}

var (
	cronExpr = regexp.MustCompile(`^cron\(([^()]+)\)$`)
	rateExpr = regexp.MustCompile(`^rate\(([1-9][0-9]*) (minute|minutes|hour|hours|day|days)\)$`)
)

// parseExpression reads EventBridge Scheduler's cron(min hour
// day-of-month month day-of-week year) or rate(n unit). Its days of the
// week count 1-7 from Sunday (robfig/cron: 0-6); L, W and # are not read.
func parseExpression(expr, tz string) (cron.Schedule, error) {
	if tz == "" {
		tz = "UTC"
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return nil, fmt.Errorf("time zone %q: %w", tz, err)
	}
	if m := rateExpr.FindStringSubmatch(expr); m != nil {
		n, _ := strconv.Atoi(m[1])
		unit := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[strings.TrimSuffix(m[2], "s")]
		return cron.Every(time.Duration(n) * unit), nil
	}
	m := cronExpr.FindStringSubmatch(expr)
	if m == nil {
		return nil, fmt.Errorf("expression %q: want cron(<minutes> <hours> <day-of-month> <month> <day-of-week> <year>) or rate(<n> minutes|hours|days)", expr)
	}
	f := strings.Fields(m[1])
	if len(f) != 6 {
		return nil, fmt.Errorf("expression %q: a cron expression has 6 fields", expr)
	}
	if f[5] != "*" && f[5] != "?" {
		return nil, fmt.Errorf("expression %q: locally the year must be *", expr)
	}
	if strings.ContainsAny(strings.Join(f[:5], " "), "LW#") {
		return nil, fmt.Errorf("expression %q: L, W and # are not read locally", expr)
	}
	dow := regexp.MustCompile(`[0-9]+`).ReplaceAllStringFunc(f[4], func(d string) string {
		n, _ := strconv.Atoi(d)
		return strconv.Itoa((n + 6) % 7) // 1 (SUN) → 0
	})
	spec, err := cron.ParseStandard(fmt.Sprintf("CRON_TZ=%s %s %s %s %s %s", tz, f[0], f[1], f[2], f[3], dow))
	if err != nil {
		return nil, fmt.Errorf("expression %q: %w", expr, err)
	}
	return spec, nil
}

// Next is the schedule's first run after t.
func (sc Schedule) Next(t time.Time) time.Time {
	if sc.spec == nil {
		return time.Time{}
	}
	return sc.spec.Next(t).UTC()
}

// Trigger is the intake EventBridge Scheduler sends for the run scheduled
// at at (the construct's target input, with its placeholder filled in).
func (sc Schedule) Trigger(at time.Time) string {
	return sas.Encode(sas.Intake{V: sas.MessageVersion, Kind: sas.KindIntake, Workflow: sc.Workflow, Payload: sc.Payload,
		Schedule: sc.Name, ScheduledAt: at.UTC().Format(time.RFC3339)})
}

// Loop sends each schedule's runs to the intake queue as they fall due:
// the dev server's stand-in for EventBridge Scheduler. RunOnce is one
// tick; the server calls it on a ticker.
type Loop struct {
	Schedules []Schedule
	Queue     sas.Queue
	IntakeURL string
	next      map[string]time.Time
}

// RunOnce sends every run due at now (each schedule's runs since the last
// tick, the first tick arming each schedule at its next run after now) and
// returns the runs it sent.
func (l *Loop) RunOnce(ctx context.Context, now time.Time) ([]string, error) {
	if l.next == nil {
		l.next = map[string]time.Time{}
		for _, sc := range l.Schedules {
			l.next[sc.Name] = sc.Next(now)
		}
		return nil, nil
	}
	var sent []string
	for _, sc := range l.Schedules {
		for at := l.next[sc.Name]; !at.IsZero() && !at.After(now); at = l.next[sc.Name] {
			res, err := l.Queue.Send(ctx, sas.SendParams{QueueURL: l.IntakeURL, Messages: []sas.OutboundMessage{{ID: "0", Body: sc.Trigger(at)}}})
			if err == nil && len(res.Failed) > 0 {
				err = fmt.Errorf("%s: %s", res.Failed[0].Code, res.Failed[0].Message)
			}
			if err != nil {
				return sent, fmt.Errorf("sending the run of schedule %s at %s: %w", sc.Name, at.Format(time.RFC3339), err)
			}
			sent = append(sent, sas.RunOrderID(sc.Name, at))
			l.next[sc.Name] = sc.Next(at)
		}
	}
	return sent, nil
}
