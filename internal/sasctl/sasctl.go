// Package sasctl is the operator's command line: submit an order, show one
// order with its steps and history, list steps by state, resubmit failed
// steps (one, or in bulk with a dry run), compensate an order, and watch the
// system live. cmd/sasctl wires it to AWS; tests wire it to the in-memory
// store and queue.
package sasctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// App holds what the commands need.
type App struct {
	Store           sas.StateStore
	Queue           sas.Queue
	Clock           sas.Clock
	IntakeQueueURL  string
	ControlQueueURL string
	PickupTimeout   time.Duration
	Actor           string // who is acting, recorded in the history ("operator:<user>")
	Out             io.Writer
	// Sleep waits between live-view refreshes; tests replace it.
	Sleep func(context.Context, time.Duration) error
	// AgentQueues and Mappings, when set, make a pause also switch off the
	// Lambda event source mappings that read the agent's queues (and a
	// resume switch them on): a deployment's agents consume through them.
	AgentQueues sas.AgentQueues
	Mappings    MappingSwitch
}

// MappingSwitch enables or disables the event source mappings reading
// from queues (esm.Switch), naming those it changed.
type MappingSwitch interface {
	Set(ctx context.Context, queueURLs []string, enabled bool) ([]string, error)
}

// Usage is printed on a bad command line.
const Usage = `usage: sasctl [-outputs FILE [-stack NAME] | -stack NAME] <command> [flags]

  The deployment is named by the SAS_* variables (docs/state-store.md), or,
  overriding them, by the stack's outputs: -outputs reads the file
  ` + "`make deploy`" + ` writes (infra/outputs.json), -stack alone asks CloudFormation.

  env        (with -outputs or -stack) print the stack's SAS_* variables as export lines
  submit     -order ID -workflow NAME [-payload JSON] [-reply-to URL] [-priority N]
  show       ORDER_ID [-json]
  list       STATE [-limit N]          (Pending, Processing, Error, Compensating, CompensationFailed)
  resubmit   ORDER_ID [-step N]        send a failed step round again
  resubmit   -all [-dry-run] [-limit N] every step in Error
  compensate ORDER_ID [-reason TEXT]   undo the order's completed steps, newest first
  watch      [-interval 2s] [-count N] live counts per state and the oldest stuck step
  pause      AGENT                     stop consuming the agent's queues; its steps wait, unjudged
  resume     AGENT                     end the pause; the time paused does not count against the steps
  pauses                               list the agents' pauses
  console    [-addr 127.0.0.1:8089] [-read-only] [-remote]   the web console (docs/console.md)

  Without a deployment:
  workflows validate FILE...           check workflow files against workflow/schema.json and as the functions read them
  workflows write [-o FILE] PKG FUNC   write FILE (workflows.json) from PKG.FUNC() []workflow.Workflow, in PKG's module
`

// ErrUsage is returned for a bad command line.
var ErrUsage = errors.New("bad usage")

// Run runs one command.
func (a *App) Run(ctx context.Context, args []string) error {
	if a.Clock == nil {
		a.Clock = sas.SystemClock{}
	}
	if a.PickupTimeout == 0 {
		a.PickupTimeout = time.Minute
	}
	if a.Actor == "" {
		a.Actor = "operator"
	}
	if a.Sleep == nil {
		a.Sleep = func(ctx context.Context, d time.Duration) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
				return nil
			}
		}
	}
	if len(args) == 0 {
		fmt.Fprint(a.Out, Usage)
		return ErrUsage
	}
	cmds := map[string]func(context.Context, []string) error{
		"submit": a.submit, "show": a.show, "list": a.list, "resubmit": a.resubmit,
		"compensate": a.compensate, "watch": a.watch,
		"pause": a.pause, "resume": a.pause, "pauses": a.pauses,
	}
	cmd, ok := cmds[args[0]]
	if args[0] == "resume" {
		cmd = a.resume
	}
	if !ok {
		fmt.Fprint(a.Out, Usage)
		return fmt.Errorf("unknown command %q: %w", args[0], ErrUsage)
	}
	return cmd(ctx, args[1:])
}

func (a *App) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(a.Out)
	return fs
}

