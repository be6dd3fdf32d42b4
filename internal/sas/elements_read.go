package sas

import (
	"context"
	"fmt"
)

// IsFanOut reports whether step r of the order is a fan-out (docs/workflows.md,
// "Fan-out over a list"): its definition says so (Def), or, without it, its
// record counts elements.
func (v OrderView) IsFanOut(r StepRecord) bool {
	if v.Def != nil && r.Step >= 0 && r.Step < len(v.Def.Steps) {
		return v.Def.Steps[r.Step].ForEach != nil
	}
	return r.ForEachCount > 0
}

// AllElements reads the element records of fan-out step k, in index order,
// every page (FanOutStore.ListElements): what the test kit, sasctl show and
// the console show. Only the elements started so far have records. A store
// that keeps no elements (not a FanOutStore) has none.
func AllElements(ctx context.Context, st any, k StepKey) ([]StepRecord, error) {
	fs, ok := st.(FanOutStore)
	if !ok {
		return nil, nil
	}
	var out []StepRecord
	for cursor := ""; ; {
		page, err := fs.ListElements(ctx, ListElementsParams{Key: k, Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("reading the elements of %s step %d: %w", k.OrderID, k.Step, err)
		}
		out = append(out, page.Records...)
		if cursor = page.NextCursor; cursor == "" {
			return out, nil
		}
	}
}
