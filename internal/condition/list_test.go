package condition_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/condition"
)

// A list expression gives the list's elements as JSON, in order: a list
// from the payload or a result as it was written, one the expression
// builds through CEL's values.
func TestListEval(t *testing.T) {
	t.Parallel()
	in := condition.Input{
		Payload: json.RawMessage(`{"items":[{"sku":"a","qty":2},{"sku":"b","qty":1},"c",12345678901234567,null],"empty":[],"n":3}`),
		Results: map[string]json.RawMessage{"quote": json.RawMessage(`{"lines":[1.5,2]}`)},
	}
	for expr, want := range map[string]string{
		`payload.items`:                           `[{"qty":2,"sku":"a"},{"qty":1,"sku":"b"},"c",12345678901234567,null]`,
		`payload.empty`:                           `[]`,
		`results.quote.lines`:                     `[1.5,2]`,
		`[1, "two", {"three": 3}]`:                `[1,"two",{"three":3}]`,
		`payload.items.filter(i, type(i) == map)`: `[{"qty":2,"sku":"a"},{"qty":1,"sku":"b"}]`,
		`payload.items.filter(i, type(i) == map).map(i, i.sku)`: `["a","b"]`,
	} {
		l, err := condition.CompileList(expr)
		require.NoError(t, err, expr)
		got, err := l.Eval(in, 1000)
		require.NoError(t, err, expr)
		require.NotNil(t, got, expr)
		b, err := json.Marshal(got)
		require.NoError(t, err)
		require.JSONEq(t, want, string(b), expr)
		again, err := l.Eval(in, 1000)
		require.NoError(t, err)
		require.Equal(t, got, again, "deterministic: %s", expr)
	}
}

// What is not a list, or a list too long, is refused: at load when its
// type says so, when evaluated otherwise, each with one line saying why.
func TestListRefuses(t *testing.T) {
	t.Parallel()
	for expr, why := range map[string]string{
		``:                        "empty",
		`payload.items[`:          "does not compile",
		`1 + 2`:                   "not a list",
		`"abc"`:                   "not a list",
		`{"a": 1}`:                "not a list",
		strings.Repeat("a", 2000): "more than",
	} {
		_, err := condition.CompileList(expr)
		require.Error(t, err, expr)
		require.Contains(t, err.Error(), why, expr)
		require.NotContains(t, err.Error(), "\n", expr)
	}
	in := condition.Input{Payload: json.RawMessage(`{"items":[1,2,3,4],"one":{"a":1},"s":"x"}`)}
	for expr, why := range map[string]string{
		`payload.one`:     "not a list",
		`payload.s`:       "not a list",
		`payload.missing`: "no such key",
		`payload.items`:   "4 elements, more than 3",
	} {
		l, err := condition.CompileList(expr)
		require.NoError(t, err, expr)
		_, err = l.Eval(in, 3)
		require.Error(t, err, expr)
		require.Contains(t, err.Error(), why, expr)
		require.NotContains(t, err.Error(), "\n", expr)
	}
}