// parse allows flags after positional arguments (sasctl show ID -json).
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%v: %w", err, ErrUsage)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func (a *App) submit(ctx context.Context, args []string) error {
	fs := a.flags("submit")
	id := fs.String("order", "", "order id")
	wf := fs.String("workflow", "", "workflow name")
	payload := fs.String("payload", "", "JSON object")
	replyTo := fs.String("reply-to", "", "queue URL for status messages")
	prio := fs.Int("priority", 0, "0-9")
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
	// Validate the shape here so an operator's typo is caught before it is
	// sent; the scheduler validates again against what it has registered.
	if _, err := sas.ParseIntake([]byte(sas.Encode(in)), sas.IntakeRules{ReplyToAllowed: func(string) bool { return true }}); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	if err := a.send(ctx, a.IntakeQueueURL, sas.Encode(in)); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	fmt.Fprintf(a.Out, "submitted %s (workflow %s)\n", in.OrderID, in.Workflow)
	return nil
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
	fmt.Fprintln(tw, "\nSTEP\tNAME\tSTATE\tATTEMPT\tFAILURES\tLOCKED BY\tCOMPLETE BY\tLAST ERROR")
	for _, r := range v.Steps {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", r.Step, r.StepName, r.ProcessState, r.Attempt, r.FailureCount,
			dash(r.LockedBy), deadline(r.CompleteBy, now), dash(r.LastError))
	}
	tw.Flush()
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

func (a *App) resubmit(ctx context.Context, args []string) error {
	fs := a.flags("resubmit")
	step := fs.Int("step", -1, "the step to resubmit (default: every step of the order in Error)")
	all := fs.Bool("all", false, "resubmit every step in Error")
	dry := fs.Bool("dry-run", false, "list what would be resubmitted, change nothing")
	limit := fs.Int("limit", 1000, "at most this many steps with -all")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	var targets []sas.StepRecord
	switch {
	case *all && len(pos) == 0:
		if targets, err = a.collect(ctx, sas.Error, *limit); err != nil {
			return fmt.Errorf("resubmit: %w", err)
		}
	case !*all && len(pos) == 1:
		v, err := a.Store.GetOrder(ctx, pos[0])
		if err != nil {
			return fmt.Errorf("resubmit %s: %w", pos[0], err)
		}
		for _, r := range v.Steps {
			if r.ProcessState == sas.Error && (*step < 0 || r.Step == *step) {
				targets = append(targets, r)
			}
		}
		if len(targets) == 0 {
			return fmt.Errorf("resubmit %s: no step in Error%s: %w", pos[0], stepSuffix(*step), sas.ErrNotFound)
		}
	default:
		return fmt.Errorf("resubmit takes one order id, or -all: %w", ErrUsage)
	}
	var failed, refused int
	for _, r := range targets {
		// The same rule the store applies (sas.CanResubmit), so a dry run
		// shows what the real run will refuse, and why.
		if why := a.refusal(ctx, r); why != nil {
			refused++
			if *dry {
				fmt.Fprintf(a.Out, "would refuse %s step %d (%s): %v\n", r.OrderID, r.Step, r.StepName, why)
			} else {
				fmt.Fprintf(a.Out, "REFUSED %s step %d (%s): %v\n", r.OrderID, r.Step, r.StepName, why)
			}
			continue
		}
		if *dry {
			fmt.Fprintf(a.Out, "would resubmit %s step %d (%s): %s\n", r.OrderID, r.Step, r.StepName, dash(r.LastError))
			continue
		}
		if err := a.resubmitOne(ctx, r); err != nil {
			failed++
			fmt.Fprintf(a.Out, "FAILED %s step %d: %v\n", r.OrderID, r.Step, err)
			continue
		}
		fmt.Fprintf(a.Out, "resubmitted %s step %d (%s)\n", r.OrderID, r.Step, r.StepName)
	}
	verb := "resubmitted"
	if *dry {
		verb = "would resubmit (dry run)"
	}
	if refused == 0 {
		fmt.Fprintf(a.Out, "%s %d step(s), %d failed\n", verb, len(targets)-failed, failed)
	} else {
		fmt.Fprintf(a.Out, "%s %d step(s), %d failed, %d refused\n", verb, len(targets)-failed-refused, failed, refused)
	}
	switch {
	case *dry:
		return nil
	case failed > 0:
		return fmt.Errorf("resubmit: %d of %d failed, %d refused", failed, len(targets), refused)
	case refused > 0:
		return fmt.Errorf("resubmit: %d of %d refused: %w", refused, len(targets), sas.ErrInvalid)
	}
	return nil
}

