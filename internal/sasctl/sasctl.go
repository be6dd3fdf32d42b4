// Package sasctl is the operator's command line: submit an order, show one
// order with its steps and history, list steps by state, resubmit failed
// steps (one, or in bulk with a dry run), compensate an order, and watch the
// system live. cmd/sasctl wires it to AWS; tests wire it to the in-memory
// store and queue.
package sasctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/sizing"
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
// from queues (LambdaMappings), naming those it changed.
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
  compensate ORDER_ID [-reason TEXT]   undo the order's completed steps, newest first (refused while a step is in flight)
  cancel     ORDER_ID [-reason TEXT] [-dry-run]   stop a running order: no later step starts, the step in flight settles, what took effect is undone
  complete   TOKEN [-result JSON]      complete a waiting callback step (its token from the waiting status)
  complete   -order ID -step N [...]   the same, named by order and step (an operator's: no token needed)
  fail       TOKEN [-reason TEXT] [-reject]   fail it (compensated; -reject: a business rejection, nobody paged)
  heartbeat  TOKEN                     move a waiting step's heartbeat deadline on
  watch      [-interval 2s] [-count N] live counts per state and the oldest stuck step
  pause      AGENT                     stop consuming the agent's queues; its steps wait, unjudged
  resume     AGENT                     end the pause; the time paused does not count against the steps
  pauses                               list the agents' pauses
  schedules  -file FILE                the schedules FILE declares: last run (its state), runs, skips, next run
  console    [-addr 127.0.0.1:8089] [-read-only] [-remote -host NAME -tls-cert F -tls-key F]   the web console (docs/console.md)

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
		a.PickupTimeout = sizing.DefaultPickupTimeout
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
		"compensate": a.compensate, "watch": a.watch, "cancel": a.cancel,
		"pause": a.pause, "resume": a.pause, "pauses": a.pauses,
		"schedules": a.schedulesCmd,
		"complete":  a.complete(sas.OutcomeDone), "fail": a.complete(sas.OutcomeFailed), "heartbeat": a.complete(sas.OutcomeHeartbeat),
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

func (a *App) now() time.Time {
	if a.Clock == nil {
		return time.Now().UTC()
	}
	return a.Clock.Now()
}
