package sasctl

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/schedules"
)

// schedulesCmd lists the schedules a schedules file declares (the dev
// server's, or the stack's Schedules output saved to a file) with, from
// the store, the last run each started (and its order's state), the runs
// started and skipped, and, from the expression, the next run
// (docs/schedules.md).
func (a *App) schedulesCmd(ctx context.Context, args []string) error {
	fs := a.flags("schedules")
	file := fs.String("file", "", "the schedules file (docs/schedules.md), or the stack's Schedules output saved to a file")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return fmt.Errorf("schedules: -file is required: %w", ErrUsage)
	}
	ss, err := schedules.Load(*file)
	if err != nil {
		return err
	}
	now := a.now()
	tw := tabwriter.NewWriter(a.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tEXPRESSION\tOVERLAP\tLAST RUN\tSTATE\tRUNS\tSKIPPED\tLAST SKIPPED\tNEXT RUN")
	for _, sc := range ss {
		st, err := a.Store.GetSchedule(ctx, sc.Name)
		if err != nil && !errors.Is(err, sas.ErrNotFound) {
			return fmt.Errorf("reading schedule %s: %w", sc.Name, err)
		}
		last, state := "-", "-"
		if st.Running != "" {
			last = st.Running
			if v, err := a.Store.GetOrder(ctx, st.Running); err == nil {
				state = string(v.State())
			}
		}
		skipped := "-"
		if st.LastSkipped != "" {
			skipped = st.LastSkipped
		}
		overlap := sc.Overlap
		if overlap == "" {
			overlap = sas.OverlapAllow
		}
		expr := sc.Expression
		if sc.TimeZone != "" && sc.TimeZone != "UTC" {
			expr += " " + sc.TimeZone
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", sc.Name, expr, overlap, last, state, st.Runs, st.Skipped, skipped,
			sc.Next(now).Format(time.RFC3339))
	}
	return tw.Flush()
}