// refusal says why a step may not be resubmitted (sas.CanResubmit on its
// order as read now), or nil. A read that fails is a refusal too: nothing
// is written without the check.
func (a *App) refusal(ctx context.Context, r sas.StepRecord) error {
	v, err := a.Store.GetOrder(ctx, r.OrderID)
	if err != nil {
		return fmt.Errorf("reading order %s: %w", r.OrderID, err)
	}
	return sas.CanResubmit(v, r.Step)
}

func stepSuffix(step int) string {
	if step < 0 {
		return ""
	}
	return fmt.Sprintf(" at step %d", step)
}

// resubmitOne puts the step back to Pending (fenced on the attempt the
// operator saw) and tells the schedulers. If the message is lost, the step
// is Pending with a pick-up deadline and the supervisor re-drives it.
func (a *App) resubmitOne(ctx context.Context, r sas.StepRecord) error {
	now := a.Clock.Now()
	rec, err := a.Store.Resubmit(ctx, sas.ResubmitParams{Key: r.Key(), Attempt: r.Attempt, Now: now,
		PickupBy: now.Add(a.PickupTimeout), Actor: a.Actor, Reason: "resubmitted by operator"})
	if own, ok := sas.OwnWrite(err, a.Actor, now, sas.Pending, r.Attempt); ok {
		rec, err = own, nil // committed; the SDK's retry lost to it
	}
	if err != nil {
		return err
	}
	if a.ControlQueueURL == "" {
		return errors.New("SAS_CONTROL_QUEUE_URL is not set (the step is Pending; the supervisor will re-drive it)")
	}
	retry := sas.Retry{V: sas.MessageVersion, Kind: sas.KindRetry, OrderID: rec.OrderID, Step: rec.Step, Attempt: rec.Attempt, Reason: "resubmitted by " + a.Actor}
	if err := a.send(ctx, a.ControlQueueURL, sas.Encode(retry)); err != nil {
		return fmt.Errorf("the step is Pending but the retry message failed (the supervisor will re-drive it): %w", err)
	}
	return nil
}

func (a *App) compensate(ctx context.Context, args []string) error {
	fs := a.flags("compensate")
	reason := fs.String("reason", "requested by operator", "why")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("compensate needs one order id: %w", ErrUsage)
	}
	if err := a.CompensateOrder(ctx, pos[0], *reason); err != nil {
		return err
	}
	fmt.Fprintf(a.Out, "asked the scheduler to compensate %s\n", pos[0])
	return nil
}

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

// Refusal says why step r may not be resubmitted now (sas.CanResubmit on
// its order as read now), or nil: the rule every resubmit applies, the
// console's included.
func (a *App) Refusal(ctx context.Context, r sas.StepRecord) error { return a.refusal(ctx, r) }

// ResubmitStep resubmits one step in Error, as `sasctl resubmit` does: the
// fenced write, then the retry on the control queue. Check Refusal first.
func (a *App) ResubmitStep(ctx context.Context, r sas.StepRecord) error {
	if a.PickupTimeout == 0 {
		a.PickupTimeout = time.Minute
	}
	if a.Clock == nil {
		a.Clock = sas.SystemClock{}
	}
	return a.resubmitOne(ctx, r)
}

// CompensateOrder asks the scheduler, on the control queue, to compensate
// an order, as `sasctl compensate` does.
func (a *App) CompensateOrder(ctx context.Context, orderID, reason string) error {
	if _, err := a.Store.GetOrder(ctx, orderID); err != nil {
		return fmt.Errorf("compensate %s: %w", orderID, err)
	}
	if a.ControlQueueURL == "" {
		return errors.New("compensate: SAS_CONTROL_QUEUE_URL is not set")
	}
	msg := sas.Compensate{V: sas.MessageVersion, Kind: sas.KindCompensate, OrderID: orderID, Reason: reason, Actor: a.Actor}
	if err := a.send(ctx, a.ControlQueueURL, sas.Encode(msg)); err != nil {
		return fmt.Errorf("compensate %s: %w", orderID, err)
	}
	return nil
}

func (a *App) pauseStore() (sas.PauseStore, error) {
	ps, ok := a.Store.(sas.PauseStore)
	if !ok {
		return nil, fmt.Errorf("the store (%T) keeps no pauses", a.Store)
	}
	return ps, nil
}

