package judge

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// PrintVerdict writes the judgement: the invariants, the explained failures
// by rule, and every defect (in full for the first maxDetailed).
func PrintVerdict(out io.Writer, v Verdict) {
	const maxDetailed, maxListed = 30, 30
	fmt.Fprintf(out, "\n== verdict ==\n")
	fmt.Fprintf(out, "processed               %d of %d (%.1f%% of the %d neither rejected nor refused for good by their remote; required %.1f%%)\n",
		v.Processed, v.Orders, 100*v.ProcessedShare(), v.Orders-v.Rejected-v.RefusedForGood, 100*v.MinProcessed)
	rules := make([]string, 0, len(v.Explained))
	for r := range v.Explained {
		rules = append(rules, r)
	}
	sort.Strings(rules)
	for _, r := range rules {
		fmt.Fprintf(out, "explained failures      %d: %s\n", v.Explained[r], r)
	}
	for _, inv := range []struct {
		name string
		list []string
	}{{"lost orders", v.Lost}, {"double effects", v.DoubleEffects}, {"illegal transitions", v.Illegal}, {"alert mismatches", v.Alerts}, {"compensation mismatches", v.Compensation}} {
		fmt.Fprintf(out, "%-23s %d\n", inv.name, len(inv.list))
		for i, l := range inv.list {
			if i == maxListed {
				fmt.Fprintf(out, "  … and %d more\n", len(inv.list)-maxListed)
				break
			}
			fmt.Fprintf(out, "  %s\n", l)
		}
	}
	fmt.Fprintf(out, "unexplained failures    %d (failed by waiting: %d)\n", len(v.Defects), v.FailedByWaiting)
	for i, d := range v.Defects {
		fmt.Fprintf(out, "  DEFECT %s (%s): %s\n", d.OrderID, d.State, strings.Join(d.Why, " | "))
		if i < maxDetailed {
			fmt.Fprint(out, d.Detail)
		}
	}
	if p := v.Problems(); len(p) > 0 {
		fmt.Fprintf(out, "\nFAIL: %s\n", strings.Join(p, "; "))
	} else {
		fmt.Fprintln(out, "\nPASS: nothing lost, nothing done twice, every transition legal, one alert per failed step, compensation exactly for what took effect, and every failure explained by a fault injected into its order.")
	}
}
