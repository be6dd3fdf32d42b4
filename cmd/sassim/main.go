// Command sassim runs the protocol simulator (internal/dev/sim,
// docs/simulation.md): a sweep over many seeds, or one seed replayed with
// its whole trace.
//
//	sassim -seeds 10000                  # seeds 1..10000; exit 1 if any failed
//	sassim -seed 1234 -v                 # replay one seed, printing every event
//	sassim -seeds 500 -faults death=0.05 # every seed with deaths at 5% a stop
//	sassim -seed 1234 -swarm=false       # the seed on the default fault mix
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sas-go/sas/internal/dev/sim"
)

func main() {
	seeds := flag.Int("seeds", 1000, "how many seeds to run, from -from")
	from := flag.Int64("from", 1, "the first seed of the sweep")
	seed := flag.Int64("seed", 0, "replay this one seed (with -v: its whole trace)")
	verbose := flag.Bool("v", false, "print every event of a replayed seed as it happens")
	lines := flag.Int("trace", 60, "events of a failing seed's trace printed in a sweep")
	keep := flag.Int("keep", 5, "failing seeds reported in full in a sweep")
	swarm := flag.Bool("swarm", true, "draw each seed's fault mix from the seed (swarm testing); false: every seed on the default mix")
	faults := flag.String("faults", "", "fault rates set on every seed's mix, KIND=RATE,... (kinds: death, ambiguous, send, alert, transient, refusal, lost, store, unhandled: a probability; duplicate, jump, outage: a weight)")
	fanOutFailures := flag.Bool("fanout-failures", true, "fan-out seeds run the whole fault mix: elements fail, are undone, rescued and cancelled; false keeps them on the happy path (docs/simulation.md)")
	flag.Parse()

	// Checked before anything runs: a bad list is an error, not a sweep
	// on some other mix.
	if _, err := sim.ParseFaults(sim.DefaultFaults, *faults); err != nil {
		fmt.Fprintln(os.Stderr, "sassim: -faults:", err)
		os.Exit(2)
	}
	configure := func(cfg sim.Config) sim.Config {
		if !*swarm {
			cfg.Faults = sim.DefaultFaults
		}
		cfg.Faults, _ = sim.ParseFaults(cfg.Faults, *faults)
		cfg.FanOutFailures = *fanOutFailures
		return cfg
	}

	if *seed != 0 {
		cfg := configure(sim.ForSeed(*seed))
		if *verbose {
			cfg.Log = os.Stdout
		}
		r := sim.Run(cfg)
		if r.Failed() {
			fmt.Print(r.Summary(*lines))
			os.Exit(1)
		}
		fmt.Printf("seed %d: every invariant held (%d events, %s virtual, %d orders, %d remote calls; faults %s)\n",
			*seed, r.Events, r.Virtual, r.Orders, r.Calls, cfg.Faults)
		return
	}
	s := sim.Sweep(*from, *seeds, configure, os.Stdout, *lines, *keep)
	fmt.Println(s)
	if s.Failed > 0 {
		os.Exit(1)
	}
}
