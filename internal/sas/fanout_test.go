package sas_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/condition"
	"github.com/sas-go/sas/internal/sas"
)

// An element's key is past every step's and names its step and index; its
// idempotency key is its step's and ":i<index>", then a generation and
// ":undo" as a step's.
func TestElementKeys(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ step, index int }{{0, 0}, {0, 999}, {3, 7}, {49, 0}, {49, sas.MaxForEach - 1}} {
		k := sas.ElementStep(c.step, c.index)
		require.True(t, sas.IsElement(k))
		s, i := sas.ElementOf(k)
		require.Equal(t, c, struct{ step, index int }{s, i})
		require.Equal(t, c.step, sas.StepOf(k))
		first, last := sas.ElementKeyRange(c.step)
		require.True(t, first <= k && k <= last)
		if c.step > 0 {
			_, prevLast := sas.ElementKeyRange(c.step - 1)
			require.Less(t, prevLast, first, "the elements of two steps never share a key")
		}
	}
	for step := range 50 {
		require.False(t, sas.IsElement(step), "a step's key is no element's")
		require.Equal(t, step, sas.StepOf(step))
	}
	require.Equal(t, "o-1:2", sas.IdempotencyKey("o-1", 2, 0, false), "a step's key is unchanged")
	require.Equal(t, "o-1:2:i7", sas.IdempotencyKey("o-1", sas.ElementStep(2, 7), 0, false))
	require.Equal(t, "o-1:2:i7:undo", sas.IdempotencyKey("o-1", sas.ElementStep(2, 7), 0, true))
	require.Equal(t, "o-1:2:i0:g1:undo", sas.IdempotencyKey("o-1", sas.ElementStep(2, 0), 1, true))
}

// A fan-out's list is evaluated on the order: its elements in order, or a
// named reason that fails the step for good (not a list, too long, a
// missing field).
func TestForEachEval(t *testing.T) {
	t.Parallel()
	in := condition.Input{Payload: json.RawMessage(`{"lines":[{"sku":"a"},{"sku":"b"}],"one":{"sku":"a"}}`),
		Results: map[string]json.RawMessage{"quote": json.RawMessage(`{"skus":["x","y","z"]}`)}}
	items, why := sas.ForEach{Items: "payload.lines"}.Eval(in)
	require.Empty(t, why)
	require.Equal(t, []json.RawMessage{json.RawMessage(`{"sku":"a"}`), json.RawMessage(`{"sku":"b"}`)}, items)
	items, why = sas.ForEach{Items: "results.quote.skus"}.Eval(in)
	require.Empty(t, why)
	require.Len(t, items, 3)

	long := `{"lines":[` + strings.Repeat(`1,`, sas.MaxForEach) + `1]}`
	for expr, want := range map[string]string{
		"payload.one":     "not a list",
		"payload.missing": "no such key",
		"payload.lines[":  "does not compile",
	} {
		_, why := sas.ForEach{Items: expr}.Eval(in)
		require.True(t, strings.HasPrefix(why, sas.ErrorForEachItems+": "), why)
		require.Contains(t, why, want)
	}
	_, why = sas.ForEach{Items: "payload.lines"}.Eval(condition.Input{Payload: json.RawMessage(long)})
	require.Contains(t, why, "1001 elements, more than 1000")

	require.Equal(t, sas.DefaultConcurrency, sas.ForEach{}.Window())
	require.Equal(t, 4, sas.ForEach{Concurrency: 4}.Window())
}

// A completed fan-out's result is its elements' results in index order,
// null for one that returned nothing; past MaxResultBytes it is a named
// ResultTooLarge.
func TestElementResults(t *testing.T) {
	t.Parallel()
	got, why := sas.ElementResults([]json.RawMessage{json.RawMessage(`{"id":1}`), nil, json.RawMessage(`"c"`)})
	require.Empty(t, why)
	require.Equal(t, `[{"id":1},null,"c"]`, string(got))
	got, why = sas.ElementResults(nil)
	require.Empty(t, why)
	require.Equal(t, `[]`, string(got), "an empty fan-out's result is []")

	big := make([]json.RawMessage, sas.MaxForEach)
	for i := range big {
		big[i] = json.RawMessage(`"` + strings.Repeat("x", 15) + `"`) // 17 bytes and a comma: 18 KB in all
	}
	got, why = sas.ElementResults(big)
	require.Nil(t, got)
	require.True(t, strings.HasPrefix(why, sas.ErrorResultTooLarge+": "), why)
	// At the bound exactly, it is within.
	exact := []json.RawMessage{json.RawMessage(`"` + strings.Repeat("x", sas.MaxResultBytes-4) + `"`)}
	got, why = sas.ElementResults(exact)
	require.Empty(t, why)
	require.Len(t, got, sas.MaxResultBytes)
	require.True(t, json.Valid(got))
}

