package sas

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sizing"
)

// Schedules (docs/schedules.md). A schedule's trigger (EventBridge Scheduler
// in the cloud, the dev server's cron locally, the test kit's FireSchedule)
// sends an intake naming the schedule and the time the run was scheduled
// for. The run's order id is a function of the two (RunOrderID), so every
// copy of one trigger (a redelivery, the trigger's own retry) is the same
// order, which the intake's submit makes once.

// Overlap is what a schedule does with a run that falls due while its
// previous run is still in flight (Temporal's ScheduleOverlapPolicy).
type Overlap string

const (
	// OverlapAllow starts every run, whatever is in flight (Temporal's
	// ALLOW_ALL). The default.
	OverlapAllow Overlap = sizing.OverlapAllow
	// OverlapSkip skips a run while the schedule's previous run has not
	// settled (Temporal's SKIP): the skipped run is recorded in the
	// schedule's state (ScheduleState), never started.
	OverlapSkip Overlap = sizing.OverlapSkip
)

// Valid reports whether o is a known policy ("" is OverlapAllow).
func (o Overlap) Valid() bool { return o == "" || o == OverlapAllow || o == OverlapSkip }

// ScheduleConfig is what the scheduler knows of one schedule of the
// deployment: its overlap policy and who may trigger it.
type ScheduleConfig struct {
	Overlap Overlap `json:"overlap,omitempty"`
	// Senders are the principals (SQS SenderId's role or user id, as
	// SubmitterOf reads it) whose intakes may start runs of the schedule:
	// the schedule's own role. Empty: any sender, as where SQS names none
	// (the local emulators, the test kit).
	Senders []string `json:"senders,omitempty"`
}

// ValidScheduleName reports whether name is a legal schedule name
// (sizing.ValidScheduleName, which the construct checks too): 1–64
// characters of A-Z a-z 0-9 _ -, which leaves a run's order id (RunOrderID)
// under 128 characters.
func ValidScheduleName(name string) bool { return sizing.ValidScheduleName(name) }

// RunOrderID is the order id of the run of schedule name scheduled for at:
// "<name>-<at in RFC 3339, UTC, to the second>", as EventBridge Scheduler's
// <aws.scheduler.scheduled-time> writes it ("2026-11-28T02:00:00Z").
func RunOrderID(name string, at time.Time) string {
	return name + "-" + at.UTC().Truncate(time.Second).Format(time.RFC3339)
}

// ParseScheduledAt reads a run's scheduled time, RFC 3339.
func ParseScheduledAt(v string) (time.Time, error) {
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time (2026-11-28T02:00:00Z)", v)
	}
	return at.UTC().Truncate(time.Second), nil
}

// RunOf reads id as a run's order id of one of the schedules known ("" and
// false when it is none): a schedule's run ids are reserved to its trigger.
func RunOf(id string, known func(name string) bool) (string, bool) {
	// The time is the last 20 characters: "2006-01-02T15:04:05Z".
	const stamp = len("2006-01-02T15:04:05Z")
	if len(id) < stamp+2 || id[len(id)-stamp-1] != '-' {
		return "", false
	}
	name, at := id[:len(id)-stamp-1], id[len(id)-stamp:]
	if !strings.HasSuffix(at, "Z") || !known(name) {
		return "", false
	}
	if _, err := time.Parse(time.RFC3339, at); err != nil {
		return "", false
	}
	return name, true
}

// checkRun validates an intake's schedule fields and fills in, or checks,
// its order id (called by ParseIntake).
func (in *Intake) checkRun() error {
	if in.Schedule == "" {
		if in.ScheduledAt != "" {
			return &ValidationError{Field: "scheduledAt", Reason: "only a schedule's run has one: name the schedule"}
		}
		return nil
	}
	if !ValidScheduleName(in.Schedule) {
		return &ValidationError{Field: "schedule", Reason: "must be 1-64 characters of A-Z a-z 0-9 _ -"}
	}
	if in.ScheduledAt == "" {
		return &ValidationError{Field: "scheduledAt", Reason: "required for a schedule's run"}
	}
	at, err := ParseScheduledAt(in.ScheduledAt)
	if err != nil {
		return &ValidationError{Field: "scheduledAt", Reason: err.Error()}
	}
	id := RunOrderID(in.Schedule, at)
	switch in.OrderID {
	case "":
		in.OrderID = id
	case id:
	default:
		return &ValidationError{Field: "orderId", Reason: fmt.Sprintf("a run of schedule %s scheduled for %s is order %s", in.Schedule, in.ScheduledAt, id)}
	}
	in.ScheduledAt = at.Format(time.RFC3339)
	return nil
}

// RunClaim makes a submission a schedule's run: the schedule's state
// records it in the same atomic write as the order. With Exclusive (the
// skip policy) the write is conditioned on the schedule's running order
// still being Prev ("" for none ever): two triggers that both read the
// previous run settled cannot both start (ErrLostRace for the loser, whose
// redelivery reads the winner in flight and skips).
type RunClaim struct {
	Schedule    string
	ScheduledAt time.Time
	Prev        string
	Exclusive   bool
}

// ScheduleState is what the store keeps of a schedule's runs.
type ScheduleState struct {
	Name string
	// Running is the order id of the run started last (in flight or not:
	// its order says), LastRunAt the time it was scheduled for.
	Running   string
	LastRunAt time.Time
	Runs      int // runs started
	// Skipped counts the runs skipped by the overlap policy; LastSkipped
	// is the last one's order id (never created), LastSkippedAt its time.
	Skipped       int
	LastSkipped   string
	LastSkippedAt time.Time
}

// SkipRunParams records a skipped run. Recording the same run again (a
// redelivered trigger) changes nothing.
type SkipRunParams struct {
	Schedule    string
	OrderID     string
	ScheduledAt time.Time
}

// ScheduleStore keeps the schedules' states (docs/schedules.md).
type ScheduleStore interface {
	// GetSchedule reads a schedule's state (a consistent read); a schedule
	// that never ran nor skipped is ErrNotFound.
	GetSchedule(ctx context.Context, name string) (ScheduleState, error)
	SkipRun(ctx context.Context, p SkipRunParams) (ScheduleState, error)
}

// Check validates a RunClaim before any write.
func (c *RunClaim) Check(orderID string) error {
	if c == nil {
		return nil
	}
	if !ValidScheduleName(c.Schedule) {
		return &ValidationError{Field: "schedule", Reason: fmt.Sprintf("%q is not a schedule name", c.Schedule)}
	}
	if c.ScheduledAt.IsZero() || RunOrderID(c.Schedule, c.ScheduledAt) != orderID {
		return &ValidationError{Field: "orderId", Reason: fmt.Sprintf("%s is not the run of schedule %s scheduled for %s", orderID, c.Schedule, c.ScheduledAt.Format(time.RFC3339))}
	}
	return nil
}

// Check validates a SkipRunParams before any write.
func (p SkipRunParams) Check() error {
	c := RunClaim{Schedule: p.Schedule, ScheduledAt: p.ScheduledAt}
	return c.Check(p.OrderID)
}
