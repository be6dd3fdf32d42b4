package sas

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A registry refuses a graph no order could run, whoever built it (a Go
// caller may pass definitions that never went through workflow.Validate),
// each with one line.
func TestRegistryRefusesABadGraph(t *testing.T) {
	t.Parallel()
	step := func(name string, after []int) StepDef {
		return StepDef{Name: name, Agent: "x", Timeout: time.Second, After: after}
	}
	for reason, steps := range map[string][]StepDef{
		"follows itself":    {step("a", nil), step("b", []int{1})},
		"does not exist":    {step("a", nil), step("b", []int{7})},
		"follows a twice":   {step("a", nil), step("b", []int{0, 0})},
		"first step starts": {step("a", []int{1}), step("b", nil)},
		"cycle: b → c → b":  {step("a", nil), step("b", []int{0, 2}), step("c", []int{1})},
		"follows 11 steps, at most": append(make([]StepDef, 0), func() []StepDef {
			s := []StepDef{step("a", nil)}
			for i := 1; i <= 11; i++ {
				s = append(s, step(string(rune('a'+i)), []int{0}))
			}
			s = append(s, step("z", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}))
			return s
		}()...),
		"step b starts with the order in a workflow with branches: it takes no condition": {step("a", nil), {Name: "b", Agent: "x", Timeout: time.Second, After: []int{}, When: "payload.b"}},
		"step a starts with the order in a workflow with branches":                        {{Name: "a", Agent: "x", Timeout: time.Second, When: "payload.a"}, step("b", []int{0})},
	} {
		_, err := NewRegistry(Workflow{Name: "w", Steps: steps})
		require.ErrorIs(t, err, ErrInvalid, reason)
		require.Contains(t, err.Error(), reason)
		require.NotContains(t, err.Error(), "\n")
	}
	w := Workflow{Name: "w", Steps: []StepDef{step("a", nil), step("b", []int{}), step("c", []int{0, 1})}}
	_, err := NewRegistry(w)
	require.NoError(t, err, "a second step that starts with the order, and a join")
	require.Equal(t, []int{1}, w.Roots())
	require.Equal(t, []int{0, 1}, w.Ancestors(2))
	w.Steps[2].When = "payload.c"
	_, err = NewRegistry(w)
	require.NoError(t, err, "a condition on a step that follows another")
}