// A fan-out is part of the definition an order runs on: stored and read
// back, and it changes the version (a definition without one keeps its
// version).
func TestVersionCarriesTheFanOut(t *testing.T) {
	t.Parallel()
	w := sas.Workflow{Name: "order", Steps: []sas.StepDef{{Name: "reserve", Agent: "stock", Action: "hold", Timeout: 30 * time.Second}}}
	require.JSONEq(t, `{"name":"order","steps":[{"name":"reserve","agent":"stock","action":"hold","timeoutMs":30000}]}`, string(sas.EncodeWorkflow(w)))
	u := sas.Workflow{Name: "order", Steps: []sas.StepDef{w.Steps[0]}}
	u.Steps[0].ForEach = &sas.ForEach{Items: "payload.lines", Concurrency: 4}
	require.NotEqual(t, w.Version(), u.Version())
	back, err := sas.DecodeWorkflow(sas.EncodeWorkflow(u))
	require.NoError(t, err)
	require.Equal(t, u, back)
}

// A fan-out no scheduler could run is refused for what it is.
func TestRegistryRefusesAFanOutItCannotRun(t *testing.T) {
	t.Parallel()
	step := sas.StepDef{Name: "reserve", Agent: "stock", Action: "hold", Timeout: time.Second, ForEach: &sas.ForEach{Items: "payload.lines"}}
	_, err := sas.NewRegistry(sas.Workflow{Name: "order", Steps: []sas.StepDef{step}})
	require.NoError(t, err)
	for f, want := range map[sas.ForEach]string{
		{Items: "1 + 2"}: "not a list",
		{Items: "payload.lines", Concurrency: 51}: "concurrency 51",
	} {
		s := step
		s.ForEach = &f
		_, err := sas.NewRegistry(sas.Workflow{Name: "order", Steps: []sas.StepDef{s}})
		require.ErrorContains(t, err, want)
	}
	s := step
	s.Agent, s.Action, s.Timeout = "", "", 0
	s.Callback = &sas.Callback{Timeout: time.Hour}
	_, err = sas.NewRegistry(sas.Workflow{Name: "order", Steps: []sas.StepDef{s}})
	require.ErrorContains(t, err, "only a step an agent runs may fan out")
}

// An element's claim of its next attempt is fenced on its fan-out step
// running; its undo's claim, and a step's, are not; naming the fan-out step
// among such a claim's siblings is refused (it is fenced already).
func TestAnElementsNextAttemptIsFencedOnItsFanOut(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	el := sas.StepKey{OrderID: "o-1", Step: sas.ElementStep(2, 7)}
	p := sas.ClaimParams{Key: el, Attempt: 1, Owner: "a", Now: now, CompleteBy: now.Add(time.Minute), Siblings: []sas.StepSeen{{Step: 0, State: sas.Processed}}}
	require.Equal(t, []sas.StepSeen{{Step: 0, State: sas.Processed}, {Step: 2, State: sas.Processing}}, p.Fences())
	require.NoError(t, p.Check())
	require.Len(t, p.Siblings, 1, "Fences leaves the siblings as they were")

	undo := p
	undo.From = sas.Error
	require.Equal(t, p.Siblings, undo.Fences(), "an element's undo is claimed once its fan-out is being undone")
	step := p
	step.Key = sas.StepKey{OrderID: "o-1", Step: 2}
	step.Siblings = nil
	require.Empty(t, step.Fences())

	named := p
	named.Siblings = []sas.StepSeen{{Step: 2, State: sas.Error}}
	require.ErrorIs(t, named.Check(), sas.ErrInvalid)
}
