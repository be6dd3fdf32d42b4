// Command sassim runs the protocol simulator (internal/sim,
// docs/simulation.md): a sweep over many seeds, or one seed replayed with
// its whole trace.
//
//	sassim -seeds 10000          # seeds 1..10000; exit 1 if any failed
//	sassim -seed 1234 -v         # replay one seed, printing every event
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sas-go/sas/internal/sim"
)

func main() {
	seeds := flag.Int("seeds", 1000, "how many seeds to run, from -from")
	from := flag.Int64("from", 1, "the first seed of the sweep")
	seed := flag.Int64("seed", 0, "replay this one seed (with -v: its whole trace)")
	verbose := flag.Bool("v", false, "print every event of a replayed seed as it happens")
	lines := flag.Int("trace", 60, "events of a failing seed's trace printed in a sweep")
	keep := flag.Int("keep", 5, "failing seeds reported in full in a sweep")
	flag.Parse()

	if *seed != 0 {
		cfg := sim.ForSeed(*seed)
		if *verbose {
			cfg.Log = os.Stdout
		}
		r := sim.Run(cfg)
		if r.Failed() {
			fmt.Print(r.Summary(*lines))
			os.Exit(1)
		}
		fmt.Printf("seed %d: every invariant held (%d events, %s virtual, %d orders, %d remote calls)\n",
			*seed, r.Events, r.Virtual, r.Orders, r.Calls)
		return
	}
	s := sim.Sweep(*from, *seeds, os.Stdout, *lines, *keep)
	fmt.Println(s)
	if s.Failed > 0 {
		os.Exit(1)
	}
}
