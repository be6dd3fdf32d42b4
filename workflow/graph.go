package workflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sas-go/sas/internal/sas"
)

// validateGraph checks the steps' After (at path wp): every name a step of
// the workflow, no step following itself or a step twice, only the first
// step following none, the limits on joins and forks, no cycle, and no
// condition on a step that starts with the order of a graph (it would be
// decided at submission, which settles no branch: docs/workflows.md,
// "Choices in branches"). Each problem is one line.
func validateGraph(wp string, w Workflow, bad func(path, format string, args ...any)) {
	index := map[string]int{}
	for j, s := range w.Steps {
		if _, dup := index[s.Name]; !dup {
			index[s.Name] = j
		}
	}
	preds := make([][]int, len(w.Steps))
	forks := make([]int, len(w.Steps))
	sound := true
	for j, s := range w.Steps {
		ap := fmt.Sprintf("%s.steps[%d].after", wp, j)
		switch {
		case s.After == nil && j > 0:
			preds[j] = []int{j - 1}
			forks[j-1]++
			continue
		case s.After == nil:
			continue
		case j == 0 && len(s.After) > 0:
			bad(ap, "the first step starts with the order and follows no step")
			sound = false
			continue
		case len(s.After) == 0:
			continue // starts with the order, as the first step does
		case len(s.After) > MaxJoin:
			bad(ap, "%q follows %d steps, at most %d", s.Name, len(s.After), MaxJoin)
		}
		for k, name := range s.After {
			np := fmt.Sprintf("%s[%d]", ap, k)
			p, ok := index[name]
			switch {
			case name == s.Name:
				bad(np, "%q cannot follow itself", name)
				sound = false
			case !ok:
				bad(np, "%q is not a step of this workflow", name)
				sound = false
			case slices.Contains(preds[j], p):
				bad(np, "%q is named twice", name)
			default:
				preds[j] = append(preds[j], p)
				forks[p]++
			}
		}
	}
	graph := false
	for _, s := range w.Steps {
		graph = graph || s.After != nil
	}
	for j, s := range w.Steps {
		if graph && s.When != "" && (j == 0 || (s.After != nil && len(s.After) == 0)) {
			bad(fmt.Sprintf("%s.steps[%d].when", wp, j), "step %q starts with the order in a workflow with branches: it takes no condition (put it on a step that follows another)", s.Name)
		}
	}
	for p, n := range forks {
		if n > MaxFork {
			bad(fmt.Sprintf("%s.steps[%d]", wp, p), "%d steps follow %q, at most %d", n, w.Steps[p].Name, MaxFork)
		}
	}
	if !sound {
		return
	}
	if c := sas.Cycle(preds); c != nil {
		names := make([]string, len(c))
		for k, i := range c {
			names[k] = w.Steps[i].Name
		}
		bad(fmt.Sprintf("%s.steps[%d].after", wp, c[0]), "the steps follow each other in a cycle: %s", strings.Join(names, " → "))
	}
}

// MarshalJSON writes s as a workflow file has it, keeping an empty After
// (a step that starts with the order), which omitempty would drop.
func (s Step) MarshalJSON() ([]byte, error) {
	type plain Step
	out := struct {
		plain
		After *[]string `json:"after,omitempty"`
	}{plain: plain(s)}
	if s.After != nil {
		after := s.After
		out.After = &after
	}
	return json.Marshal(out)
}
