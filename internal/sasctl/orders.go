package sasctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

func (a *App) submit(ctx context.Context, args []string) error {
	fs := a.flags("submit")
	id := fs.String("order", "", "order id")
	wf := fs.String("workflow", "", "workflow name")
	payload := fs.String("payload", "", "JSON object")
	replyTo := fs.String("reply-to", "", "queue URL for status messages")
	prio := fs.Int("priority", 0, "0-9")
	startAt := fs.String("start-at", "", "when the order starts, RFC 3339 (2026-12-01T09:00:00+01:00) or a duration from now (72h); default: at once")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if a.IntakeQueueURL == "" {
		return errors.New("submit: SAS_INTAKE_QUEUE_URL is not set")
	}
	in := sas.Intake{V: sas.MessageVersion, OrderID: *id, Workflow: *wf, ReplyTo: *replyTo, Priority: *prio}
	if *payload != "" {
		in.Payload = json.RawMessage(*payload)
	}
	if *startAt != "" {
		at, err := parseStartAt(*startAt, a.Clock.Now())
		if err != nil {
			return fmt.Errorf("submit: --start-at %q: %w", *startAt, err)
		}
		in.StartAt = &at
	}
	// Validate the shape here so an operator's typo is caught before it is
	// sent; the scheduler validates again against what it has registered.
	if _, err := sas.ParseIntake([]byte(sas.Encode(in)), sas.IntakeRules{ReplyToAllowed: func(string) bool { return true }}); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	if err := a.send(ctx, a.IntakeQueueURL, sas.Encode(in)); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	if in.StartAt != nil {
		fmt.Fprintf(a.Out, "submitted %s (workflow %s), to start at %s\n", in.OrderID, in.Workflow, in.StartAt.Format(time.RFC3339))
		return nil
	}
	fmt.Fprintf(a.Out, "submitted %s (workflow %s)\n", in.OrderID, in.Workflow)
	return nil
}

// parseStartAt reads --start-at: a time in RFC 3339, or a duration from now.
func parseStartAt(s string, now time.Time) (time.Time, error) {
	if at, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return at.UTC(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, errors.New("neither a time in RFC 3339 nor a positive duration")
	}
	return now.Add(d).UTC(), nil
}

func (a *App) send(ctx context.Context, url, body string) error {
	res, err := a.Queue.Send(ctx, sas.SendParams{QueueURL: url, Messages: []sas.OutboundMessage{{ID: "m", Body: body}}})
	if err != nil {
		return err
	}
	if len(res.Failed) > 0 {
		return fmt.Errorf("sending to %s: %s: %s", url, res.Failed[0].Code, res.Failed[0].Message)
	}
	return nil
}

