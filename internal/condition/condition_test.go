package condition_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/condition"
)

func TestEval(t *testing.T) {
	t.Parallel()
	in := condition.Input{
		Payload:  json.RawMessage(`{"needsCar":true,"amount":150,"rate":0.5,"items":[1,2,3],"who":{"tier":"gold"}}`),
		Results:  map[string]json.RawMessage{"approve": json.RawMessage(`{"approved":false,"by":"ann"}`)},
		OrderID:  "o-1",
		Workflow: "trip",
	}
	for expr, want := range map[string]bool{
		`payload.needsCar`:                              true,
		`payload.amount > 100`:                          true,
		`payload.amount == 150`:                         true,
		`payload.rate < 1`:                              true,
		`size(payload.items) == 3`:                      true,
		`payload.who.tier == "gold"`:                    true,
		`results.approve.approved`:                      false,
		`!results.approve.approved`:                     true,
		`has(results.pay)`:                              false,
		`"approve" in results`:                          true,
		`has(payload.missing) && payload.missing`:       false,
		`order.workflow == "trip" && order.id == "o-1"`: true,
		`payload.items.exists(i, i > 2)`:                true,
	} {
		c, err := condition.Compile(expr)
		require.NoError(t, err, expr)
		got, err := c.Eval(in)
		require.NoError(t, err, expr)
		require.Equal(t, want, got, expr)
		again, _ := c.Eval(in)
		require.Equal(t, got, again, "deterministic: %s", expr)
	}
}

// A condition that does not compile, or is not a bool, is refused at load
// with one line saying why.
func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	for expr, why := range map[string]string{
		``:                          "empty",
		`payload.x ==`:              "does not compile",
		`payload.amount + 1`:        "not bool",
		`payload.flag`:              "", // dyn: checked when evaluated
		`1 + 2`:                     "not bool",
		`"yes"`:                     "not bool",
		`unknown.x`:                 "undeclared reference",
		`results.approve.size() ==`: "does not compile",
		strings.Repeat("a", 2000):   "more than",
	} {
		_, err := condition.Compile(expr)
		if why == "" {
			require.NoError(t, err, expr)
			continue
		}
		require.ErrorContains(t, err, why, expr)
		require.NotContains(t, err.Error(), "\n", "one line: %q", expr)
	}
}

// A condition that cannot be evaluated says why: a missing field, a value
// that is not a bool, the cost limit.
func TestEvalFails(t *testing.T) {
	t.Parallel()
	long := make([]int, 1000)
	items, _ := json.Marshal(long)
	in := condition.Input{Payload: json.RawMessage(`{"n":1,"items":` + string(items) + `}`)}
	for expr, why := range map[string]string{
		`payload.missing`:    "no such key",
		`payload.n`:          "not a bool",
		`results.approve.ok`: "no such key",
		`payload.items.all(i, payload.items.all(j, i == j || true))`: "cost limit",
	} {
		c, err := condition.Compile(expr)
		require.NoError(t, err, expr)
		_, err = c.Eval(in)
		require.ErrorContains(t, err, why, expr)
		require.NotContains(t, err.Error(), "\n", expr)
	}
}
