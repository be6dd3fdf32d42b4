// Command sasrun is `make run`: the whole system end to end on local
// emulators. It starts DynamoDB Local and the SQS emulator (unless
// AWS_ENDPOINT_URL points elsewhere), creates the tables and queues, starts
// the remote-service simulator with faults switched on, runs the scheduler,
// agent and supervisor in this process, submits a few hundred orders (and a
// few bad ones), shows live progress, and ends with a summary and a verdict:
// it exits 1 when an order was lost or done twice, a transition was illegal,
// alerts or compensation do not match what happened, a failure is not
// explained by a fault injected into its order, or too few were processed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sas-go/sas/internal/dev/localrun"
	"github.com/sas-go/sas/internal/dev/rig"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := localrun.DemoOptions{}
	flag.IntVar(&opts.Orders, "orders", 300, "orders to submit")
	flag.Float64Var(&opts.MultiStep, "multi", 0.3, "share of orders on the three-step workflow")
	flag.Float64Var(&opts.Branches, "branches", 0, "share of orders on the three-step workflow's split form: its first two steps as branches at once, the third their join")
	flag.DurationVar(&opts.Timeout, "timeout", 4*time.Minute, "give up waiting after this long")
	flag.Float64Var(&opts.TransientRate, "transient", 0.10, "share of remote calls that fail transiently (503/429)")
	flag.Float64Var(&opts.PermanentRate, "permanent", 0.01, "share of remote calls refused for good (402)")
	flag.Float64Var(&opts.HangRate, "hang", 0.01, "share of remote calls that hang past any deadline")
	flag.Float64Var(&opts.LostRate, "lost", 0.02, "share of successful calls whose response is lost")
	flag.Uint64Var(&opts.Seed, "seed", 1, "simulator seed")
	flag.StringVar(&opts.LostMode, "lost-mode", "error", "how a response is lost after the effect: error (503), drop or hang")
	flag.DurationVar(&opts.KillEvery, "kill-every", 0, "kill a random scheduler or agent instance this often, mid-batch (chaos)")
	flag.Float64Var(&opts.DuplicateRate, "duplicate", 0, "share of sent messages delivered twice (chaos)")
	flag.Float64Var(&opts.KillBeforeSendRate, "kill-before-send", 0, "share of a scheduler's agent-request sends on which it dies between its write and its send (chaos)")
	flag.IntVar(&opts.Supervisors, "supervisors", 2, "supervisors running at once")
	flag.DurationVar(&opts.ClockSkew, "clock-skew", 0, "spread the supervisors' clocks over ±this (chaos)")
	flag.Float64Var(&opts.MinProcessed, "min-processed", 0.97, "fail unless at least this share of orders is processed")
	flag.DurationVar(&opts.PickupTimeout, "pickup-timeout", 10*time.Second, "a claim's allowance for its request to be picked up before the agent reports a late pick-up")
	flag.IntVar(&opts.Warmup, "warmup", 0, "orders run and settled first, on their own: the healthy rate the run's goodput is measured against")
	flag.DurationVar(&opts.OutageFor, "outage-for", 0, "take the remote service down (every call answered 503) for this long (chaos)")
	flag.DurationVar(&opts.OutageAt, "outage-at", time.Minute, "with -outage-for: when the outage starts, after the orders are submitted")
	flag.Parse()
	if err := run(ctx, opts, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sasrun:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts localrun.DemoOptions, out io.Writer) error {
	r, err := rig.Start(ctx, rig.Options{})
	if err != nil {
		return fmt.Errorf("starting the emulators: %w", err)
	}
	defer r.Stop()
	if why := r.ExternalReason(); why != "" {
		fmt.Fprintln(out, "using the endpoints already set:", why)
	}
	for _, kv := range r.Env() {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	sum, err := localrun.Demo(ctx, opts, out)
	if err != nil {
		return err
	}
	if !sum.OK() {
		return fmt.Errorf("the run failed its verdict: %s", sum.Problem())
	}
	return nil
}