func (a *App) show(ctx context.Context, args []string) error {
	fs := a.flags("show")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("show needs one order id: %w", ErrUsage)
	}
	v, err := a.Store.GetOrder(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("show %s: %w", pos[0], err)
	}
	// The order's stored definition says which steps have an undo, so its
	// state reads right (sas.OrderView.Def).
	v = sas.NewDefinitions(nil, a.Store).Attach(ctx, v)
	if *asJSON {
		enc := json.NewEncoder(a.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	now := a.Clock.Now()
	fmt.Fprintf(a.Out, "order %s  workflow %s  state %s  created %s\n", v.Order.OrderID, v.Order.Workflow, v.State(), v.Order.CreatedAt.Format(time.RFC3339))
	if v.Order.ReplyTo != "" {
		fmt.Fprintf(a.Out, "replyTo %s\n", v.Order.ReplyTo)
	}
	if len(v.Order.Payload) > 0 {
		fmt.Fprintf(a.Out, "payload %s\n", v.Order.Payload)
	}
	tw := tabwriter.NewWriter(a.Out, 2, 4, 2, ' ', 0)
	graph := v.Order.After != nil // branches: each step's predecessors in a column of their own
	head := "\nSTEP\tNAME\tSTATE\tATTEMPT\tFAILURES\tLOCKED BY\tCOMPLETE BY\tLAST ERROR"
	if graph {
		head = "\nSTEP\tNAME\tAFTER\tSTATE\tATTEMPT\tFAILURES\tLOCKED BY\tCOMPLETE BY\tLAST ERROR"
	}
	fmt.Fprintln(tw, head)
	for _, r := range v.Steps {
		state := string(r.ProcessState)
		if r.Rejected {
			state += " (rejected)" // a business outcome, not an incident
		}
		name := r.StepName
		if graph {
			name += "\t" + dash(strings.Join(v.Follows(r.Step), ","))
		}
		why := r.LastError
		if r.ProcessState == sas.Skipped {
			why = r.LastHistoryReason() // its condition, false (docs/workflows.md, "Choices")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.Step, name, state, r.Attempt, r.FailureCount,
			dash(r.LockedBy), deadline(r.CompleteBy, now), dash(why))
	}
	tw.Flush()
	if err := a.showElements(ctx, v); err != nil {
		return err
	}
	// What each step returned, as recorded: what the steps after it and
	// its undo saw (docs/workflows.md, "Results").
	if results := sas.ResultsBefore(v.Steps, len(v.Steps)); len(results) > 0 {
		fmt.Fprintln(a.Out, "\nresults:")
		for _, r := range v.Steps {
			if len(r.Result) > 0 {
				fmt.Fprintf(a.Out, "  %s\t%s\n", r.StepName, r.Result)
			}
		}
	}
	fmt.Fprintln(a.Out, "\nhistory:")
	tw = tabwriter.NewWriter(a.Out, 2, 4, 2, ' ', 0)
	for _, h := range v.History {
		from := string(h.From)
		if from == "" {
			from = "(new)"
		}
		fmt.Fprintf(tw, "  %s\tstep %d\t%s -> %s\tattempt %d\t%s\t%s\n", h.At.Format("15:04:05.000"), h.Step, from, h.To, h.Attempt, h.Actor, h.Reason)
	}
	return tw.Flush()
}

// showElements prints each fan-out step's elements (docs/workflows.md,
// "Fan-out over a list"): how many are done of how many, how many are in
// each state, then one line per element started.
func (a *App) showElements(ctx context.Context, v sas.OrderView) error {
	now := a.Clock.Now()
	for _, r := range v.Steps {
		if !v.IsFanOut(r) {
			continue
		}
		elements, err := sas.AllElements(ctx, a.Store, r.Key())
		if err != nil {
			return err
		}
		fmt.Fprintf(a.Out, "\nelements of %s: %d/%d done", r.StepName, r.ForEachDone, r.ForEachCount)
		if states := ElementStates(elements); states != "" {
			fmt.Fprintf(a.Out, " (%s)", states)
		}
		fmt.Fprintln(a.Out)
		tw := tabwriter.NewWriter(a.Out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  INDEX\tSTATE\tATTEMPT\tCOMPLETE BY\tITEM\tRESULT OR LAST ERROR")
		for _, e := range elements {
			_, i := sas.ElementOf(e.Step)
			out := string(e.Result)
			if e.LastError != "" {
				out = e.LastError
			}
			fmt.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%s\n", i, e.ProcessState, e.Attempt, deadline(e.CompleteBy, now), dash(string(e.Item)), dash(out))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func deadline(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if d := t.Sub(now).Round(time.Second); d >= 0 {
		return fmt.Sprintf("%s (in %s)", t.Format("15:04:05"), d)
	} else {
		return fmt.Sprintf("%s (%s ago, expired)", t.Format("15:04:05"), -d)
	}
}

func (a *App) list(ctx context.Context, args []string) error {
	fs := a.flags("list")
	limit := fs.Int("limit", 50, "records to show")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("list needs a state: %w", ErrUsage)
	}
	state, err := sas.ParseState(pos[0])
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	recs, err := a.collect(ctx, state, *limit)
	if err != nil {
		return fmt.Errorf("list %s: %w", state, err)
	}
	now := a.Clock.Now()
	tw := tabwriter.NewWriter(a.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ORDER\tSTEP\tNAME\tATTEMPT\tFAILURES\tDUE/SINCE\tLAST ERROR")
	for _, r := range recs {
		at, _ := r.Indexed()
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\n", r.OrderID, r.Step, r.StepName, r.Attempt, r.FailureCount, deadline(at, now), dash(r.LastError))
	}
	tw.Flush()
	fmt.Fprintf(a.Out, "%d %s step(s)\n", len(recs), state)
	return nil
}

// collect pages through one state up to limit records, oldest first.
func (a *App) collect(ctx context.Context, state sas.ProcessState, limit int) ([]sas.StepRecord, error) {
	var out []sas.StepRecord
	cursor := ""
	for {
		page, err := a.Store.ListByState(ctx, sas.ListByStateParams{State: state, Limit: min(limit, 100), Cursor: cursor})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Records...)
		if cursor = page.NextCursor; cursor == "" || len(out) >= limit {
			break
		}
	}
	sas.SortByIndexTime(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
