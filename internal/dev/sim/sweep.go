package sim

import (
	"fmt"
	"io"
	"sort"
	"time"
)

// SweepResult sums up a sweep over many seeds.
type SweepResult struct {
	Seeds, Failed, Events int
	Orders, Calls, Alerts int
	// DeadLettered and Redriven count the dead letters, and those the
	// operator moved back (redrive.go); RedrivenSeeds the seeds that
	// redrove any.
	DeadLettered, Redriven, RedrivenSeeds int
	Elapsed                               time.Duration
	// ByRule counts the failed seeds by the first rule each broke.
	ByRule   map[string]int
	Failures []Result // the first few
}

// Sweep runs seeds from..from+n-1, each on its configuration (ForSeed)
// as configure changes it (nil: as drawn), reporting each failure to out
// as it is found (its summary with the last traceLines events), and keeps
// the first keep failures.
func Sweep(from int64, n int, configure func(Config) Config, out io.Writer, traceLines, keep int) SweepResult {
	s := SweepResult{ByRule: map[string]int{}}
	began := time.Now()
	for seed := from; seed < from+int64(n); seed++ {
		cfg := ForSeed(seed)
		if configure != nil {
			cfg = configure(cfg)
		}
		r := Run(cfg)
		s.Seeds++
		s.Events += r.Events
		s.Orders += r.Orders
		s.Calls += r.Calls
		s.Alerts += r.Alerts
		s.DeadLettered += r.DeadLettered
		s.Redriven += r.Redriven
		if r.Redriven > 0 {
			s.RedrivenSeeds++
		}
		if r.Failed() {
			s.Failed++
			s.ByRule[r.Violations[0].Rule]++
			if len(s.Failures) < keep {
				s.Failures = append(s.Failures, r)
				if out != nil {
					fmt.Fprintln(out, r.Summary(traceLines))
				}
			}
		}
	}
	s.Elapsed = time.Since(began)
	return s
}

// String is the sweep's one-line account.
func (s SweepResult) String() string {
	rate := float64(s.Seeds) / s.Elapsed.Seconds()
	line := fmt.Sprintf("%d seeds, %d failed, in %s (%.0f seeds/s): %d events, %d orders, %d remote calls, %d alerts, %d dead letters (%d redriven, in %d seeds)",
		s.Seeds, s.Failed, s.Elapsed.Round(time.Millisecond), rate, s.Events, s.Orders, s.Calls, s.Alerts, s.DeadLettered, s.Redriven, s.RedrivenSeeds)
	rules := make([]string, 0, len(s.ByRule))
	for r := range s.ByRule {
		rules = append(rules, r)
	}
	sort.Strings(rules)
	for _, r := range rules {
		line += fmt.Sprintf("\n  %s: %d seeds", r, s.ByRule[r])
	}
	return line
}
