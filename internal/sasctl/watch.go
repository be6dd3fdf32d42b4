package sasctl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// Snapshot is one refresh of the live view.
type Snapshot struct {
	Counts      map[sas.ProcessState]int
	Overdue     int           // Processing/Pending/Compensating past their deadline
	OldestStuck time.Duration // age of the oldest overdue deadline
}

// Snap counts the indexed states (up to 10,000 each) and the overdue steps.
func (a *App) Snap(ctx context.Context) (Snapshot, error) {
	s := Snapshot{Counts: map[sas.ProcessState]int{}}
	now := a.Clock.Now()
	for _, st := range []sas.ProcessState{sas.Pending, sas.Processing, sas.Compensating, sas.Error, sas.CompensationFailed} {
		recs, err := a.collect(ctx, st, 10_000)
		if err != nil {
			return s, err
		}
		s.Counts[st] = len(recs)
		for _, r := range recs {
			if sas.Due(r, now) {
				s.Overdue++
				if age := now.Sub(r.DueAt); age > s.OldestStuck {
					s.OldestStuck = age
				}
			}
		}
	}
	return s, nil
}

func (a *App) watch(ctx context.Context, args []string) error {
	fs := a.flags("watch")
	interval := fs.Duration("interval", 2*time.Second, "refresh interval")
	count := fs.Int("count", 0, "stop after this many refreshes (0: until interrupted)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	for i := 0; *count == 0 || i < *count; i++ {
		s, err := a.Snap(ctx)
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		var parts []string
		for _, st := range []sas.ProcessState{sas.Pending, sas.Processing, sas.Compensating, sas.Error, sas.CompensationFailed} {
			parts = append(parts, fmt.Sprintf("%s %d", st, s.Counts[st]))
		}
		fmt.Fprintf(a.Out, "%s  %s  overdue %d  oldest stuck %s\n", a.Clock.Now().Format("15:04:05"), strings.Join(parts, "  "), s.Overdue, s.OldestStuck.Round(time.Second))
		if *count != 0 && i == *count-1 {
			break
		}
		if err := a.Sleep(ctx, *interval); err != nil {
			return nil // interrupted: a normal way to leave a live view
		}
	}
	return nil
}
