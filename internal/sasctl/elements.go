package sasctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/sas-go/sas/internal/sas"
)

// Elements reads the element records of fan-out step k, in index order,
// every page (sas.FanOutStore.ListElements): only the elements started so
// far have records. A store that keeps no elements has none to show.
func Elements(ctx context.Context, st sas.StateStore, k sas.StepKey) ([]sas.StepRecord, error) {
	fs, ok := st.(sas.FanOutStore)
	if !ok {
		return nil, nil
	}
	var out []sas.StepRecord
	for cursor := ""; ; {
		page, err := fs.ListElements(ctx, sas.ListElementsParams{Key: k, Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("reading the elements of %s step %d: %w", k.OrderID, k.Step, err)
		}
		out = append(out, page.Records...)
		if cursor = page.NextCursor; cursor == "" {
			return out, nil
		}
	}
}

// IsFanOut reports whether step r of v is a fan-out: its definition says
// so (v.Def), or, without it, its record counts elements.
func IsFanOut(v sas.OrderView, r sas.StepRecord) bool {
	if v.Def != nil && r.Step < len(v.Def.Steps) {
		return v.Def.Steps[r.Step].ForEach != nil
	}
	return r.ForEachCount > 0
}

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
