package sasctl

import (
	"fmt"
	"strings"

	"github.com/sas-go/sas/internal/sas"
)

// ElementStates is how many of elements are in each state, in the order of
// sas.States, as "Processing 3, Processed 7".
func ElementStates(elements []sas.StepRecord) string {
	n := map[sas.ProcessState]int{}
	for _, e := range elements {
		n[e.ProcessState]++
	}
	var parts []string
	for _, st := range sas.States {
		if n[st] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, n[st]))
		}
	}
	return strings.Join(parts, ", ")
}