// pause pauses an agent (docs/console.md, "Pausing an agent"): the pause is
// a record in the state table that the supervisor and the local pollers
// read. In a deployment, disable the agent's event source mappings too
// (the console's docs say how).
func (a *App) pause(ctx context.Context, args []string) error {
	return a.pauseOrResume(ctx, "pause", args)
}

func (a *App) resume(ctx context.Context, args []string) error {
	return a.pauseOrResume(ctx, "resume", args)
}

func (a *App) pauseOrResume(ctx context.Context, verb string, args []string) error {
	pos, err := parse(a.flags(verb), args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%s needs one agent name: %w", verb, ErrUsage)
	}
	var got sas.AgentPause
	var changed []string
	if verb == "pause" {
		got, changed, err = a.PauseAgent(ctx, pos[0])
	} else {
		got, changed, err = a.ResumeAgent(ctx, pos[0])
	}
	for _, c := range changed {
		fmt.Fprintf(a.Out, "event source mapping %s %sd\n", c, map[string]string{"pause": "disable", "resume": "enable"}[verb])
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, pos[0], err)
	}
	fmt.Fprintln(a.Out, describePause(got))
	return nil
}

// PauseAgent pauses an agent: the pause record first (the supervisor then
// holds its steps, local pollers stop), then, with Mappings, the event
// source mappings reading its queues are disabled. It returns the mappings
// it changed.
func (a *App) PauseAgent(ctx context.Context, agent string) (sas.AgentPause, []string, error) {
	ps, err := a.pauseStore()
	if err != nil {
		return sas.AgentPause{}, nil, err
	}
	got, err := ps.PauseAgent(ctx, sas.PauseParams{Agent: agent, Now: a.now(), Actor: a.Actor})
	if err != nil || a.Mappings == nil {
		return got, nil, err
	}
	changed, err := a.Mappings.Set(ctx, a.agentQueueURLs(agent), false)
	if err != nil {
		err = fmt.Errorf("paused, but the event source mappings are not all disabled (the agent may still consume): %w", err)
	}
	return got, changed, err
}

// ResumeAgent resumes an agent: its event source mappings are enabled
// first (with Mappings), then the pause record ends.
func (a *App) ResumeAgent(ctx context.Context, agent string) (sas.AgentPause, []string, error) {
	ps, err := a.pauseStore()
	if err != nil {
		return sas.AgentPause{}, nil, err
	}
	var changed []string
	if a.Mappings != nil {
		if changed, err = a.Mappings.Set(ctx, a.agentQueueURLs(agent), true); err != nil {
			return sas.AgentPause{}, changed, fmt.Errorf("enabling the event source mappings (the agent stays paused): %w", err)
		}
	}
	got, err := ps.ResumeAgent(ctx, sas.PauseParams{Agent: agent, Now: a.now(), Actor: a.Actor})
	return got, changed, err
}

func (a *App) now() time.Time {
	if a.Clock == nil {
		return time.Now().UTC()
	}
	return a.Clock.Now()
}

// agentQueueURLs are the queues an agent consumes: its own and its lane,
// or the shared agent queue.
func (a *App) agentQueueURLs(agent string) []string {
	if q, ok := a.AgentQueues.ByAgent[agent]; ok {
		var out []string
		for _, u := range []string{q.URL, q.PriorityURL} {
			if u != "" {
				out = append(out, u)
			}
		}
		return out
	}
	if a.AgentQueues.Default != "" {
		return []string{a.AgentQueues.Default}
	}
	return nil
}

func (a *App) pauses(ctx context.Context, args []string) error {
	if _, err := parse(a.flags("pauses"), args); err != nil {
		return err
	}
	ps, err := a.pauseStore()
	if err != nil {
		return err
	}
	all, err := ps.AgentPauses(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintln(a.Out, describePause(all[n]))
	}
	return nil
}

func describePause(p sas.AgentPause) string {
	switch {
	case p.Paused():
		return fmt.Sprintf("%s paused since %s by %s", p.Agent, p.PausedAt.Format(time.RFC3339), p.Actor)
	case !p.PausedAt.IsZero():
		return fmt.Sprintf("%s running (paused %s, resumed %s by %s)", p.Agent, p.PausedAt.Format(time.RFC3339), p.ResumedAt.Format(time.RFC3339), p.Actor)
	}
	return p.Agent + " running (never paused)"
}
